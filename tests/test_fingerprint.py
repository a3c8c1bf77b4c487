"""An experiment's fingerprint covers what it measures (servers, sizes, the code that builds and sends requests,
versions, metric definitions), never how it is described; --budget plans slices of stale experiments."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SOFTWARE = {"vllm": "0.32.0", "torch": "2.13.0+cpu"}
PRINT = ("import json; from measure.experiment import experiments; from measure.harness.profiles import CPU, GPU;"
         "from measure.harness.fingerprint import fingerprint;"
         f"print(json.dumps({{n: [fingerprint(c(), p, {SOFTWARE!r}) for p in (CPU, GPU)]"
         " for n, c in sorted(experiments().items())}))")


def fingerprints_after(tmp_path: Path, edits: dict[str, list[tuple[str, str]]]) -> dict[str, list[str]]:
    """Every experiment's fingerprints (CPU and GPU profiles) computed from a copy of ``measure/`` with ``edits``
    (file -> [(old, new)], each old text present exactly once) applied."""
    root = tmp_path / "copy"
    shutil.copytree(REPO / "measure", root / "measure", ignore=shutil.ignore_patterns("__pycache__"))
    for rel, changes in edits.items():
        path = root / rel
        text = path.read_text()
        for old, new in changes:
            assert text.count(old) == 1, f"{rel}: {old!r} occurs {text.count(old)} times"
            text = text.replace(old, new)
        path.write_text(text)
    out = subprocess.run([sys.executable, "-c", PRINT], cwd=root, env=os.environ | {"PYTHONPATH": str(root)},
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> dict[str, list[str]]:
    return fingerprints_after(tmp_path_factory.mktemp("base"), {})


def changed(before: dict, after: dict) -> set[str]:
    return {name for name in before if before[name] != after[name]}


DESCRIBING_EDITS = {
    # a dataset title in Chinese and English, a column's doc, the experiment's title
    "measure/experiments/multimodal.py": [
        ('title = {"zh": "多模态输入", "en": "Multimodal input"}', 'title = {"zh": "多模态", "en": "Multimodal"}'),
    ],
    "measure/experiments/api_servers.py": [
        ('title={"zh": "API 服务器进程数与吞吐、延迟和 CPU 占用",', 'title={"zh": "API 服务器进程数：吞吐、延迟与 CPU",'),
        ('"API-server processes seen once the server was up"', '"API-server processes counted after start-up"'),
        # a docstring, a comment, a log line, an error text, a dry-run estimate and its wording
        ('"""Front end against engine:', '"""The front end against the engine:'),
        ("# round 0 warms this load point up and is not kept", "# round 0 is a warm-up"),
        ('ctx.log(f"  {model.name}, --api-server-count {count}: processes {shown}")',
         'ctx.log(f"  {model.name} with {count} API servers: {shown}")'),
        ('raise RuntimeError(f"{workload} requests failed at {concurrency} in flight: {batch.errors[:2]}")',
         'raise RuntimeError(f"{workload}: {len(batch.errors)} requests failed")'),
        ("return requests / (100 if cpu else 1000)", "return requests / (120 if cpu else 1500)"),
        ('f"{count}: {len(s[\'concurrency\'])} load points', 'f"{count}: {len(s[\'concurrency\'])} loads'),
    ],
}


def test_describing_an_experiment_differently_keeps_its_fingerprint(tmp_path, baseline):
    assert changed(baseline, fingerprints_after(tmp_path, DESCRIBING_EDITS)) == set()


@pytest.mark.parametrize("what, edits, expected", [
    ("a request size", {"measure/experiments/api_servers.py": [('"words": 200, "output_tokens": 128},',
                                                               '"words": 200, "output_tokens": 256},')]},
     {"api_servers"}),
    ("a server flag", {"measure/experiments/api_servers.py": [
        ('LARGE_MODEL_MEMORY = ("--gpu-memory-utilization", "0.3",', 'LARGE_MODEL_MEMORY = ("--gpu-memory-utilization", "0.35",')]},
     {"api_servers"}),
    ("a request's shape, in code", {"measure/experiments/api_servers.py": [
        ("server.model, s[\"output_tokens\"], ignore_eos=True)", "server.model, s[\"output_tokens\"], ignore_eos=False)")]},
     {"api_servers"}),
    ("the bytes of a shared workload", {"measure/workloads.py": [('"time year people', '"clock year people')]},
     None),  # every experiment that draws words from it
    ("a metric definition's version", {"measure/harness/definitions.py": [
        ('"percentile": Definition(\n        2,', '"percentile": Definition(\n        3,')]},
     {"batch_limits", "capacity", "fidelity", "instances", "prefill", "rerank_concurrency", "rerank_documents",
      "tuning_ladder"}),
])
def test_changing_what_is_measured_changes_the_fingerprint(tmp_path, baseline, what, edits, expected):
    moved = changed(baseline, fingerprints_after(tmp_path, edits))
    if expected is None:
        assert {"api_servers", "capacity", "pooling", "prefill"} <= moved, what
        assert "multimodal" not in moved, "multimodal sends images, no words"
        assert "security" not in moved, "security sends no generated words"
    else:
        assert moved == expected, what


def test_each_metric_definition_is_pinned_to_its_code():
    """Changing how TTFT, ITL, TPOT, a round's throughput, a percentile or a CPU share is computed must come with a
    new version of that definition (the fingerprints of the experiments using it then change)."""
    from measure.harness.definitions import DEFINITIONS, METRICS_VERSION
    from measure.harness.fingerprint import definition_digest

    for name, definition in DEFINITIONS.items():
        assert definition_digest(name) == definition.digest, (
            f"the code of the metric definition {name!r} changed: if figures computed by it change, raise its "
            f"version and say why in its history; then pin digest {definition_digest(name)!r}")
    assert METRICS_VERSION == 1 + sum(d.version - 1 for d in DEFINITIONS.values())


def test_a_definition_code_edit_is_seen_by_the_digest(tmp_path):
    root = tmp_path / "copy"
    shutil.copytree(REPO / "measure", root / "measure", ignore=shutil.ignore_patterns("__pycache__"))
    path = root / "measure/harness/definitions.py"
    path.write_text(path.read_text().replace("return float(np.percentile(values, p))",
                                             "return float(np.percentile(values, p, method='nearest'))"))
    code = ("from measure.harness.fingerprint import definition_digest; from measure.harness.definitions import "
            "DEFINITIONS; print(definition_digest('percentile') == DEFINITIONS['percentile'].digest)")
    out = subprocess.run([sys.executable, "-c", code], cwd=root, env=os.environ | {"PYTHONPATH": str(root)},
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_percentiles_are_the_bench_s():
    """vllm bench serve reports np.percentile(values, 99): linear between ranks, not the nearest rank."""
    from measure.harness.definitions import percentile

    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile(values, 50) == pytest.approx(50.5)
    with pytest.raises(ValueError):
        percentile([], 99)


def test_experiments_use_the_definitions_they_compute_with():
    from measure.experiment import experiments
    from measure.harness.fingerprint import measuring_code

    used = {name: measuring_code(cls)[1] for name, cls in experiments().items()}
    assert {"request timing", "round", "cpu share"} <= used["api_servers"]  # ctx.load and the CPU sampler
    assert "percentile" in used["capacity"] and "percentile" not in used["api_servers"]
    assert used["security"] == set()  # no load client, no rounds


def test_a_dry_run_says_which_part_of_the_plan_changed():
    from measure.harness.fingerprint import stale_parts

    now = {"servers": "a", "sizes": "b", "code": "c", "vllm": "0.32.0", "torch": "2.13.0",
           "metrics": {"round": 2, "percentile": 2}}
    then = now | {"sizes": "x", "vllm": "0.26.0", "metrics": {"round": 1, "percentile": 2}}
    said = stale_parts({"plan": then}, now)
    assert "its sizes" in said and "the vLLM version (0.26.0 then, 0.32.0 now)" in said
    assert "the definition of round (version 1 then, 2 now)" in said and "percentile" not in said
    assert stale_parts({"plan": now}, now) == ""


# ---- --budget ---------------------------------------------------------------------------------------------

def test_the_budget_order_names_real_experiments_and_a_new_one_goes_last():
    """budget.PRIORITY names the most-asked experiments once each, and only experiments that exist (a renamed one
    fails here); an experiment it does not name, such as a new chapter's, goes after them by name, so a new chapter
    touches no harness file."""
    from types import SimpleNamespace

    from measure.experiment import experiments
    from measure.harness.budget import PRIORITY, by_priority

    assert len(set(PRIORITY)) == len(PRIORITY) and set(PRIORITY) <= set(experiments())
    new = [SimpleNamespace(name=n) for n in ("zz_new", "aa_new", PRIORITY[1], PRIORITY[0])]
    assert [e.name for e in by_priority(new)] == [PRIORITY[0], PRIORITY[1], "aa_new", "zz_new"]


def test_a_budget_takes_the_most_asked_stale_experiments_that_fit(tmp_path):
    from measure.experiment import get
    from measure.harness import budget, profiles

    profile = profiles.pick("cpu")
    names = ("pooling", "api_servers", "security", "capacity")
    walls = {"api_servers": 600.0, "capacity": 500.0, "pooling": 200.0, "security": 100.0}
    (tmp_path / "provenance.json").write_text(json.dumps({"experiments": {n: {"wall_s": s} for n, s in walls.items()}}))
    instances = [get(n)() for n in names]
    piece = budget.fit(instances, profile, tmp_path, budget_s=850)
    # api_servers first (most asked); capacity does not fit beside it; pooling and security fill the rest
    assert [e.name for e in piece.chosen] == ["api_servers", "pooling"]
    assert [e.name for e in piece.left] == ["capacity", "security"]
    assert piece.seconds == pytest.approx(800.0)
    words = budget.describe(piece, 850)
    assert "this slice takes api_servers, pooling" in words[0]
    assert "capacity ≈ 8.3 min" in words[1]
    tiny = budget.fit(instances, profile, tmp_path, budget_s=50)
    assert tiny.chosen == [] and "longer than the budget alone: api_servers, capacity, pooling, security" in \
        budget.describe(tiny, 50)[2]


@pytest.mark.parametrize("bad", ["0", "-5", "nan", "inf", "ten"])
def test_a_budget_is_a_positive_number_of_minutes(bad, capsys):
    from measure.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["run", "--dry-run", "--budget", bad])
    assert exit_.value.code == 2
    assert re.search(r"--budget: .*(minutes|number)", capsys.readouterr().err)
