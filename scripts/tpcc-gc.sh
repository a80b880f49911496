#!/bin/bash
# A long go-tpc TPC-C run on Strata that shows what GC costs: per-minute New-Order TPM and
# server CPU seconds, CPU per thread name at the end (compaction: rocksdb:low), and the GC
# lines of the server's log (every walk: records walked, removed, time; versions removed).
# Strata is started on port 4700 on a copy of SNAPSHOT (a prepared data dir, as made by
# `SNAPSHOT=DIR scripts/tpcc-gotpc.sh strata BIN L`) with a short GC life time, so the run
# is past it early.
#
# usage: tpcc-gc.sh BIN LABEL [MINUTES=6] [GC_LIFE_S=60]
# env: GOTPC [~/go-tpc/go-tpc]  SNAPSHOT [/tmp/tpcc-snap]  WAREHOUSES [4]  THREADS [8]
#      DATA [/tmp/strata-tpcc]
set -u
BIN=$1; L=$2; M=${3:-6}; LIFE=${4:-60}
GOTPC=${GOTPC:-$HOME/go-tpc/go-tpc}; SNAP=${SNAPSHOT:-/tmp/tpcc-snap}; DATA=${DATA:-/tmp/strata-tpcc}
W=${WAREHOUSES:-4}; TH=${THREADS:-8}
[ -d "$SNAP" ] || { echo "no prepared snapshot at $SNAP" >&2; exit 1; }
stop_strata() { pkill -f "server --port 4700 --status"; while pgrep -f "server --port 4700 --status" >/dev/null; do sleep 0.5; done; }
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat"; }
stop_strata
rm -rf "$DATA"; cp -a "$SNAP" "$DATA"
RUST_LOG=info,strata_mvcc::gc=debug "$BIN" server --port 4700 --status-port 10090 --data-dir "$DATA" \
  --gc-life-time "$LIFE" > "$DATA.$L.log" 2>&1 &
for _ in $(seq 120); do mysql -h127.0.0.1 -P4700 -uroot -e "select 1" >/dev/null 2>&1 && break; sleep 0.5; done
SPID=$(pgrep -f "server --port 4700 --status" | head -1)
"$GOTPC" tpcc run --warehouses "$W" -H 127.0.0.1 -P 4700 -D tpcc -T "$TH" --time "${M}m" --interval 60s > "$DATA.$L.out" 2>&1 &
G=$!
CPUS=""
for _ in $(seq "$M"); do
  c0=$(cpu "$SPID"); sleep 60; c1=$(cpu "$SPID")
  CPUS="$CPUS $(echo "$c1 - $c0" | bc)"
done
wait $G
echo "== $L"
echo "New-Order per minute: $(grep 'NEW_ORDER ' "$DATA.$L.out" | grep Current | awk '{for(i=1;i<=NF;i++) if($i=="TPM:") print $(i+1)}' | tr -d , | paste -sd' ')"
echo "server CPU s per minute:$CPUS"
echo "CPU by thread: $(for t in /proc/$SPID/task/*; do echo "$(tr ' ' _ < $t/comm) $(awk '{print $14+$15}' $t/stat)"; done \
  | awk -v hz="$(getconf CLK_TCK)" '{a[$1]+=$2} END {for (k in a) printf "%s=%.1fs ", k, a[k]/hz}')"
grep tpmC "$DATA.$L.out" | tail -1
grep -E "gc pass|gc removed" "$DATA.$L.log" | sed 's/\x1b\[[0-9;]*m//g; s/^.*strata_/strata_/'
echo "disk: $(du -sh "$DATA/kv" | cut -f1)"
stop_strata
