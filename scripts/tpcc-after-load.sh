#!/bin/bash
# What the first TPC-C seconds after a bulk load pay for. A fresh Strata (port 4700, data in
# DATA), a timed 4-warehouse `go-tpc tpcc prepare`, then MODE, then one 8-thread run printing
# New-Order tpm per 10-s interval, the server's CPU seconds per 10 s, the change of the
# server's counters over the run (commit, lock-wait, fsync, TSO sums and counts) and the
# RocksDB compactions and flushes of the whole life of the server (from its LOG).
#
# MODE: plain (run right after the prepare, as scripts/bench-round.sh does) | idle (wait
# IDLE seconds first, printing the server CPU they took) | restart (stop and start the
# server first: cold caches, no pending work in memory).
#
# usage: tpcc-after-load.sh BIN LABEL MODE
# env: GOTPC [~/go-tpc/go-tpc]  T [30s]  IDLE [60]  THREADS [8]  DATA [/tmp/strata-after-load]
#      PERF [unset; N: perf record -g of the server for the run's first N seconds to
#      DATA.perf]
set -u
BIN=$(realpath "$1"); L=$2; MODE=$3
GOTPC=${GOTPC:-$HOME/go-tpc/go-tpc}; D=${DATA:-/tmp/strata-after-load}
stop() { pkill -f "server --port 4700 --status"; while pgrep -f "server --port 4700 --status" >/dev/null; do sleep 0.3; done; }
start() {
  "$BIN" server --port 4700 --status-port 10090 --data-dir "$D" >> "$D.log" 2>&1 &
  for _ in $(seq 120); do mysql -h127.0.0.1 -P4700 -uroot -e "select 1" >/dev/null 2>&1 && break; sleep 0.3; done
  SPID=$(pgrep -f "server --port 4700 --status" | head -1)
}
cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$SPID/stat"; }
files() { find "$D" -name '*.sst' | wc -l; }
stop; rm -rf "$D" "$D.log"; mkdir -p "$D"; start
mysql -h127.0.0.1 -P4700 -uroot -e "create database tpcc"
S=$(date +%s.%N)
"$GOTPC" tpcc prepare --warehouses 4 -H 127.0.0.1 -P 4700 -D tpcc -T 4 --no-check > /dev/null 2>&1
E=$(date +%s.%N)
echo "$L prepare $(echo "$E - $S" | bc) s, server cpu $(cpu) s, table files $(files)," \
  "$(curl -s http://127.0.0.1:10090/metrics | awk '/^strata_mvcc_ingested_(commits|keys)_total/ { sub(/strata_mvcc_ingested_/, "", $1); printf "%s %s ", $1, $2 }')"
case $MODE in
  idle) C0=$(cpu); sleep "${IDLE:-60}"; echo "$L idle ${IDLE:-60} s: server cpu $(echo "$(cpu) - $C0" | bc) s, table files $(files)" ;;
  restart) stop; start ;;
  plain) ;;
  *) echo "unknown mode $MODE"; stop; exit 1 ;;
esac
M0=$(mktemp); M1=$(mktemp); OUT=$(mktemp); CPUS=$(mktemp)
curl -s http://127.0.0.1:10090/metrics > "$M0"
( C=$(cpu); while sleep 10; do N=$(cpu); echo "$N - $C" | bc; C=$N; done ) > "$CPUS" &
SAMPLER=$!
[ -n "${PERF:-}" ] && (perf record -F 199 -g -p "$SPID" -o "$D.perf" -- sleep "$PERF" > /dev/null 2>&1 &)
C0=$(cpu)
"$GOTPC" tpcc run --warehouses 4 -H 127.0.0.1 -P 4700 -D tpcc -T "${THREADS:-8}" --time "${T:-30s}" --interval 10s > "$OUT" 2>&1
kill $SAMPLER
curl -s http://127.0.0.1:10090/metrics > "$M1"
echo "$L run: $(grep -E '^tpmC' "$OUT") | server cpu $(echo "$(cpu) - $C0" | bc) s"
echo "$L New-Order tpm per 10 s: $(grep -E '^\[Current\] NEW_ORDER' "$OUT" | sed -E 's/.*TPM: ([0-9.]+).*/\1/' | tr '\n' ' ')"
echo "$L server cpu s per 10 s: $(tr '\n' ' ' < "$CPUS")"
stop
python3 - "$M0" "$M1" "$D/kv/LOG" <<'PY'
import json, re, sys
def counters(path):
    out = {}
    for line in open(path):
        if line.startswith('#') or 'bucket' in line or not line.strip():
            continue
        name, value = line.rsplit(' ', 1)
        out[name] = float(value)
    return out
before, after = counters(sys.argv[1]), counters(sys.argv[2])
for name, value in after.items():
    if re.search(r'(lock_wait|commit|fsync|tso_wait).*_(sum|count)', name) and value != before.get(name, 0):
        print(f"  {name} {value - before.get(name, 0):.3f}")
jobs = {}
for line in open(sys.argv[3], errors='replace'):
    if 'EVENT_LOG_v1' not in line:
        continue
    e = json.loads(line[line.index('{'):])
    if e.get('event') == 'compaction_started':
        jobs[e['job']] = [line[11:23], e['cf_name'], e['compaction_reason'], e['input_data_size'], 0]
    elif e.get('event') == 'compaction_finished' and e['job'] in jobs:
        jobs[e['job']][4] = e['compaction_time_cpu_micros']
for t, cf, why, size, cpu in sorted(jobs.values()):
    print(f"  {t} compaction {cf} {why}: {size / 1e6:.1f} MB in, {cpu / 1e6:.2f} s cpu")
PY
rm -f "$M0" "$M1" "$OUT" "$CPUS"
