#!/usr/bin/env bash
# How long `mkdocs build` of the site takes: RUNS builds (default 5) after one warm-up (jieba's model cache, .pyc
# files), each a whole process; prints every run's wall and CPU seconds, then min / median / max. Quote the median.
# A benchmark, not a test: a timed test fails on a busy machine. The load average is printed first; on a shared
# machine compare only figures taken under the same load, or take both in one call (BASELINE, below).
#   usage: scripts/bench-build.sh [RUNS]          (from the repository root, in the site's environment)
#   BASELINE=/path/to/other/checkout scripts/bench-build.sh   alternates builds of this tree and that one
# `nox -s bench_build` runs it in the site extra's environment.
set -euo pipefail
runs=${1:-5}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
exec python - "$runs" "$out" "${BASELINE:-}" <<'EOF'
import os, resource, statistics, subprocess, sys, time

runs, out, baseline = int(sys.argv[1]), sys.argv[2], sys.argv[3]
trees = {"this": os.getcwd()} | ({"baseline": os.path.abspath(baseline)} if baseline else {})
print(f"{os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {runs} runs per tree")


def build(tree: str) -> tuple[float, float]:
    """(wall s, cpu s) of one `mkdocs build` of TREE, run with that tree's measure package."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = os.environ | {"PYTHONPATH": tree, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-d", f"{out}/site"], cwd=tree, env=env,
                            capture_output=True, text=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode:
        sys.exit(f"mkdocs build failed in {tree}:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    return wall, after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime


for tree in trees.values():
    build(tree)  # warm-up, not counted
times = {name: [] for name in trees}
for i in range(runs):
    for name, tree in trees.items():  # alternating: a drift in the machine's speed hits both alike
        wall, cpu = build(tree)
        times[name].append((wall, cpu))
        print(f"  {name} run {i + 1}: wall {wall:.2f} s, cpu {cpu:.2f} s", flush=True)
for name, rows in times.items():
    for label, values in (("wall s", [w for w, _ in rows]), ("cpu s", [c for _, c in rows])):
        print(f"{name:>8} {label:<7} min {min(values):6.2f}  median {statistics.median(values):6.2f}  "
              f"max {max(values):6.2f}")
EOF
