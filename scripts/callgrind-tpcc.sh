#!/bin/bash
# Instructions per go-tpc TPC-C transaction of the whole Strata server, counted by callgrind.
#   scripts/callgrind-tpcc.sh BIN [SECONDS=60] [THREADS=4]
# The first run prepares 4 warehouses with BIN (not under valgrind) into $SNAP (default
# /tmp/strata-cg-tpcc) and keeps them; every run starts BIN under valgrind on a copy, warms
# up for 20 s unmeasured, then counts SECONDS of go-tpc tpcc run. Transactions are go-tpc's
# tpmTotal over the window. Automatic ANALYZE is off (under callgrind it took a fifth of the
# first minute's instructions). Two builds can run at once on different PORTs.
# Needs valgrind, go-tpc ($GOTPC) and the mysql client.
set -u
BIN=$1; SECS=${2:-60}; TH=${3:-4}
GOTPC=${GOTPC:-/tmp/tools/go-tpc}
SNAP=${SNAP:-/tmp/strata-cg-tpcc}; PORT=${PORT:-4631}; WORK=${WORK:-$SNAP.$PORT}
wait_up() { for _ in $(seq 600); do mysql -h127.0.0.1 -P$PORT -uroot -e "select 1" >/dev/null 2>&1 && return; sleep 0.5; done; echo "server did not start" >&2; exit 1; }
TPC="-H 127.0.0.1 -P $PORT -D tpcc --warehouses 4"
if [ ! -d "$SNAP" ]; then
  mkdir -p "$SNAP"
  $BIN server --port $PORT --status-port 0 --data-dir "$SNAP" > "$SNAP.log" 2>&1 &
  sp=$!; wait_up
  mysql -h127.0.0.1 -P$PORT -uroot -e "create database tpcc"
  "$GOTPC" tpcc prepare $TPC -T 4 --no-check >/dev/null 2>&1
  mysql -h127.0.0.1 -P$PORT -uroot -e "set global tidb_enable_auto_analyze=0"
  kill $sp; wait $sp
fi
rm -rf "$WORK"; cp -a "$SNAP" "$WORK"
OUT=$(mktemp -d)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$OUT/cg.%p \
  $BIN server --port $PORT --status-port 0 --data-dir "$WORK" > "$WORK.log" 2>&1 &
VP=$!; wait_up
mysql -h127.0.0.1 -P$PORT -uroot -e "set global tidb_enable_auto_analyze=0"
"$GOTPC" tpcc run $TPC -T "$TH" --time 20s >/dev/null 2>&1
callgrind_control -z $VP >/dev/null; callgrind_control -i on $VP >/dev/null
"$GOTPC" tpcc run $TPC -T "$TH" --time "${SECS}s" > $OUT/run.out 2>&1
callgrind_control -i off $VP >/dev/null; callgrind_control -d tpcc $VP >/dev/null
F=$OUT/cg.$VP.1
for _ in $(seq 400); do [ -f $F ] && grep -q "^totals:" $F && break; sleep 0.5; done
IR=$(awk '/^totals:/ {print $2}' $F)
TOTAL=$(grep -E '^tpmC:' $OUT/run.out | tail -1 | sed -E 's/.*tpmTotal: ([0-9.]+).*/\1/')
TXNS=$(echo "$TOTAL * $SECS / 60" | bc -l)
echo "$(basename $BIN) tpcc ${TH}t ${SECS}s txns=$(printf %.0f $TXNS) instructions/txn=$(echo "$IR / $TXNS" | bc) profile=$F"
grep -E '_ERR|^tpmC' $OUT/run.out
kill $VP; wait $VP 2>/dev/null
