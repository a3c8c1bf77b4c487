"""Runs planned to the device time there is: the stale or missing experiments, most-asked questions first, as many
as their estimates fit in a budget of minutes (server start-ups included)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from measure.experiment import STARTUP, Experiment
from measure.harness.context import colocated_group
from measure.harness.profiles import Profile
from measure.store import PROVENANCE_FILE

# Which experiments a budget takes first: the questions readers ask most (../shared/notes/user-questions.md, the
# site's FAQ) and the check every throughput figure leans on (our client against vllm bench serve), then the rest;
# an experiment not named here (a new chapter's) comes after them, by name.
PRIORITY = (
    "api_servers",        # does --api-server-count help on one GPU (chat, embeddings)
    "capacity",           # what --gpu-memory-utilization buys; how many requests fit; the decode floor
    "fidelity_interval",  # our client against vllm bench serve: every throughput figure leans on it
    "pooling_limits",     # why embeddings are slower than expected
    "fidelity",           # the load client's ceiling
    "batch_limits",       # --max-num-seqs and --max-num-batched-tokens
    "tuning_ladder",      # where to start tuning: one change at a time from vLLM's defaults
    "instances",          # one server or several instances on one GPU
    "prefill",            # prefix caching; a long prompt beside short ones
    "eager",              # --enforce-eager: speed, memory, start-up
    "embedding_batching",
    "lora",
    "lora_scale",
    "multimodal",
    "video",
    "kv_dtype",
    "rerank_documents",
    "rerank_concurrency",
    "image_limits",
    "max_model_len",
    "spec_ngram",
    "pooling",
    "security",
    "security_versions",
    "loadgens",
    "parallelism",
)


def upcoming_servers(instances: list[Experiment], profile: Profile) -> list:
    """Every server spec of the run, in the order the experiments will first ask for it."""
    return [spec for exp in instances for spec in exp.servers(profile)]


def start_events(specs: list, profile: Profile) -> list[list]:
    """How the pool will start these servers, asked for in this order: groups of servers started at once."""
    groups: list[list] = []
    live: set = set()
    for spec in specs:
        if spec.key not in live:
            groups.append(colocated_group(spec, specs, profile, lambda s: s.key))
            live = {g.key for g in groups[-1]}
    return groups


def by_priority(instances: list[Experiment]) -> list[Experiment]:
    """``instances`` in PRIORITY's order (an experiment it does not name goes last, by name)."""
    rank = {name: i for i, name in enumerate(PRIORITY)}
    return sorted(instances, key=lambda e: (rank.get(e.name, len(rank)), e.name))


def startup_estimate(profile, published: Path) -> tuple[float, str]:
    """Seconds one start-up takes here: the median of this environment's start-up table, else a guess."""
    path = published / STARTUP.file_name
    if path.is_file():
        times = STARTUP.read(path)["startup_s"]
        if times.notna().any():
            return float(times.median()), f"median of {times.notna().sum()} start-ups in {path.parent.name}"
    return (60.0 if profile.name == "cpu" else 150.0), "a guess: this environment has no start-up table yet"


def last_wall_times(instances: list[Experiment], published: Path | None) -> dict[str, float]:
    """Each experiment's recorded wall time from its last full run in this environment (provenance)."""
    path = (published or Path("/nonexistent")) / PROVENANCE_FILE
    if not path.is_file():
        return {}
    recorded = json.loads(path.read_text()).get("experiments", {})
    return {e.name: float(recorded[e.name]["wall_s"]) for e in instances if recorded.get(e.name, {}).get("wall_s")}


@dataclass(frozen=True)
class Estimate:
    seconds: float  # the better guess: last full runs' wall times where there are any, the plan's steps otherwise
    steps_s: float  # the plan's requests alone (the experiments without a recorded run)
    last: dict[str, float]  # each recorded run's wall time


def estimate(instances: list[Experiment], profile, published: Path | None) -> Estimate:
    """How long running ``instances`` here takes: each one's last full run where provenance has it, else its
    planned requests plus the server start-ups they need (shared starts counted once)."""
    published = published or Path("/nonexistent")
    startup, _ = startup_estimate(profile, published)
    last = last_wall_times(instances, published)
    rest = [e for e in instances if e.name not in last]
    steps = sum(step.seconds for e in rest for step in e.plan(profile))
    starts = start_events(upcoming_servers(rest, profile), profile) if rest else []
    return Estimate(sum(last.values()) + steps + len(starts) * startup, steps, last)


@dataclass(frozen=True)
class Slice:
    chosen: list[Experiment]  # in priority order
    left: list[Experiment]  # what does not fit this time, in priority order
    seconds: float  # the chosen ones' estimate together
    each_s: dict[str, float]  # each experiment's estimate alone


def fit(instances: list[Experiment], profile, published: Path | None, budget_s: float) -> Slice:
    """The experiments, most-asked first, whose estimates fit in ``budget_s`` together; one that does not fit is
    passed over for later, smaller ones (it goes first into the next budget's slice)."""
    ordered = by_priority(instances)
    chosen: list[Experiment] = []
    total = 0.0
    for exp in ordered:
        together = estimate(chosen + [exp], profile, published).seconds
        if together <= budget_s:
            chosen, total = chosen + [exp], together
    each = {e.name: estimate([e], profile, published).seconds for e in ordered}
    return Slice(chosen, [e for e in ordered if e not in chosen], total, each)


def describe(piece: Slice, budget_s: float) -> list[str]:
    """The slice in words: what runs now, what is left, and why."""
    lines = [f"budget {budget_s / 60:.0f} min: "
             + (f"this slice takes {', '.join(e.name for e in piece.chosen)} (≈ {piece.seconds / 60:.1f} min)"
                if piece.chosen else "no stale or missing experiment fits in it")]
    if piece.left:
        left_s = sum(piece.each_s[e.name] for e in piece.left)
        lines.append(f"left for later (≈ {left_s / 60:.1f} min, most-asked first): "
                     + ", ".join(f"{e.name} ≈ {piece.each_s[e.name] / 60:.1f} min" for e in piece.left))
        too_big = [e.name for e in piece.left if piece.each_s[e.name] > budget_s]
        if too_big:
            lines.append(f"longer than the budget alone: {', '.join(too_big)}; give it a budget of its own, or let "
                         "a lease end inside it and resume its staged rows on the next one (--resume)")
    else:
        lines.append("nothing is left after this slice")
    return lines
