"""Run experiments: plan, share server starts, stage rows, promote finished experiments."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from measure.experiment import STARTUP, Experiment, get
from measure.harness import attach as attaching
from measure.harness import budget
from measure.harness import provenance as prov
from measure.harness import server as srv
from measure.harness.budget import start_events, upcoming_servers  # noqa: F401 - tests import them from here
from measure.harness.context import (
    AttachedPool,
    RunContext,
    ServerPool,
    console,
)
from measure.harness.fingerprint import fingerprint_of, measured_plan, plan_parts, stale_parts
from measure.harness.profiles import Profile
from measure.harness.staging import Staging
from measure.schema import excerpt
from measure.store import PROVENANCE_FILE, default_data_root


class StagingNotEmpty(SystemExit):
    pass


ENV_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass
class RunOptions:
    experiments: list[str]
    profile: Profile
    env_name: str | None = None
    data_root: Path | None = None
    resume: bool = False
    fresh: bool = False
    dry_run: bool = False
    force: bool = False
    only_missing: bool = False  # measure only datasets this environment does not publish yet
    budget_min: float | None = None  # measure only the stale experiments whose estimates fit in these minutes
    base_url: list[str] | None = None  # attach mode: URL, or ROLE=URL (repeatable)
    api_key: str | None = None
    weights: str = "unknown"
    cache_dir: Path = srv.REPO_ROOT / ".cache" / "models"
    vllm_python: str = sys.executable


def up_to_date(exp: Experiment, fp: str, published: Path) -> str | None:
    """Why a run can skip ``exp`` (same fingerprint, every dataset still published), else None."""
    record = published_record(exp.name, published)
    if record.get("fingerprint") != fp or record.get("partial"):
        return None
    if not all((published / f"{name}.csv").is_file() for name in record.get("datasets", [])):
        return None
    return f"unchanged since {record.get('date', '?')} (fingerprint {fp})"


def published_record(name: str, published: Path) -> dict:
    """The provenance record of experiment ``name`` in an environment folder ({} if it has none)."""
    prov_path = published / PROVENANCE_FILE
    if not prov_path.is_file():
        return {}
    return (json.loads(prov_path.read_text()).get("experiments") or {}).get(name, {})


def why_measure(exp: Experiment, parts: dict, published: Path) -> str:
    """Why a run measures ``exp`` again: never measured here, or which part of its plan changed."""
    record = published_record(exp.name, published)
    if not record:
        return "never measured here"
    if record.get("partial"):
        return "its last run measured only the missing datasets"
    changed = stale_parts(record, parts)
    if not changed:
        return "a dataset it publishes is missing"
    return f"measured {record.get('date', '?')[:10]}; since then: {changed}"


def resume_mismatch(previous: dict, profile: str, hw: dict, sw: dict, prints: dict[str, str]) -> str | None:
    """Why rows staged by an earlier run (``previous``: its run.json) must not be mixed with this one's."""
    def gpus(h: dict) -> list:
        return [g.get("name") for g in h.get("gpus") or []]

    then_hw, then_sw = previous.get("hardware") or {}, previous.get("software") or {}
    checks = [("profile", previous.get("profile"), profile), ("GPUs", gpus(then_hw), gpus(hw)),
              ("vLLM", then_sw.get("vllm"), sw.get("vllm")), ("torch", then_sw.get("torch"), sw.get("torch"))]
    if profile == "cpu":
        checks.append(("CPU cores", then_hw.get("cpu_count"), hw.get("cpu_count")))
        if "cpu_extensions" in then_hw:  # recorded since 2026-12-05
            checks.append(("CPU extensions", then_hw["cpu_extensions"], hw.get("cpu_extensions")))
    for what, then, now in checks:
        if then != now:
            return f"{what}: {then} then, {now} now"
    for name, old, fp in changed_inputs(previous, prints):
        return f"{name}'s inputs (its code, servers or workload) changed: fingerprint {old} then, {fp} now"
    return None


def changed_inputs(previous: dict, prints: dict[str, str]):
    """(experiment, fingerprint then, fingerprint now) for each of ``prints`` whose staged rows had other inputs."""
    for name, fp in prints.items():
        old = (previous.get("fingerprints") or {}).get(name)
        if old and old != fp:
            yield name, old, fp


def order_by_server(instances: list[Experiment], profile: Profile) -> list[Experiment]:
    """Experiments whose first server is the same run back to back, so they share one start; otherwise the
    order asked for stands (put first what matters most when a device lease may end early)."""
    first = {id(e): repr(e.servers(profile)[0].key) if e.servers(profile) else "" for e in instances}
    rank: dict[str, int] = {}
    for e in instances:
        rank.setdefault(first[id(e)], len(rank))
    return sorted(instances, key=lambda e: rank[first[id(e)]])


def print_plan(instances: list[Experiment], profile: Profile, env_name: str, reasons: dict[str, str],
               published: Path | None = None) -> float:
    for exp in instances:
        console.print(f"  {exp.name}: {reasons.get(exp.name, 'will run')}")
    instances = [e for e in instances if not reasons.get(e.name, "").startswith("skip")]
    table = Table(title=f"plan: profile {profile.name} → data/{env_name}/")
    for col in ("experiment", "server", "what", "requests", "≈ s"):
        table.add_column(col)
    for exp in instances:
        for step in exp.plan(profile):
            served_by = "no vLLM" if step.server is None else step.server.label or step.server.model_role
            table.add_row(exp.name, served_by, step.what, str(step.requests), f"{step.seconds:.0f}")
    console.print(table)
    planned = budget.estimate([e for e in instances], profile, Path("/nonexistent"))
    guess = budget.estimate(instances, profile, published)
    startup, basis = budget.startup_estimate(profile, published or Path("/nonexistent"))
    starts = start_events(upcoming_servers(instances, profile), profile)
    console.print(f"{len(starts)} start-up(s) ({sum(len(g) for g in starts)} servers; "
                  f"{sum(1 for g in starts if len(g) > 1)} of them several servers at once) × ≈{startup:.0f} s ({basis})"
                  f" + requests ≈ {planned.steps_s:.0f} s → ≈ "
                  f"{(planned.steps_s + len(starts) * startup) / 60:.1f} min")
    if guess.last:
        rest = [e for e in instances if e.name not in guess.last]
        rest_s = guess.seconds - sum(guess.last.values())
        console.print(f"their last full runs here took {', '.join(f'{n} {s:.0f} s' for n, s in guess.last.items())}"
                      + (f"; the rest ≈ {rest_s:.0f} s as above" if rest else "")
                      + f" → ≈ {guess.seconds / 60:.1f} min (the better guess: it counts what this machine really did)")
    return guess.seconds if guess.last else planned.steps_s + len(starts) * startup


def planning_target(published: Path, hw: dict, sw: dict, opts: RunOptions) -> tuple[dict, RunOptions]:
    """What a dry run fingerprints with. Planning for another machine's environment (its GPUs differ from this
    one's) takes the software versions and GPU memory that environment recorded, so "skip"/"will run" and the
    staged rows' check come out as they will there."""
    path = published / "provenance.json"
    if not path.is_file():
        return sw, opts
    recorded = json.loads(path.read_text())
    gpus = [g for g in (recorded.get("hardware") or {}).get("gpus") or []]
    same_machine = [g.get("name") for g in gpus] == [g.get("name") for g in hw.get("gpus") or []]
    if same_machine and sw.get("vllm"):
        return sw, opts
    # another machine's environment, or no vLLM installed here (a dry run needs none): plan as the environment ran
    software = recorded.get("software") or sw
    console.print(f"[dim]planning for {published.name} with what it recorded: vLLM {software.get('vllm')}, torch "
                  f"{software.get('torch')}" + (f", {gpus[0].get('memory_mib')} MiB a GPU" if gpus else "") + "[/]")
    if gpus and "gpu_memory_gib" in opts.profile.sizes:  # as profiles.pick computes it on the device
        sizes = opts.profile.sizes | {"gpu_memory_gib": round(gpus[0]["memory_mib"] / 1024, 1)}
        opts = dataclasses.replace(opts, profile=dataclasses.replace(opts.profile, sizes=sizes))
    return software, opts


def warn_unresumable(staging: Staging, instances: list[Experiment], prints: dict[str, str]) -> None:
    """Say now, not on the device, when staged rows cannot be resumed by this code (the run would refuse them)."""
    previous = staging.run_record()
    if not staging.staged_files() or previous is None:
        return
    staged = {e.name: prints[e.name] for e in instances if any(staging.csv_path(d).is_file() for d in e.datasets)}
    for name, old, fp in changed_inputs(previous, staged):
        console.print(f"[yellow]{name}: the rows staged in {staging.dir} were measured with other inputs "
                      f"(fingerprint {old} then, {fp} now); --resume will refuse them: run with "
                      "--fresh, or remove that folder before carrying it[/]")


@dataclass
class RunPlan:
    """What a run will measure and where: the experiments left to measure, with the facts their provenance starts from."""

    data_root: Path
    env_name: str
    published: Path  # data_root / env_name
    hardware: dict
    software: dict
    experiments: list[Experiment]  # in the order they run (servers shared where they can be)
    fingerprints: dict[str, str]
    reasons: dict[str, str]  # experiment -> "will run: …" | "skip: …"
    # the profile planned with: a dry run for another machine's environment takes its GPU memory (how many servers
    # share the card depends on it)
    profile: Profile
    plans: dict[str, dict] = dataclasses.field(default_factory=dict)  # experiment -> plan_parts of its measured plan


def plan(opts: RunOptions) -> RunPlan:
    """Which experiments can run here, where their data go, and which of them are up to date (skipped)."""
    data_root = (opts.data_root or default_data_root()).resolve()
    instances = order_by_server([get(name)() for name in opts.experiments], opts.profile)
    for exp in list(instances):
        reason = exp.unavailable(opts.profile, opts.vllm_python)
        if opts.base_url and not exp.attachable:
            reason = "it starts servers with flags of its own, so it cannot measure an attached server"
        if reason:
            console.print(f"[yellow]skipping {exp.name}: {reason}[/]")
            instances.remove(exp)
    if opts.base_url:  # before any server is contacted or any folder written
        refuse_unused_roles(opts.base_url, instances, opts.profile)
    if opts.profile.sizes_override and not opts.env_name:
        raise RunRefused("MEASURE_SIZES makes a smaller run than the profile's; it would replace this machine's "
                         "published figures: name an environment of its own with --env (e.g. --env smoke)")
    hw = prov.hardware()
    env_name = opts.env_name or (attached_env_name(opts.base_url, opts.api_key) if opts.base_url
                                 else prov.default_env_name(opts.profile.name, hw))
    if opts.base_url and not env_name.startswith(ATTACHED_PREFIX):
        raise RunRefused(f"--env {env_name!r}: attach mode writes only environments named {ATTACHED_PREFIX}… (so its "
                         f"figures never mix with, complete or stand in for this machine's); pass --env "
                         f"{ATTACHED_PREFIX}{env_name}, or leave --env out to name it after the server")
    if not ENV_NAME.fullmatch(env_name):
        raise RunRefused(f"--env {env_name!r}: an environment is a plain folder name under the data root (letters, "
                         "digits, '.', '_', '-'; no '/' or '..')")
    sw = prov.software(opts.vllm_python)
    published = data_root / env_name
    if opts.base_url:
        refuse_foreign_environment(published)
    else:
        refuse_attached_environment(published)
    if opts.dry_run:
        sw, opts = planning_target(published, hw, sw, opts)
    prints, reasons, plans = {}, {}, {}
    for exp in instances:
        measured = measured_plan(exp, opts.profile, sw)
        prints[exp.name], plans[exp.name] = fingerprint_of(measured), plan_parts(measured)
        why = None if (opts.force or opts.base_url or opts.only_missing) else up_to_date(exp, prints[exp.name], published)
        reasons[exp.name] = f"skip: {why}; --force re-measures" if why else (
            "will run: --force" if opts.force else f"will run: {why_measure(exp, plans[exp.name], published)}")
    return RunPlan(data_root, env_name, published, hw, sw, instances, prints, reasons, opts.profile, plans)


def run(opts: RunOptions) -> list[str]:
    """Plan, then (unless --dry-run) measure what is not up to date under the data root's run lock; with a budget,
    only the slice of it that fits."""
    the_plan = plan(opts)
    piece = budget_slice(opts, the_plan)
    if opts.dry_run:
        print_plan(the_plan.experiments, the_plan.profile, the_plan.env_name, the_plan.reasons, the_plan.published)
        warn_unresumable(Staging(the_plan.data_root, the_plan.env_name), the_plan.experiments, the_plan.fingerprints)
        return []
    for exp in list(the_plan.experiments):
        if the_plan.reasons[exp.name].startswith("skip"):
            console.print(f"[dim]{exp.name}: {the_plan.reasons[exp.name]}[/]")
            the_plan.experiments.remove(exp)
    lock = RunLock(the_plan.data_root)
    lock.acquire()
    try:
        return execute(opts, the_plan)
    finally:
        lock.release()
        if piece is not None and piece.left:
            console.print(f"[bold]left for a later budget:[/] {', '.join(e.name for e in piece.left)} "
                          f"(≈ {sum(piece.each_s[e.name] for e in piece.left) / 60:.1f} min; "
                          f"`measure run --budget MINUTES --dry-run` plans the next slice)")


def budget_slice(opts: RunOptions, the_plan: RunPlan) -> budget.Slice | None:
    """With ``--budget``: keep in the plan only the stale or missing experiments that fit, most-asked first (the
    others are marked "later"), and say what is left. Without one: None, the plan unchanged."""
    if opts.budget_min is None:
        return None
    todo = [e for e in the_plan.experiments if not the_plan.reasons[e.name].startswith("skip")]
    piece = budget.fit(todo, the_plan.profile, the_plan.published, opts.budget_min * 60)
    for exp in piece.left:
        the_plan.reasons[exp.name] = (f"later: {the_plan.reasons[exp.name].removeprefix('will run: ')}; "
                                      f"≈ {piece.each_s[exp.name] / 60:.1f} min does not fit what this budget has left")
        the_plan.experiments.remove(exp)
    kept = [e for e in the_plan.experiments if e in piece.chosen or the_plan.reasons[e.name].startswith("skip")]
    the_plan.experiments[:] = order_by_server(budget.by_priority(kept), the_plan.profile)
    for line in budget.describe(piece, opts.budget_min * 60):
        console.print(line)
    return piece


class RunRefused(SystemExit):
    pass


# Every environment attach mode writes is named so: a local run never takes one for its own (and never skips an
# experiment as "unchanged" because attached figures are there), and attach mode never writes into a local one.
ATTACHED_PREFIX = "attached-"


def attached_env_name(base_urls: list[str], api_key: str | None) -> str:
    """Attach mode's own environment, named from the (first) attached server: ``attached-HOST-PORT-vllm-VERSION``,
    so an attached run never lands in this machine's environment."""
    from urllib.parse import urlsplit

    item = base_urls[0]
    url = item.split("=", 1)[1] if "=" in item.split("://")[0] else item
    server = attaching.attach(url, api_key)
    where = urlsplit(server.base_url)
    version = prov.slug(server.facts.version or "unknown")
    return f"{ATTACHED_PREFIX}{prov.slug(f'{where.hostname}-{where.port or 80}')}-vllm-{version}"


def _recorded_profile(published: Path) -> str | None:
    path = published / PROVENANCE_FILE
    return json.loads(path.read_text()).get("profile") if path.is_file() else None


def refuse_foreign_environment(published: Path) -> None:
    """Attach mode writes only environments that attach mode made: it never relabels or prunes another's data."""
    profile = _recorded_profile(published)
    if profile not in (None, "attach"):
        raise RunRefused(f"{published} holds measurements of servers this harness started (profile {profile}); "
                         "attach mode never writes into them: leave out --env (an attached environment is named "
                         "after the server) or name a new one")


def refuse_attached_environment(published: Path) -> None:
    """A run that starts its own servers never writes into (completes, or skips because of) attached figures."""
    profile = _recorded_profile(published)
    if published.name.startswith(ATTACHED_PREFIX) or profile == "attach":
        raise RunRefused(f"{published} holds figures of servers attach mode measured (someone else's servers); a run "
                         "that starts its own servers never adds to them or skips because of them: name another "
                         f"environment with --env (not starting with {ATTACHED_PREFIX})")


class ExperimentsFailed(SystemExit):
    """Some experiments of the run failed; the others were promoted. Exits non-zero with what to do next."""

    def __init__(self, failed: dict[str, str], promoted: list[str]):
        self.failed = failed
        lines = [f"  {name}: {why}" for name, why in failed.items()]
        super().__init__(f"{len(failed)} experiment(s) failed (their logs are above; staged rows kept):\n" + "\n".join(lines)
                         + (f"\npromoted: {', '.join(promoted)}" if promoted else "")
                         + f"\nfix the cause, then continue with: nox -s measure -- --resume {' '.join(failed)}")


class RunLock:
    """One run per data root: two runs would each take the other's live server for an orphan and stage into
    the same files. An advisory lock on ``DATA_ROOT/.run.lock``, freed by the kernel when the process dies."""

    def __init__(self, data_root: Path):
        self.path = data_root / ".run.lock"
        self._fh = None

    def acquire(self) -> None:
        import fcntl
        import os

        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = open(self.path, "a+")  # noqa: SIM115 - held for the whole run
        except OSError as exc:
            raise RunRefused(f"cannot write to the data root {self.path.parent} ({exc.strerror}); measure into a "
                             "writable one with --data-root DIR") from None
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            fh.close()
            raise RunRefused(f"another measure run is using {self.path.parent} ({holder}); wait for it to finish, "
                             "or stop it, then run again") from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()}, started {prov.now()}\n")
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            self._fh.close()  # closing drops the lock
            self._fh = None


def open_staging(opts: RunOptions, the_plan: RunPlan) -> tuple[Staging, dict | None]:
    """The run's staging area, and the interrupted run's record when this one resumes it (refused when the staged
    rows were measured under other conditions, or when rows are staged and neither --resume nor --fresh is given)."""
    staging = Staging(the_plan.data_root, the_plan.env_name)
    hw, sw, prints = the_plan.hardware, the_plan.software, the_plan.fingerprints
    leftovers = staging.staged_files()
    if opts.resume and not leftovers:
        console.print(f"[yellow]--resume: nothing is staged in {staging.dir}; measuring from the start[/]")
    if leftovers and opts.fresh:
        staging.discard()
    elif leftovers and not opts.resume:
        raise StagingNotEmpty(
            f"an interrupted run left {len(leftovers)} staged dataset(s) in {staging.dir}:\n  "
            + "\n  ".join(p.name for p in leftovers)
            + "\nrun again with --resume to continue it, or --fresh to discard those rows."
        )
    previous = staging.run_record() if leftovers and opts.resume else None
    if previous is not None:
        for note in staging.drop_torn_rows():
            console.print(f"[yellow]{note}[/]")
    if previous is None:
        staging.save_run({"started": prov.now(), "code_revision": prov.code_revision(), "profile": opts.profile.name,
                          "hardware": hw, "software": sw, "fingerprints": prints, "servers": {}, "dataset_servers": {}})
        return staging, None
    staged_by = {e.name: prints[e.name] for e in the_plan.experiments
                 if any(staging.csv_path(d).is_file() for d in e.datasets)}
    why = resume_mismatch(previous, opts.profile.name, hw, sw, staged_by)
    if why:
        raise StagingNotEmpty(
            f"the rows staged in {staging.dir} were measured under other conditions ({why}; started "
            f"{previous.get('started')} on {(previous.get('hardware') or {}).get('host')}).\nResume them on a machine "
            "and code like those, or run with --fresh to discard them.")
    previous.setdefault("resumed", []).append({"date": prov.now(), "host": hw.get("host"),
                                               "code_revision": prov.code_revision()})
    previous.setdefault("fingerprints", {}).update(prints)
    staging.save_run(previous)
    return staging, previous


def attached_roles(base_urls: list[str]) -> dict[str, str]:
    """``--base-url`` values as {role: URL}; a bare URL serves every role ("*")."""
    found = {}
    for item in base_urls:
        role, _, url = item.rpartition("=") if "=" in item.split("://")[0] else ("*", "", item)
        found[role] = url
    return found


def refuse_unused_roles(base_urls: list[str], instances: list[Experiment], profile: Profile) -> None:
    """Before anything runs: every ROLE=URL names a role the chosen experiments send to, and something is sent to
    an attached server at all (else the run would write an empty environment)."""
    used = {spec.model_role for exp in instances for spec in exp.servers(profile)}
    roles = attached_roles(base_urls)
    unknown = sorted(r for r in roles if r != "*" and r not in used)
    if unknown:
        raise RunRefused(f"--base-url {unknown[0]}=…: no experiment of this run sends requests to a role named "
                         f"{excerpt(unknown[0], 40)}; the roles they use: {', '.join(sorted(used)) or 'none'}")
    if "*" not in roles and not used & set(roles):
        raise RunRefused("attach mode: none of the chosen experiments sends requests to the roles given "
                         f"({', '.join(sorted(roles))}); nothing would be measured")


def attached_pool(opts: RunOptions, the_plan: RunPlan) -> AttachedPool:
    """Attach mode's servers, each checked to be a vLLM that does the work the experiments will ask of it."""
    servers = {role: attaching.attach(url, opts.api_key) for role, url in attached_roles(opts.base_url).items()}
    pool = AttachedPool(opts.profile, servers, declared_weights=opts.weights, python=opts.vllm_python,
                        cache_dir=opts.cache_dir)
    probe_attached(pool, the_plan.experiments, opts.profile)
    return pool


def open_pool(opts: RunOptions, the_plan: RunPlan, previous: dict | None) -> ServerPool:
    """The servers the run starts itself."""
    pool = ServerPool(opts.profile, opts.cache_dir, srv.STATE_DIR / "logs" / the_plan.env_name, python=opts.vllm_python,
                      upcoming=upcoming_servers(the_plan.experiments, opts.profile))
    if previous is not None:  # servers behind rows staged before the interruption, maybe on another machine
        pool.records.update(previous.get("servers") or {})
    return pool


def probe_attached(pool: AttachedPool, experiments: list[Experiment], profile: Profile) -> None:
    """One real request of each kind the experiments will send to each attached server, its answer's shape checked
    before anything is measured or recorded (a stub answering only /v1/models and /version is refused here)."""
    checked: set[tuple[str, str]] = set()
    for exp in experiments:
        for spec in exp.servers(profile):
            if not pool.has(spec.model_role):
                continue  # that role's steps are skipped: nothing is sent to it
            server, kind = pool.server(spec.model_role), attaching.kind_of(spec.model_role)
            if (server.base_url, kind) in checked:
                continue
            attaching.probe(server, kind)
            console.print(f"attached {server.base_url} ({server.model}) answered a {kind} request as vLLM does")
            checked.add((server.base_url, kind))


def run_facts(opts: RunOptions, the_plan: RunPlan, pool: ServerPool | AttachedPool, previous: dict | None) -> prov.RunFacts:
    """What every promoted experiment's provenance says of this run."""
    return prov.RunFacts(the_plan.env_name, the_plan.hardware, pool.software(the_plan.software), opts.profile.name,
                         the_plan.fingerprints, plans=the_plan.plans, resumed_from=previous, sizes_override=opts.profile.replaced_sizes,
                         attached=pool.base_urls())


def measure_experiment(exp: Experiment, opts: RunOptions, the_plan: RunPlan, staging: Staging,
                       pool: ServerPool | AttachedPool, previous: dict | None) -> tuple[RunContext, str | None]:
    """Run one experiment, its rows staged as they come; (its context, why it failed or None)."""
    console.rule(f"[bold]{exp.name}[/] — {exp.title['en']}")
    as_published = frozenset(s.name for s in exp.datasets if (the_plan.published / s.file_name).is_file()) \
        if opts.only_missing else frozenset()
    if as_published:
        console.print(f"[dim]--only-missing: {exp.name} keeps {len(as_published)} published dataset(s) as they are[/]")
    ctx = RunContext(exp.name, opts.profile, staging, pool, published=as_published)
    if previous is not None:  # the servers behind this experiment's rows staged before the interruption
        earlier = previous.get("dataset_servers") or {}
        ctx.dataset_servers = {s.name: set(earlier[s.name]) for s in exp.datasets if s.name in earlier}
    try:
        exp.run(ctx)
    except Exception as exc:  # noqa: BLE001 - the run goes on: on a rented GPU the next experiments still fit
        # The cause first, where the error is only a broken connection to a server that died.
        exited = pool.drop_exited()
        cause = "; ".join(exited) + " — then " if exited else ""
        console.print(f"[red]✗ {exp.name} failed: {cause}{exc}[/]\n"
                      f"[yellow]its staged rows stay in {staging.dir}; the run goes on with the next experiment[/]")
        return ctx, f"{cause}{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    finally:
        ctx.close()
    return ctx, None


def record_experiment(exp: Experiment, ctx: RunContext, facts: prov.RunFacts, staging: Staging,
                      pool: ServerPool | AttachedPool, profile: Profile, wall_s: float) -> list[str]:
    """Promote a finished experiment's datasets with their provenance; the datasets promoted."""
    planned = {pool.sid(spec) for spec in exp.servers(profile) if pool.has(spec.model_role)}
    revision, date = prov.code_revision(), prov.now()

    def update(current: dict, promoted_now: list[str]) -> dict:
        return facts.record_experiment(
            current, experiment=exp.name, datasets=[d.name for d in exp.datasets], promoted_now=promoted_now,
            dataset_servers=ctx.dataset_servers, planned=planned, server_records=pool.records,
            kept_older=bool(ctx.published), revision=revision, date=date, wall_s=wall_s,
            server_starts=[start for start in pool.starts if start["experiment"] == exp.name])

    done = staging.promote([*exp.datasets, STARTUP], update, merge_by_key=(STARTUP.name,))
    # Rows of servers this run started stay too: a later experiment may yet use them (a shared start).
    staging.keep_only(STARTUP, {(s,) for s in staging.published_provenance().get("servers", {})}
                      | {(s,) for s in pool.records})
    return done


def execute(opts: RunOptions, the_plan: RunPlan) -> list[str]:
    """Measure the planned experiments under the run lock: stage every row, promote each finished experiment."""
    srv.reap_orphans(log=lambda m: console.print(f"[yellow]{m}[/]"))
    # attach mode checks the user's servers before anything is staged: a refused server leaves nothing behind
    attached = attached_pool(opts, the_plan) if opts.base_url else None
    staging, previous = open_staging(opts, the_plan)
    pool = attached or open_pool(opts, the_plan, previous)
    pool.prepare(the_plan.experiments)
    if opts.profile.replaced_sizes:
        console.print(f"[yellow]workload sizes replaced by MEASURE_SIZES[/] {json.dumps(opts.profile.replaced_sizes)}: "
                      "a smaller run whose figures are not the profile's (its provenance says so)")
    facts = run_facts(opts, the_plan, pool, previous)
    promoted: list[str] = []
    failed: dict[str, str] = {}
    try:
        for exp in the_plan.experiments:
            started = time.monotonic()
            pool.serving = exp.name
            ctx, failure = measure_experiment(exp, opts, the_plan, staging, pool, previous)
            if failure:
                failed[exp.name] = failure
                continue
            done = record_experiment(exp, ctx, facts, staging, pool, opts.profile, time.monotonic() - started)
            promoted += done
            console.print(f"[green]✓ {exp.name}[/] in {time.monotonic() - started:.0f} s → data/{the_plan.env_name}/: "
                          f"{', '.join(done) or 'nothing'}")
        if failed:
            raise ExperimentsFailed(failed, [e.name for e in the_plan.experiments if e.name not in failed])
        staging.finish()
    except ExperimentsFailed:
        raise
    except BaseException as exc:
        kept = staging.staged_files()
        if kept:
            console.print(f"[red]interrupted ({type(exc).__name__}): {len(kept)} staged dataset(s) kept in {staging.dir};"
                          f" published data untouched. Continue with: nox -s measure -- --resume {' '.join(opts.experiments)}[/]")
        raise
    finally:
        pool.stop()
    return promoted
