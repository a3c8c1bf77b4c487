"""What an experiment's ``run(ctx)`` gets: servers, a client, and a place to record rows."""

from __future__ import annotations

import asyncio
import hashlib
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
from measure.models import ModelRef, resolve
from measure.schema import DatasetSchema

console = Console(stderr=True)


def server_id(spec: ServerSpec, model: ModelRef, profile: Profile) -> str:
    """A name for one server configuration: its label, its model and a digest of everything on its command line
    and in its environment, the profile's flags included. (The profile's flags were once left out: when the GPU
    profile dropped --enforce-eager, default-mode servers took the ids, and so the provenance records, of the
    eager servers behind older datasets.)"""
    flags = (spec.key, tuple(profile.server_args), sorted(profile.env.items()))
    digest = hashlib.sha1(srv.checkout_relative(repr(flags)).encode()).hexdigest()[:6]
    return f"{spec.label or spec.model_role}-{model.name}-{digest}"


class RoleNotAttached(LookupError):
    """Attach mode: no server was given for a model role an experiment step needs."""


@dataclass
class ServerPool:
    """One server at a time (memory is the limit); a spec equal to the running one reuses it."""

    profile: Profile
    cache_dir: Path
    log_dir: Path
    attached: dict[str, srv.Server] | None = None  # attach mode: role ("*" = any) -> someone else's server
    declared_weights: str = "unknown"
    python: str = sys.executable
    current: tuple | None = None
    server: srv.Server | None = None
    records: dict[str, dict] = field(default_factory=dict)  # server id -> provenance record

    def model(self, role: str) -> ModelRef:
        if role not in self.profile.models:
            raise KeyError(f"profile {self.profile.name!r} has no model for role {role!r}")
        return resolve(self.profile.models[role], self.cache_dir)

    def get(self, spec: ServerSpec, staging: Staging) -> tuple[str, srv.Server]:
        if self.attached is not None:
            server = self.attached.get(spec.model_role) or self.attached.get("*")
            if server is None:
                raise RoleNotAttached(spec.model_role)
            sid = f"attached-{spec.model_role}"
            self.records.setdefault(sid, {
                "model": server.model, "weights": self.declared_weights, "attached": True,
                "base_url": server.base_url, "vllm": server.facts.version,
                "command": "started by the user (attach mode); its flags are not known to the harness",
            })
            return sid, server
        model = self.model(spec.model_role)
        sid = server_id(spec, model, self.profile)
        if self.current == (sid,) and self.server is not None:
            return sid, self.server
        self.stop()
        env = server_env(self.profile) | dict(spec.env)
        args = tuple(self.profile.server_args) + tuple(spec.args)
        console.print(f"[bold]starting vLLM[/] {sid} …  (log: {self.log_dir / (sid + '.log')})")
        server = srv.launch(
            model.server_args, model.name, args, env, self.log_dir / f"{sid}.log",
            timeout_s=self.profile.startup_timeout_s, python=self.python,
        )
        kv = server.facts.kv_cache_tokens
        console.print(f"  ready in {server.startup_s:.0f} s" + (f"; KV cache {kv:,} tokens" if kv else "; no KV cache reported"))
        self.server, self.current = server, (sid,)
        record = {
            "model": model.name, "model_path": model.path, "architecture": model.architecture, "weights": model.weights,
            "command": server.command, "env": env, "vllm": server.version(), "startup": server.facts.as_dict(),
            "startup_s": server.startup_s,
        }
        self.records[sid] = record
        staging.note("servers", sid, record)  # an interrupted run resumed elsewhere still knows this server
        staging.append(STARTUP, {
            "server": sid, "model": model.name, "weights": model.weights,
            **{k: v for k, v in server.facts.as_dict().items() if k != "version"}, "startup_s": server.startup_s,
        })
        return sid, server

    def has(self, role: str) -> bool:
        if self.attached is not None:
            return role in self.attached or "*" in self.attached
        return role in self.profile.models

    def stop(self) -> None:
        if self.server is not None and not self.server.attached:
            self.server.stop()
        self.server, self.current = None, None


@dataclass
class RunContext:
    experiment: str
    profile: Profile
    staging: Staging
    pool: ServerPool
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
        if self.pool.attached is not None:  # what the user declared about their server
            _, server = self.pool.get(ServerSpec(role), self.staging)
            return ModelRef(server.model, server.base_url, self.pool.declared_weights, server.model)
        return self.pool.model(role)

    def has(self, role: str) -> bool:
        """Whether a server for ``role`` can be had (always when we start them; in attach mode, if given)."""
        return self.pool.has(role)

    def server(self, spec: ServerSpec) -> srv.Server:
        self._current_sid, server = self.pool.get(spec, self.staging)
        return server

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

    def record(self, schema: DatasetSchema, row: dict) -> None:
        self.staging.append(schema, row)
        self._done_cache.setdefault(schema.name, set()).add(schema.row_key(row))
        if self._current_sid is None and schema.name not in self.dataset_servers:
            # measured before any server started (the load client against its synthetic endpoint): no vLLM behind it
            self.dataset_servers[schema.name] = set()
            self.staging.note("dataset_servers", schema.name, [])
        if self._current_sid and self._current_sid not in self.dataset_servers.get(schema.name, set()):
            self.dataset_servers.setdefault(schema.name, set()).add(self._current_sid)
            self.staging.note("dataset_servers", schema.name, sorted(self.dataset_servers[schema.name]))

    def done(self, schema: DatasetSchema, **key) -> bool:
        """True if a resumed run already staged the row with this key (skip measuring it again), or if
        the dataset is already published and the run measures only missing datasets."""
        if self.skipped(schema):
            return True
        if schema.name not in self._done_cache:
            self._done_cache[schema.name] = {schema.row_key(r) for r in self.staging.rows(schema)}
        return schema.row_key(key) in self._done_cache[schema.name]

    def skipped(self, schema: DatasetSchema) -> bool:
        """Whether the whole dataset is left as published (--only-missing)."""
        return schema.name in self.published

    def progress(self) -> Progress:
        return Progress(
            TextColumn("[bold blue]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=console, transient=False,
        )
