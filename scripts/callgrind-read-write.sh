#!/bin/bash
# Instructions per sysbench oltp_read_write transaction of the whole Strata server in a
# steady state, counted by callgrind (repeatable, unlike timings on a shared box).
#   scripts/callgrind-read-write.sh BIN [WARM=3000] [N=400]
# Prepares 4x100k sbtest rows into $SNAP (default /tmp/strata-cg-snap, shared with
# callgrind-sysbench.sh) the first time; then starts BIN under valgrind on a copy, runs WARM
# transactions unmeasured (4 threads: hot rows collect versions, tables become resident),
# waits for the resident tables to settle (/metrics), and counts N transactions. Automatic
# ANALYZE is off: under callgrind it would take most of the window.
# Needs valgrind, sysbench and curl.
set -u
BIN=$1; WARM=${2:-3000}; N=${3:-400}
SNAP=${SNAP:-/tmp/strata-cg-snap}; PORT=${PORT:-4611}; STATUS=$((PORT + 1)); WORK=${SNAP}.rw
. "$(dirname "$0")/callgrind-common.sh"
settled() {
  local prev=x cur
  for _ in $(seq 120); do
    cur=$(curl -s http://127.0.0.1:$STATUS/metrics | grep -E "^strata_storage_resident_(bytes|tables) " | tr '\n' ' ')
    [ "$cur" = "$prev" ] && { echo "resident: $cur"; return; }
    prev=$cur; sleep 5
  done
}
snapshot
rm -rf "$WORK"; cp -a "$SNAP" "$WORK"
OUT=$(mktemp -d)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$OUT/cg.%p \
  $BIN server --port $PORT --status-port $STATUS --data-dir "$WORK" > "$WORK.log" 2>&1 &
VP=$!; wait_up
mysql -h127.0.0.1 -P$PORT -uroot -e "set global tidb_enable_auto_analyze=0"
sysbench oltp_read_write $SB --rand-seed=7 --threads=4 --events=$WARM --time=0 run >/dev/null
settled
callgrind_control -z $VP >/dev/null; callgrind_control -i on $VP >/dev/null
sysbench oltp_read_write $SB --rand-seed=8 --threads=4 --events=$N --time=0 run > $OUT/sb.out
callgrind_control -i off $VP >/dev/null; callgrind_control -d rw $VP >/dev/null
sleep 2; F=$(ls -t $OUT/cg.$VP* | head -1)
for _ in $(seq 200); do grep -q "^totals:" $F && break; sleep 0.5; done
IR=$(awk '/^totals:/ {print $2}' $F)
echo "$(basename $BIN) read_write warm=$WARM instructions/txn=$((IR / N)) profile=$F"
kill $VP; wait $VP 2>/dev/null
