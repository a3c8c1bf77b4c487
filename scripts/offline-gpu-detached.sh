#!/usr/bin/env bash
# offline-gpu-run.sh for runs longer than one command may last on the host. A command's processes end with it,
# except those in a new session: `start` copies the tree and starts the run in one, and every later command
# (`wait`, back to back where an idle host is handed back) waits on it and brings back its log and all it has
# staged, so nothing measured is lost if the host goes away. No start-up is cut at a command's end.
# Usage: scripts/offline-gpu-detached.sh start OUT EXPERIMENT...   first call, after the bundle parts are in
#        scripts/offline-gpu-detached.sh wait OUT                  every later call
#        scripts/offline-gpu-detached.sh cache OUT                 after the run: compile-cache parts not yet returned
# Each call waits WAIT_S (default 560) at most; exit 0: the run has ended (its status in OUT/rc), 3: still running.
set -euo pipefail
mode=${1:?usage: offline-gpu-detached.sh start|wait OUT [EXPERIMENT...]}; out=${2:?OUT missing}; shift 2
# Each run has a folder of its own under $runs; `current` names the latest, which `wait` follows.
runs=${MEASURE_DETACHED_ROOT:-/tmp/measure-detached}; current=$runs/current
case $mode in
  start)
    : "${MEASURE_CODE_REVISION:?set MEASURE_CODE_REVISION to the commit being run}"
    [ ! -e $current ] || [ -e $current/rc ] || { echo "a detached run is already going; use: $0 wait OUT"; exit 2; }
    for done_run in "$runs"/run-*; do  # finished runs: their last `wait` brought back what they made
      [ -e "$done_run/rc" ] && rm -rf "$done_run"
    done
    state=$runs/run-$(date +%Y%m%d-%H%M%S)-$$
    # The bundle's parts are already unpacked from /tmp/chunks: the run's copy of the tree leaves them out.
    mkdir -p $state/out $state/repo && tar cf - --exclude='./.gpu/part0*' . | tar xf - -C $state/repo
    ln -sfn "$state" $current
    (cd $state/repo && MEASURE_TIMEOUT_S=${MEASURE_TIMEOUT_S:-3600} setsid bash -c \
      'bash ${MEASURE_OFFLINE_RUN:-scripts/offline-gpu-run.sh} "$0" "$@"; echo $? > '$state'/rc' $state/out "$@" \
      > $state/log 2>&1 < /dev/null &)
    ;;
  wait|cache) [ -d $current ] || { echo "no detached run on this machine (a fresh one?): start again"; exit 2; } ;;
  *) echo "usage: offline-gpu-detached.sh start|wait|cache OUT [EXPERIMENT...]"; exit 2 ;;
esac
state=$(readlink -f $current)
if [ "$mode" = cache ]; then  # the compile-cache parts an earlier call left on the host (a call returns 64 MiB at most)
  [ -e $state/rc ] || { echo "the run is still going: call '$0 wait OUT' first"; exit 3; }
  used=0; n=0
  for part in $state/out/compile-cache.tgz.part-*; do
    [ -e "$part" ] && ! grep -qx "$(basename "$part")" $state/returned 2>/dev/null || continue
    size=$(du -sm "$part" | cut -f1)
    [ $((used + size)) -lt 60 ] && [ $n -lt 8 ] || { echo "[more parts left: call '$0 cache OUT' again]"; exit 3; }
    cp "$part" "$out/" && basename "$part" >> $state/returned; used=$((used + size)); n=$((n + 1))
  done
  echo "[every compile-cache part has come back]"; exit 0
fi
deadline=$(( $(date +%s) + ${WAIT_S:-560} ))
while [ ! -e $state/rc ] && [ "$(date +%s)" -lt $deadline ]; do sleep 5; done
{ grep -v '^\s*$' $state/log || true; } | tail -c 6000  # an empty log (a run that ended at once) is no error
(cd $state/repo && tar cf "$out/data.tar" data/gpu-* data/.staging .measure/logs 2>/dev/null) || true
[ -e $state/rc ] || { echo "[still running: call '$0 wait OUT' again]"; exit 3; }
cp $state/rc "$out/rc"
# Compile-cache parts come back while they fit beside data.tar in what a call returns (64 MiB, 8 files).
used=$(du -sm "$out" | cut -f1); n=2
for part in $state/out/compile-cache.tgz.part-*; do
  [ -e "$part" ] || break
  size=$(du -sm "$part" | cut -f1)
  [ $((used + size)) -lt 60 ] && [ $n -lt 8 ] || { echo "[compile cache: $(basename $part) and later parts left on the host: '$0 cache OUT' brings them]"; break; }
  cp "$part" "$out/" && basename "$part" >> $state/returned; used=$((used + size)); n=$((n + 1))
done
echo "[run ended with status $(cat $state/rc)]"
