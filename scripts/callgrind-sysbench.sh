#!/bin/bash
# Instructions per query of Strata for single sysbench oltp_read_write statement classes,
# counted by callgrind (repeatable to <1%, unlike timings on a shared box).
#   scripts/callgrind-sysbench.sh BIN [CLASSES=point-selects,simple-ranges,sum-ranges] [N=1000]
# The first run prepares 4x100k sbtest rows with BIN into $SNAP (default
# /tmp/strata-cg-snap) and keeps them; every run starts BIN under valgrind on a copy, runs
# each class N times unmeasured (caches warm, same --rand-seed), then N times measured.
# Needs valgrind and sysbench (apt-get install -y valgrind sysbench).
set -u
BIN=$1; CLASSES=${2:-point-selects,simple-ranges,sum-ranges}; N=${3:-1000}
SNAP=${SNAP:-/tmp/strata-cg-snap}; PORT=${PORT:-4611}; WORK=${SNAP}.run
. "$(dirname "$0")/callgrind-common.sh"
snapshot
rm -rf "$WORK"; cp -a "$SNAP" "$WORK"
OUT=$(mktemp -d)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$OUT/cg.%p \
  $BIN server --port $PORT --status-port 0 --data-dir "$WORK" > "$WORK.log" 2>&1 &
VP=$!; wait_up
Z="--point-selects=0 --simple-ranges=0 --sum-ranges=0 --order-ranges=0 --distinct-ranges=0 --index-updates=0 --non-index-updates=0 --delete-inserts=0"
for c in ${CLASSES//,/ }; do
  run() { sysbench oltp_read_write $SB --rand-seed=7 --threads=1 --events=$N --time=0 $Z --$c=1 --skip-trx=on run >/dev/null; }
  run
  K=$(ls $OUT/cg.$VP.* 2>/dev/null | wc -l)
  callgrind_control -z $VP >/dev/null; callgrind_control -i on $VP >/dev/null
  run
  callgrind_control -i off $VP >/dev/null; callgrind_control -d $c $VP >/dev/null
  F=$OUT/cg.$VP.$((K + 1))
  for _ in $(seq 200); do [ -f $F ] && grep -q "^totals:" $F && break; sleep 0.5; done
  IR=$(awk '/^totals:/ {print $2}' $F)
  echo "$(basename $BIN) $c instructions/query=$((IR / N)) profile=$F"
done
kill $VP; wait $VP 2>/dev/null
