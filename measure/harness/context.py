"""What an experiment's ``run(ctx)`` gets: servers, a client, and a place to record rows."""

from __future__ import annotations

import asyncio
import hashlib
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from measure.experiment import STARTUP, ServerSpec
from measure.harness import server as srv
from measure.harness.client import Client
from measure.harness.loadgen import LoadGenerator
from measure.harness.profiles import Profile, server_env
from measure.harness.staging import Staging
from measure.harness.versions import python_for
from measure.models import ModelRef, resident_weight_bytes, resolve
from measure.schema import DatasetSchema

console = Console(stderr=True)


def shares_device(spec: ServerSpec, profile: Profile) -> bool:
    """Whether this server starts beside others on one device (and so runs with the profile's colocate_args)."""
    return profile.colocate > 1 and not (spec.starts_alone or spec.facts_only or spec.sets_memory)


def shared_memory_args(spec: ServerSpec, profile: Profile) -> tuple[str, ...]:
    """The memory flags of a server that shares the device: its own, or the profile's."""
    return (spec.shared_memory or profile.colocate_args) if shares_device(spec, profile) else ()


def shared_env(spec: ServerSpec, profile: Profile) -> dict[str, str]:
    """The environment a server of this spec starts with: the profile's, a shared device's, then the spec's own."""
    shared = profile.colocate_env if shares_device(spec, profile) else {}
    return server_env(profile) | shared | dict(spec.env)


# Besides its KV cache and weights a vLLM process holds its CUDA context, CUDA graphs and activation workspace:
# a Qwen3-0.6B server with a 16 GiB cache held 19.16 GiB on an H100 (1.1 GiB of weights): 2.1 GiB beyond both.
SERVER_OVERHEAD_GIB = 2.5


def device_share(spec: ServerSpec, profile: Profile) -> float:
    """The share of the device a sharing server takes: its --gpu-memory-utilization, or more where a fixed KV cache
    (--kv-cache-memory-bytes), its weights and a server's overhead fill more of this device. (With only the flag's
    0.1, five servers of 16 GiB caches each were started together on an 80 GB H100, and three ran out of memory.)"""
    args = list(shared_memory_args(spec, profile))
    share = float(args[args.index("--gpu-memory-utilization") + 1]) if "--gpu-memory-utilization" in args else 0.0
    device_gib = profile.sizes.get("gpu_memory_gib")
    if device_gib and "--kv-cache-memory-bytes" in args:
        kv_gib = int(args[args.index("--kv-cache-memory-bytes") + 1]) / 2**30
        weights_gib = (resident_weight_bytes(profile.models.get(spec.model_role, "")) or 0) / 2**30
        share = max(share, (kv_gib + weights_gib + SERVER_OVERHEAD_GIB) / device_gib)
    return share


# How a server that did not fit beside others says so (torch's CUDA allocator; vLLM's own KV-cache check)
OUT_OF_MEMORY = re.compile(r"OutOfMemoryError|CUDA out of memory|No available memory for the cache blocks")

# Servers started together ask for at most this share of the device, as one server's default does.
COLOCATE_MEMORY_BUDGET = 0.9


def server_args(spec: ServerSpec, profile: Profile) -> tuple[str, ...]:
    """The flags a server of this spec runs with: the profile's, the spec's, and a shared device's."""
    return tuple(profile.server_args) + tuple(spec.args) + shared_memory_args(spec, profile)


def colocated_group(spec: ServerSpec, upcoming: list[ServerSpec], profile: Profile, ident) -> list[ServerSpec]:
    """``spec`` and the servers the run asks for right after it that may start beside it on one device, up to
    ``Profile.colocate``. ``ident(spec)`` names a server (None: one this run cannot start); equal names are one."""
    group = [spec]
    names = [ident(s) for s in upcoming]
    if not shares_device(spec, profile) or ident(spec) not in names:
        return group
    seen = {ident(spec)}
    position = names.index(ident(spec))
    share = device_share(spec, profile)
    for other, name in zip(upcoming[position + 1:], names[position + 1:], strict=True):
        if len(group) >= profile.colocate or name is None:
            break
        if name in seen:
            continue
        if not shares_device(other, profile):
            break  # it needs the device to itself: servers started now would be stopped before their turn
        if share + device_share(other, profile) > COLOCATE_MEMORY_BUDGET + 1e-9:
            break  # the device is full: it starts with the next group
        group.append(other)
        seen.add(name)
        share += device_share(other, profile)
    return group


def server_id(spec: ServerSpec, model: ModelRef, profile: Profile) -> str:
    """A name for one server configuration: its label, its model and a digest of everything on its command line
    and in its environment, the profile's flags included. (The profile's flags were once left out: when the GPU
    profile dropped --enforce-eager, default-mode servers took the ids, and so the provenance records, of the
    eager servers behind older datasets.)"""
    flags = (spec.key, tuple(profile.server_args), sorted(profile.env.items()))
    if shares_device(spec, profile):
        flags += (shared_memory_args(spec, profile),) + ((sorted(profile.colocate_env.items()),)
                                                           if profile.colocate_env else ())
    digest = hashlib.sha1(srv.checkout_relative(repr(flags)).encode()).hexdigest()[:6]
    return f"{spec.label or spec.model_role}-{model.name}-{digest}"


class RoleNotAttached(LookupError):
    """Attach mode: no server was given for a model role an experiment step needs."""


@dataclass
class ServerPool:
    """The vLLM servers this run starts. By default one at a time (memory is the limit); a spec equal to a live one
    reuses it. Where the profile lets servers share the device, asking for one that is not live starts it together
    with the next servers the run will ask for (``upcoming``) that may share it, up to ``Profile.colocate``.

    What a run asks of its pool (this one or an ``AttachedPool``): ``model``, ``sid``, ``get``, ``has``, ``prepare``,
    ``drop_exited``, ``stop``, and ``records`` (each server's provenance)."""

    profile: Profile
    cache_dir: Path
    log_dir: Path
    python: str = sys.executable
    upcoming: list[ServerSpec] = field(default_factory=list)  # the run's servers, in the order first needed
    live: dict[str, srv.Server] = field(default_factory=dict)  # server id -> ready server
    failed: dict[str, BaseException] = field(default_factory=dict)  # started together with others, did not come up
    crowded_out: set[str] = field(default_factory=set)  # of those, the ones that ran out of device memory
    records: dict[str, dict] = field(default_factory=dict)  # server id -> provenance record
    # Every start of this run, in order, with the experiment it was started for: a server restarted for a later
    # experiment (warm caches) keeps its first, cold start here, where servers.startup keeps only its latest.
    starts: list[dict] = field(default_factory=list)
    serving: str | None = None  # the experiment being measured (the runner sets it)
    death_settle_s: float = 10.0  # how long a server that stopped answering gets to be seen dead

    def model(self, role: str) -> ModelRef:
        if role not in self.profile.models:
            raise KeyError(f"profile {self.profile.name!r} has no model for role {role!r}")
        return resolve(self.profile.models[role], self.cache_dir)

    def sid(self, spec: ServerSpec) -> str:
        return server_id(spec, self.model(spec.model_role), self.profile)

    def prepare(self, experiments) -> None:
        """What the experiments need on disk before their servers start (models, adapters)."""
        for exp in experiments:
            exp.prepare(self)

    def get(self, spec: ServerSpec, staging: Staging) -> tuple[str, srv.Server]:
        sid = self.sid(spec)
        if sid not in self.live and sid not in self.failed:
            self.stop()
            self.start_together(self.group_for(spec), staging)
        if sid in self.crowded_out:  # it ran out of device memory beside others: once more, with the device its own
            self.crowded_out.discard(sid)
            del self.failed[sid]
            console.print(f"[yellow]{sid} ran out of device memory beside other servers: starting it again, alone[/]")
            self.stop()
            self.start_together([spec], staging)
        if sid in self.failed:
            raise self.failed.pop(sid)
        return sid, self.live[sid]

    def get_all(self, specs: list[ServerSpec], staging: Staging) -> list[tuple[str, srv.Server]]:
        """Several servers live at once on one device (instances of one model, each with its own memory flags):
        started one after another, each ready before the next starts, since vLLM sizes its memory from what is
        free when it starts."""
        sids = [self.sid(spec) for spec in specs]
        if not all(sid in self.live for sid in sids):
            self.stop()
            for spec, sid in zip(specs, sids, strict=True):
                self.start_together([spec], staging)
                if sid in self.failed:
                    raise self.failed.pop(sid)
        return [(sid, self.live[sid]) for sid in sids]

    def group_for(self, spec: ServerSpec) -> list[ServerSpec]:
        """``spec`` and the servers asked for right after it that may share the device with it."""
        return colocated_group(spec, self.upcoming, self.profile,
                               lambda s: self.sid(s) if s.model_role in self.profile.models else None)

    def start_together(self, group: list[ServerSpec], staging: Staging) -> None:
        started = []
        for spec in group:
            model, sid = self.model(spec.model_role), self.sid(spec)
            env = shared_env(spec, self.profile)
            log = self.log_dir / f"{sid}.log"
            console.print(f"[bold]starting vLLM[/] {sid}" + (f" (together with {len(group) - 1} more)" if len(group) > 1
                          else "") + (" for its start-up facts only" if spec.facts_only else "") + f" …  (log: {log})")
            python = str(python_for(spec.vllm)) if spec.vllm else self.python
            server = srv.spawn(model.server_args, model.name, server_args(spec, self.profile), env, log, python=python,
                               front_end=spec.front_end)
            started.append((spec, sid, model, env, server))
        for spec, sid, model, env, server in started:
            try:
                srv.wait_ready(server, self.profile.startup_timeout_s,
                               until_logged=srv.KV_CACHE_SIZED if spec.facts_only else None)
            except srv.ServerFailed as exc:
                self.failed[sid] = exc
                if len(group) > 1 and OUT_OF_MEMORY.search(exc.log or exc.reason):
                    self.crowded_out.add(sid)
                console.print(f"  [yellow]{sid} did not start[/]: {exc.reason[:200]}")
                self._record(sid, model, env, server, staging, together=len(group), failed=exc.reason,
                             python=server.command[0])
                continue
            kv = server.facts.kv_cache_tokens
            console.print(f"  {sid}: " + ("facts logged" if spec.facts_only else f"ready in {server.startup_s:.0f} s")
                          + (f"; KV cache {kv:,} tokens" if kv else "; no KV cache reported"))
            self._record(sid, model, env, server, staging, together=len(group), python=server.command[0])
            if spec.facts_only:
                # killed, not asked: on the H200 an engine stopped in CUDA-graph capture logged no shutdown after
                # SIGTERM and the next start began only after the grace period; nothing of it is kept but its log
                server.stop(grace_s=0)
            self.live[sid] = server

    def _record(self, sid: str, model: ModelRef, env: dict, server: srv.Server, staging: Staging, together: int,
                failed: str | None = None, python: str | None = None) -> None:
        """The server's provenance (its full command even when it ``failed`` to start: that is the finding) and,
        if it started, its start-up row."""
        local = lambda text: srv.portable(str(text), python or self.python)  # noqa: E731 - provenance names no local path
        record = {
            "model": model.name, "model_path": local(model.path), "architecture": model.architecture,
            "weights": model.weights, "command": [local(a) for a in server.command],
            "env": {k: local(v) for k, v in (srv.inherited_vllm_env(env) | env).items()},
            "vllm": None if failed else server.version() if server.startup_s else server.facts.version,
            "startup": None if failed else server.facts.as_dict(), "startup_s": None if failed else server.startup_s,
            "started_together": together,
        } | ({"started": False, "error": local(failed)} if failed else {})
        self.records[sid] = record
        staging.note("servers", sid, record)  # an interrupted run resumed elsewhere still knows this server
        self.starts.append({"server": sid, "experiment": self.serving, "started_together": together,
                            "startup_s": None if failed or server.startup_s is None else round(server.startup_s, 1),
                            **({"started": False} if failed else {})})
        if failed:
            return
        staging.append(STARTUP, {
            "server": sid, "model": model.name, "weights": model.weights,
            **{k: v for k, v in server.facts.as_dict().items() if k != "version"}, "startup_s": server.startup_s,
            "started_together": together,
        })

    def has(self, role: str) -> bool:
        return role in self.profile.models

    def drop_exited(self) -> list[str]:
        """Forget live servers whose vLLM process has ended (a crash, the OOM killer, kill -9) and say which, with
        the exit code or signal: their clients see only broken connections ("Request timed out"), which would
        hide the cause. (The server's watcher has already ended the rest of its process group.)"""
        gone = []
        for sid, server in list(self.live.items()):
            cause = server.exited(settle_s=self.death_settle_s)
            if cause is None:
                continue
            log = srv.checkout_relative(str(server.log_path)) if server.log_path else "no log"
            gone.append(f"vLLM server {sid} died ({cause}) during the experiment (its log: {log})")
            server.stop(grace_s=0)  # whatever of its group the watcher has not ended yet
            del self.live[sid]
        return gone

    def stop(self) -> None:
        for server in self.live.values():
            server.stop()
        self.live = {}
        self.failed = {}

    def base_urls(self) -> None:
        """Only an attached pool's servers are known by URL (provenance names them)."""

    def software(self, client: dict) -> dict:
        """The software behind the measurements: this machine's, where the servers run."""
        return client


@dataclass
class AttachedPool:
    """Attach mode: servers someone else started, one per model role ("*": any role). Never started, stopped or
    prepared here; what is known of each is what it reports and what the user declared."""

    profile: Profile
    servers: dict[str, srv.Server]
    declared_weights: str = "unknown"
    python: str = sys.executable  # the client's interpreter (vllm bench serve runs here)
    cache_dir: Path = srv.REPO_ROOT / ".cache" / "models"
    records: dict[str, dict] = field(default_factory=dict)
    starts: list[dict] = field(default_factory=list)  # never any: attach mode starts nothing
    serving: str | None = None

    def server(self, role: str) -> srv.Server:
        server = self.servers.get(role) or self.servers.get("*")
        if server is None:
            raise RoleNotAttached(role)
        return server

    def model(self, role: str) -> ModelRef:
        server = self.server(role)
        return ModelRef(server.model, server.base_url, self.declared_weights, server.model)

    def sid(self, spec: ServerSpec) -> str:
        return f"attached-{spec.model_role}"

    def get(self, spec: ServerSpec, staging: Staging) -> tuple[str, srv.Server]:
        server, sid = self.server(spec.model_role), self.sid(spec)
        self.records.setdefault(sid, {
            "model": server.model, "weights": self.declared_weights, "attached": True,
            "base_url": server.base_url, "vllm": server.facts.version,
            "command": "started by the user (attach mode); its flags are not known to the harness",
        })
        return sid, server

    def has(self, role: str) -> bool:
        return role in self.servers or "*" in self.servers

    def prepare(self, experiments) -> None:
        """Nothing to put on disk: the attached servers have their models."""

    def drop_exited(self) -> list[str]:
        return []  # not our processes: a dead one shows as failed requests

    def stop(self) -> None:
        """Someone else's servers keep running."""

    def base_urls(self) -> dict[str, str]:
        """Attach mode's servers, as provenance names them."""
        return {role: server.base_url for role, server in self.servers.items()}

    def software(self, client: dict) -> dict:
        """What is known of the software behind the measurements: the versions the servers report."""
        versions = {s.facts.version for s in self.servers.values()} - {None}
        return {"vllm": ", ".join(sorted(versions)) or None, "attached": True, "client_python": client.get("python")}


@dataclass
class RunContext:
    experiment: str
    profile: Profile
    staging: Staging
    pool: ServerPool | AttachedPool
    dataset_servers: dict[str, set[str]] = field(default_factory=dict)
    # --only-missing: datasets this environment already publishes count as done (no server starts for them)
    published: frozenset[str] = frozenset()
    _current_sid: str | None = None
    _done_cache: dict[str, set] = field(default_factory=dict)
    _loop: asyncio.AbstractEventLoop | None = None
    _clients: list[Client] = field(default_factory=list)
    _generators: dict[tuple, LoadGenerator] = field(default_factory=dict)

    def run(self, coro):
        """Run a coroutine on this experiment's one event loop (async clients stay bound to it)."""
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    def close(self) -> None:
        for generator in self._generators.values():
            generator.close()
        self._generators = {}
        if self._loop is not None:
            for client in self._clients:
                self._loop.run_until_complete(client.close())
            self._loop.close()
            self._loop = None
        self._clients = []

    @property
    def sizes(self) -> dict:
        return self.profile.sizes

    def model(self, role: str) -> ModelRef:
        return self.pool.model(role)

    def has(self, role: str) -> bool:
        """Whether a server for ``role`` can be had (always when we start them; in attach mode, if given)."""
        return self.pool.has(role)

    def server(self, spec: ServerSpec) -> srv.Server:
        try:
            self._current_sid, server = self.pool.get(spec, self.staging)
        except srv.ServerFailed:
            self._current_sid = self.pool.sid(spec)  # a row about a failed start names the server that failed
            raise
        return server

    def servers(self, specs: list[ServerSpec]) -> list[srv.Server]:
        """Several servers live together (``ServerPool.get_all``); rows measured on them name them with
        ``record(..., servers=specs)``."""
        if not hasattr(self.pool, "get_all"):
            raise RuntimeError("several servers at once need servers this run starts, not attached ones")
        started = self.pool.get_all(list(specs), self.staging)
        self._current_sid = None
        return [server for _, server in started]

    def client(self, server: srv.Server) -> Client:
        client = Client(server.openai_base, server.model, server.api_key)
        self._clients.append(client)
        return client

    def log(self, message: str) -> None:
        """A progress line of a long step (plain text: no console markup)."""
        console.print(message, markup=False, highlight=False)

    def load(self, server: srv.Server, workers: int | None = None) -> LoadGenerator:
        """The multi-process load generator for ``server`` (its worker processes live until the experiment ends)."""
        key = (server.base_url, workers)
        if key not in self._generators:
            self._generators[key] = LoadGenerator(server.base_url, server.api_key, workers=workers)
        return self._generators[key]

    def record(self, schema: DatasetSchema, row: dict, derived_from: tuple[DatasetSchema, ...] = (),
               servers: tuple[ServerSpec, ...] | None = None) -> None:
        """Stage one row; the dataset's provenance names the servers behind it: the live one, unless ``servers``
        says which (``()``: none, e.g. a row measured without vLLM; a computed row compares these). ``derived_from``:
        the datasets a computed row comes from; their servers are this dataset's servers too."""
        behind = set().union(*(self.dataset_servers.get(s.name, set()) for s in derived_from))
        if servers is not None:
            behind |= {self.pool.sid(spec) for spec in servers}
        elif self._current_sid:
            behind.add(self._current_sid)
        known = self.dataset_servers.get(schema.name)
        if known is None or not behind <= known:
            # an empty set is recorded too: a dataset measured before any server started has no vLLM behind it
            self.dataset_servers[schema.name] = (known or set()) | behind
            self.staging.note("dataset_servers", schema.name, sorted(self.dataset_servers[schema.name]))
        self.staging.append(schema, row)
        self._done_cache.setdefault(schema.name, set()).add(schema.row_key(row))

    def done(self, schema: DatasetSchema, **key) -> bool:
        """True if a resumed run already staged a row with this key (skip measuring it again), or if
        the dataset is already published and the run measures only missing datasets. ``key`` may name only some
        of the key's columns (``point=…`` of a key (point, metric)) where the experiment stages those rows together."""
        unknown = [k for k in key if k not in schema.key]
        if unknown or not key:
            raise ValueError(f"done({schema.name}, {', '.join(unknown) or 'no key'}): name columns of its key "
                             f"({', '.join(schema.key) or 'it has none'})")
        if self.skipped(schema):
            return True
        if schema.name not in self._done_cache:
            self._done_cache[schema.name] = {schema.row_key(r) for r in self.staging.rows(schema)}
        wanted = [(schema.key.index(k), v) for k, v in key.items()]
        return any(all(staged[i] == v for i, v in wanted) for staged in self._done_cache[schema.name])

    def skipped(self, schema: DatasetSchema) -> bool:
        """Whether the whole dataset is left as published (--only-missing)."""
        return schema.name in self.published

    def progress(self) -> Progress:
        return Progress(
            TextColumn("[bold blue]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False,
        )
