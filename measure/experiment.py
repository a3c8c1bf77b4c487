"""What an experiment is, and the registry that finds them.

One experiment = one module under ``measure/experiments/`` that subclasses :class:`Experiment`,
declares its server configurations and dataset schemas, and implements ``run(ctx)``.
Decorate it with :func:`register`; the registry imports every module of that package.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from measure.harness.definitions import spread  # noqa: F401  (experiments import it from here)
from measure.models import CONFIGS
from measure.schema import Column, DatasetSchema, UnknownName

if TYPE_CHECKING:
    from measure.harness.context import RunContext, ServerPool
    from measure.harness.profiles import Profile


# vLLM's flag for pooling models (embeddings, rerank): experiments that serve one share it from here.
POOLING = ("--runner", "pooling")
# Qwen3-Reranker served as a classifier (vLLM's example); one spec, so one server start serves every experiment.
RERANKER_ARGS = POOLING + (
    "--hf-overrides",
    '{"architectures":["Qwen3ForSequenceClassification"],"classifier_from_token":["no","yes"],"is_original_qwen3_reranker":true}',
    "--chat-template",
    str(CONFIGS / "Qwen3-Reranker-0.6B" / "vllm" / "qwen3_reranker.jinja"),
)


@dataclass(frozen=True)
class ServerSpec:
    """One vLLM server configuration. Experiments whose specs are equal share one server start."""

    model_role: str  # a key of Profile.models, e.g. "embedding"
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    label: str = ""
    # True where a figure depends on the server having the device to itself (its memory budget, its start-up
    # time): it never shares the GPU with other servers (see Profile.colocate).
    starts_alone: bool = False
    # True where only the start-up facts are wanted (KV cache size, encoder budget): the server is stopped as soon
    # as vLLM has logged them, before CUDA-graph capture and warm-up. Such a server has no start-up time.
    facts_only: bool = False
    # Another vLLM release than the run's own: the server runs in that release's virtualenv (`nox -s vllm_versions`).
    vllm: str = ""
    # Its memory flags when it shares the device, in place of the profile's colocate_args (a larger model, or a
    # KV cache of a set size); ignored where servers start one at a time (the CPU profile).
    shared_memory: tuple[str, ...] = ()
    # How it is started: "" the OpenAI API server module (one front-end process, whatever --api-server-count says),
    # "vllm serve" the CLI's serve command (the only one that acts on --api-server-count in vLLM 0.26).
    front_end: str = ""

    @property
    def key(self) -> tuple:
        marks = tuple(m for m, on in (("alone", self.starts_alone), ("facts-only", self.facts_only)) if on)
        marks += (f"front end {self.front_end}",) if self.front_end else ()
        marks += (f"vllm {self.vllm}",) if self.vllm else ()
        marks += (("shared memory",) + self.shared_memory,) if self.shared_memory else ()
        return (self.model_role, self.args, self.env) + ((marks,) if marks else ())


    @property
    def sets_memory(self) -> bool:
        """Whether its own flags size the GPU memory (then it cannot take a shared GPU's memory flags)."""
        return any(a in ("--gpu-memory-utilization", "--kv-cache-memory-bytes") for a in self.args)


@dataclass(frozen=True)
class Step:
    """One line of a dry-run plan: what will be sent and roughly how long it takes (``server`` None: no vLLM,
    e.g. the load client against its synthetic endpoint)."""

    server: ServerSpec | None
    what: str
    requests: int
    seconds: float


class Experiment:
    name: ClassVar[str]
    title: ClassVar[dict[str, str]]
    datasets: ClassVar[tuple[DatasetSchema, ...]]
    # Non-empty while only the datasets are declared (pages can cite them; nothing runs yet).
    pending: ClassVar[str] = ""
    # False where the experiment varies server flags or reads the model's files: attach mode cannot serve it.
    attachable: ClassVar[bool] = True
    # Commands a reader runs before `nox -s measure -- NAME` (what the page's "reproduce" box prints first).
    setup: ClassVar[tuple[str, ...]] = ()

    def plan(self, profile: Profile) -> list[Step]:
        raise NotImplementedError

    def unavailable(self, profile: Profile, python: str) -> str | None:
        """Why this experiment cannot run here (a missing package, say), or None."""
        return None

    def prepare(self, pool: ServerPool) -> None:
        """Make the files this experiment's servers read (LoRA adapters, say). Called for every experiment of a
        run before its first server starts: the pool may start a server early, together with an earlier one's."""

    def run(self, ctx: RunContext) -> None:
        raise NotImplementedError

    def servers(self, profile: Profile) -> list[ServerSpec]:
        seen: dict[tuple, ServerSpec] = {}
        for step in self.plan(profile):
            if step.server is not None:
                seen.setdefault(step.server.key, step.server)
        return list(seen.values())


_REGISTRY: dict[str, type[Experiment]] = {}


def register(cls: type[Experiment]) -> type[Experiment]:
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"two experiments are named {cls.name!r}")
    _REGISTRY[cls.name] = cls
    return cls


def _load_all() -> None:
    import measure.experiments as package

    for info in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{info.name}")


def experiments() -> dict[str, type[Experiment]]:
    _load_all()
    return dict(sorted(_REGISTRY.items()))


def get(name: str) -> type[Experiment]:
    found = experiments()
    if name not in found:
        raise UnknownName(f"unknown experiment {name!r}; known: {', '.join(found)}")
    return found[name]


def runnable() -> list[str]:
    return [name for name, cls in experiments().items() if not cls.pending]


# The harness writes this dataset for every server it starts: the facts vLLM prints at start-up.
STARTUP = DatasetSchema(
    name="servers.startup",
    title={"zh": "服务器启动日志中的事实", "en": "Facts from server start-up logs"},
    key=("server",),
    columns=(
        Column("server", "str", doc="server configuration label"),
        Column("model", "str"),
        Column("weights", "str", doc="real | dummy"),
        Column("kv_cache_tokens", "int", "tokens", "GPU/CPU KV cache size", nullable=True),
        Column("max_concurrency", "float", "×", "Maximum concurrency for max_concurrency_tokens", nullable=True),
        Column("max_concurrency_tokens", "int", "tokens", "tokens per request of that line", nullable=True),
        Column("kv_cache_gib", "float", "GiB", "memory given to the KV cache", nullable=True),
        Column("model_load_gib", "float", "GiB", "memory taken by the weights", nullable=True),
        Column("encoder_cache_budget_tokens", "int", "tokens", nullable=True),
        Column("startup_s", "float", "s", "launch to /health ready", nullable=True),
        Column("started_together", "int", "servers", "vLLM servers started at the same moment, this one included: "
               "its start-up time is a cold-or-warm start-up figure only at 1", nullable=True),
    ),
)


def all_schemas() -> dict[str, DatasetSchema]:
    schemas: dict[str, DatasetSchema] = {STARTUP.name: STARTUP}
    for cls in experiments().values():
        for schema in cls.datasets:
            if schema.name in schemas:
                raise ValueError(f"dataset {schema.name!r} declared twice")
            if schema.name.split(".")[0] != cls.name:
                raise ValueError(f"experiment {cls.name!r} declares {schema.name!r}: prefix it with {cls.name}.")
            schemas[schema.name] = schema
    return schemas
