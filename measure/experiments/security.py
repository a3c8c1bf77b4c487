"""What vLLM lets through: routes outside --api-key, runtime LoRA loading, media fetches (SSRF).

Every request stays on 127.0.0.1. The media part starts its own small HTTP "internal service" on
loopback that records every request it receives, so "did the server fetch it?" is answered by the
service's own log, not by guessing from error text.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import httpx

from measure.experiment import Experiment, ServerSpec, Step, register
from measure.harness.context import console
from measure.harness.probes import ALLOWED_DOMAIN, API_KEY, InternalService, assert_loopback, closed_port
from measure.harness.profiles import vision_unavailable
from measure.harness.server import STATE_DIR
from measure.schema import Column, DatasetSchema

STATEFUL = ("sleep", "wake_up", "reset", "collective_rpc", "scale", "pause", "resume", "shutdown", "start_profile",
            "stop_profile", "update_weights", "init_weight", "abort")

AUTH = DatasetSchema(
    name="security.auth_routes",
    title={"zh": "--api-key 覆盖了哪些路由", "en": "Which routes --api-key covers"},
    key=("server", "method", "path"),
    columns=(
        Column("server", "str", doc="generate | pooling"),
        Column("method", "str"),
        Column("path", "str"),
        Column("no_key", "int", "HTTP status", nullable=True),
        Column("wrong_key", "int", "HTTP status", nullable=True),
        Column("right_key", "int", "HTTP status", nullable=True),
        Column("requires_key", "bool", doc="no key and wrong key both answered 401"),
        Column("note", "str", nullable=True),
    ),
)
LORA_LOAD = DatasetSchema(
    name="security.lora_runtime_load",
    title={"zh": "运行时加载 LoRA：调用者能否指定任意路径", "en": "Runtime LoRA loading: can a caller name any path"},
    key=("target",),
    columns=(
        Column("target", "str", doc="what the path points at"),
        Column("path", "str"),
        Column("status", "int", "HTTP status"),
        Column("answer", "str", doc="the server's error text, truncated"),
    ),
)
MEDIA_FETCH = DatasetSchema(
    name="security.media_fetch",
    title={"zh": "媒体 URL：服务器替谁去下载", "en": "Media URLs: what the server fetches for a caller"},
    key=("setting", "url_kind"),
    columns=(
        Column("setting", "str", doc="server flags under test"),
        Column("url_kind", "str"),
        Column("service_hit", "bool", doc="the loopback internal service logged a request"),
        Column("paths_requested", "str", doc="what the service logged, in order: /redirect then /secret means the redirect was followed",
               nullable=True),
        Column("status", "int", "HTTP status"),
        Column("answer", "str", doc="error text returned to the client, truncated", nullable=True),
        Column("elapsed_ms", "float", "ms"),
    ),
)


@register
class Security(Experiment):
    name = "security"
    title = {"zh": "安全：认证覆盖、运行时 LoRA、媒体下载", "en": "Security: auth coverage, runtime LoRA, media fetches"}
    datasets = (AUTH, LORA_LOAD, MEDIA_FETCH)

    generate = ServerSpec("chat", ("--api-key", API_KEY, "--enable-lora", "--max-lora-rank", "8"),
                          (("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True"),), label="secured-generate")
    pooling = ServerSpec("reranker", ("--runner", "pooling", "--api-key", API_KEY), label="secured-pooling")

    @staticmethod
    def media_dir() -> Path:
        """The folder --allowed-local-media-path names: one fixed path, so the plan's servers are the run's."""
        return STATE_DIR / "media-probe"

    def media_settings(self, local_dir: str) -> dict[str, tuple[tuple[str, ...], tuple[tuple[str, str], ...]]]:
        limit = ("--max-model-len", "4096")
        return {
            "default": (limit, ()),
            f"--allowed-media-domains {ALLOWED_DOMAIN}": (limit + ("--allowed-media-domains", ALLOWED_DOMAIN), ()),
            f"--allowed-media-domains {ALLOWED_DOMAIN} + VLLM_MEDIA_URL_ALLOW_REDIRECTS=0": (
                limit + ("--allowed-media-domains", ALLOWED_DOMAIN), (("VLLM_MEDIA_URL_ALLOW_REDIRECTS", "0"),)),
            "--allowed-local-media-path set": (limit + ("--allowed-local-media-path", local_dir), ()),
        }

    def plan(self, profile):
        steps = [Step(self.generate, "every route × no key / wrong key / right key; runtime LoRA paths", 60, 20),
                 Step(self.pooling, "every route × no key / wrong key / right key", 60, 20)]
        if "vl" in profile.models:
            for setting, (args, env) in self.media_settings(str(self.media_dir())).items():
                steps.append(Step(ServerSpec("vl", args, env, label="media"), f"media URLs under: {setting}", 6, 10))
        return steps

    def run(self, ctx):
        for spec, label in ((self.generate, "generate"), (self.pooling, "pooling")):
            if ctx.skipped(AUTH) and (label != "generate" or ctx.skipped(LORA_LOAD)):
                continue
            server = ctx.server(spec)
            server.api_key = API_KEY
            self.probe_routes(ctx, server.base_url, label)
            if label == "generate":
                self.probe_lora(ctx, server.base_url)
        reason = "this profile has no vision-language model" if "vl" not in ctx.profile.models else \
            vision_unavailable(ctx.pool.python)
        if reason:
            console.print(f"[yellow]security.media_fetch skipped: {reason}[/]")
            return
        if not ctx.skipped(MEDIA_FETCH):
            self.probe_media(ctx)

    # ---- auth ------------------------------------------------------------------------------
    def probe_routes(self, ctx, base: str, label: str) -> None:
        assert_loopback(base)
        spec = httpx.get(base + "/openapi.json", headers={"Authorization": f"Bearer {API_KEY}"}, timeout=30).json()
        for path, methods in sorted(spec.get("paths", {}).items()):
            for method in sorted(m.upper() for m in methods if m in ("get", "post", "delete", "put")):
                if ctx.done(AUTH, server=label, method=method, path=path):
                    continue
                concrete = path.replace("{", "").replace("}", "")  # /v1/models/{model} -> a literal segment
                if method != "GET" and any(word in path for word in STATEFUL):
                    ctx.record(AUTH, {"server": label, "method": method, "path": path, "requires_key": False,
                                      "note": "not called: changes server state"})
                    continue
                status = {}
                for name, key in (("no_key", None), ("wrong_key", "wrong-key"), ("right_key", API_KEY)):
                    headers = {"Authorization": f"Bearer {key}"} if key else {}
                    try:
                        r = httpx.request(method, base + concrete, headers=headers, timeout=60,
                                          json={} if method in ("POST", "PUT") else None)
                        status[name] = r.status_code
                    except httpx.HTTPError:
                        status[name] = None
                ctx.record(AUTH, {"server": label, "method": method, "path": path, **status,
                                  "requires_key": status["no_key"] == 401 and status["wrong_key"] == 401})

    # ---- runtime LoRA ----------------------------------------------------------------------
    def probe_lora(self, ctx, base: str) -> None:
        targets = {"a system folder": "/etc", "a system file": "/etc/hostname", "a path that does not exist":
                   "/nonexistent/adapter", "the server's working folder": "."}
        for target, path in targets.items():
            if ctx.done(LORA_LOAD, target=target):
                continue
            r = httpx.post(base + "/v1/load_lora_adapter", headers={"Authorization": f"Bearer {API_KEY}"},
                           json={"lora_name": f"probe-{len(path)}", "lora_path": path}, timeout=60)
            ctx.record(LORA_LOAD, {"target": target, "path": path, "status": r.status_code,
                                   "answer": r.text.strip()[:300]})

    # ---- media fetches ---------------------------------------------------------------------
    def probe_media(self, ctx) -> None:
        service = InternalService()
        local = self.media_dir()
        shutil.rmtree(local, ignore_errors=True)
        local.mkdir(parents=True)
        (local / "image.txt").write_text("not an image")
        try:
            closed = closed_port()
            urls = {
                "loopback, open port": f"http://127.0.0.1:{service.port}/internal",
                "loopback, closed port": f"http://127.0.0.1:{closed}/internal",
                "allowed name redirecting to loopback": f"http://{ALLOWED_DOMAIN}:{service.port}/redirect",
                "file:// URL": f"file://{local / 'image.txt'}",
                "non-image content type": f"http://{ALLOWED_DOMAIN}:{service.port}/text",
            }
            for setting, (args, env) in self.media_settings(str(local)).items():
                todo = {k: u for k, u in urls.items() if not ctx.done(MEDIA_FETCH, setting=setting, url_kind=k)}
                if not todo:
                    continue
                server = ctx.server(ServerSpec("vl", args, env, label="media"))
                for kind, url in todo.items():
                    if not url.startswith("file://"):
                        assert_loopback(url)
                    before = len(service.hits)
                    body = {"model": server.model, "max_tokens": 1, "messages": [{"role": "user", "content": [
                        {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "?"}]}]}
                    start = time.perf_counter()
                    r = httpx.post(server.openai_base + "/chat/completions", json=body, timeout=120)
                    elapsed = (time.perf_counter() - start) * 1000
                    time.sleep(0.2)  # let the service log a request that raced the answer
                    answer = r.text if r.status_code != 200 else ""
                    try:
                        answer = json.loads(answer).get("error", {}).get("message", answer) if answer else ""
                    except (ValueError, AttributeError):
                        pass
                    ctx.record(MEDIA_FETCH, {"setting": setting, "url_kind": kind,
                                             "service_hit": len(service.hits) > before,
                                             "paths_requested": " ".join(service.hits[before:]) or None,
                                             "status": r.status_code,
                                             "answer": str(answer)[:300] or None, "elapsed_ms": elapsed})
        finally:
            service.close()
            shutil.rmtree(local, ignore_errors=True)

