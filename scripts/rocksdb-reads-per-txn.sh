#!/bin/bash
# RocksDB point gets and iterator seeks per committed TPC-C transaction, for each binary given:
# a 45 s go-tpc run (8 threads) from a prepared snapshot, with uprobes on DBImpl::GetImpl and
# rocksdb_iter_seek counted over 15 s in its middle, and commits read from /metrics. Commands
# of 64 keys or more read with one MultiGet, which these probes do not count.
# usage: SNAPSHOT=/tmp/tpcc-snap scripts/rocksdb-reads-per-txn.sh BIN [BIN...]   (needs root and perf)
set -u
cd "$(dirname "$0")/.."
: "${SNAPSHOT:?set SNAPSHOT to a prepared Strata TPC-C data dir (scripts/tpcc-gotpc.sh makes one)}"
commits() { curl -s http://127.0.0.1:10090/metrics | awk '/^strata_txn_commit_duration_seconds_count/ {print $2}'; }
for BIN in "$@"; do
  perf probe -d 'probe_strata*' >/dev/null 2>&1
  perf probe -x "$BIN" -a 'get=_ZN7rocksdb6DBImpl7GetImplERKNS_11ReadOptionsERKNS_5SliceERNS0_14GetImplOptionsE' >/dev/null
  perf probe -x "$BIN" -a 'seek=rocksdb_iter_seek' >/dev/null
  OUT=$(mktemp)
  SNAPSHOT="$SNAPSHOT" THREADS=8 TIME=45s bash scripts/tpcc-gotpc.sh strata "$BIN" reads > "$OUT" 2>&1 &
  sleep 20
  SPID=$(pgrep -f "server --port 4700 --status" | head -1)
  C0=$(commits)
  perf stat -e 'probe_strata:get,probe_strata:seek' -p "$SPID" -- sleep 15 2> "$OUT.stat"
  C1=$(commits)
  G=$(awk '/probe_strata:get/ {gsub(",","",$1); print $1}' "$OUT.stat")
  S=$(awk '/probe_strata:seek/ {gsub(",","",$1); print $1}' "$OUT.stat")
  N=$(echo "$C1 - $C0" | bc)
  echo "$BIN: commits $N, gets/commit $(echo "scale=1; $G / $N" | bc), seeks/commit $(echo "scale=2; $S / $N" | bc)"
  wait
  rm -f "$OUT" "$OUT.stat"
done
perf probe -d 'probe_strata*' >/dev/null 2>&1
