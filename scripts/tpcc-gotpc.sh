#!/bin/bash
# go-tpc TPC-C on one server: a fresh database, `go-tpc tpcc prepare` (timed), then one run per
# thread count, each printing tpmC (go-tpc's summary line) and the client's CPU seconds.
# Strata is started here on port 4700 with a fresh data dir and stopped after; MariaDB must be
# running on 127.0.0.1:3307 (shared/tools/start-mariadb.sh). Durable commits on both.
#
# usage: tpcc-gotpc.sh strata BIN LABEL | tpcc-gotpc.sh mariadb - LABEL
# env: GOTPC [~/go-tpc/go-tpc]  WAREHOUSES [4]  THREADS ["8 32"]  TIME [60s]  RI [0: no
#      per-interval lines; N: New-Order every N s]  DATA [/tmp/strata-tpcc]
#      MARIADB_PID [/tmp/strata-peer-mariadb/mariadbd.pid: its server CPU is reported]
#      METRICS [unset; a file: Strata's /metrics after the runs go there, and after the
#      prepare to FILE.prepared]  SNAPSHOT [unset; Strata only: a directory the prepared
#      data dir is copied to, or, when it exists, copied from instead of preparing, so
#      A/B runs of two builds start from the same data]  PRESQL [unset; SQL run on the
#      server before the prepare and before the runs, e.g. SET GLOBAL for an A/B of a switch]
#      SERVER_ARGS [unset; more arguments for Strata's server, e.g. --worker-affinity off]
#      NOPREP [unset; MariaDB only: set, the runs use the tpcc database already there]
#      OUTDIR [unset; a directory go-tpc's whole output of each run is kept in, as
#      LABEL.Nt.txt: its per-transaction-type latencies]  KEEP [unset; set: Strata's data
#      dir is left after the runs instead of removed]
set -u
KIND=$1; BIN=$2; LABEL=$3
GOTPC=${GOTPC:-$HOME/go-tpc/go-tpc}; W=${WAREHOUSES:-4}; THREADS=${THREADS:-"8 32"}; T=${TIME:-60s}
stop_strata() { pkill -f "server --port 4700 --status"; while pgrep -f "server --port 4700 --status" >/dev/null; do sleep 0.5; done; }
start_strata() {
  # shellcheck disable=SC2086 # SERVER_ARGS: words
  "$BIN" server --port $PORT --status-port 10090 --data-dir "$DATA" ${SERVER_ARGS:-} >> "$DATA.$LABEL.log" 2>&1 &
  for _ in $(seq 120); do mysql -h127.0.0.1 -P$PORT -uroot -e "select 1" >/dev/null 2>&1 && break; sleep 0.5; done
  if [ -n "${PRESQL:-}" ]; then mysql -h127.0.0.1 -P$PORT -uroot -e "$PRESQL"; fi
}
SNAP=""
# SPID: the server's process id.
server_pid() {
  if [ "$KIND" = strata ]; then SPID=$(pgrep -f "server --port 4700 --status" | head -1)
  else SPID=$(cat "${MARIADB_PID:-/tmp/strata-peer-mariadb/mariadbd.pid}" 2>/dev/null); fi
}
# The whole box between two /proc/stat first lines: user, system, idle and I/O wait shares.
box_shares() {
  printf '%s\n%s\n' "$1" "$2" | awk '{ for (i = 2; i <= 9; i++) v[NR, i] = $i }
    END { for (i = 2; i <= 9; i++) { d[i] = v[2, i] - v[1, i]; t += d[i] }
          printf "user %.0f%% sys %.0f%% idle %.0f%% iowait %.0f%%", 100 * (d[2] + d[3]) / t,
            100 * (d[4] + d[7] + d[8]) / t, 100 * d[5] / t, 100 * d[6] / t }'
}
# CPU seconds (user + system) the server process $SPID has used, or 0.
server_cpu() {
  if [ -n "${SPID:-}" ] && [ -r /proc/$SPID/stat ]; then
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$SPID/stat"
  else echo 0; fi
}
if [ "$KIND" = strata ]; then
  PORT=4700
  stop_strata
  DATA=${DATA:-/tmp/strata-tpcc}; rm -rf "$DATA"
  SNAP=${SNAPSHOT:-}
  # The copies are synced before a run: the kernel writes dirty pages back 30 s after they
  # were made, and 700 MB of them stalled the run's WAL fsyncs for 100-250 ms (session 75).
  if [ -n "$SNAP" ] && [ -d "$SNAP" ]; then cp -a "$SNAP" "$DATA"; sync; else mkdir -p "$DATA"; fi
  start_strata
else
  PORT=3307
fi
if [ -n "$SNAP" ] && [ -d "$SNAP" ]; then
  echo "$LABEL data from $SNAP"
elif [ "$KIND" = mariadb ] && [ -n "${NOPREP:-}" ]; then
  echo "$LABEL runs on the tpcc database already loaded"
else
  mysql -h127.0.0.1 -P$PORT -uroot -e "drop database if exists tpcc; create database tpcc"
  server_pid; CPU0=$(server_cpu); STAT0=$(head -1 /proc/stat)
  S=$(date +%s.%N)
  /usr/bin/time -f "%U %S" -o /tmp/tpcc-prepare.$$.cpu \
    "$GOTPC" tpcc prepare --warehouses "$W" -H 127.0.0.1 -P $PORT -D tpcc -T 4 --no-check >/dev/null 2>&1
  E=$(date +%s.%N)
  echo "$LABEL prepare ${W}wh $(echo "$E - $S" | bc) s | client cpu s: $(cat /tmp/tpcc-prepare.$$.cpu)" \
    "| server cpu s: $(echo "$(server_cpu) - $CPU0" | bc) | box: $(box_shares "$STAT0" "$(head -1 /proc/stat)")"
  rm -f /tmp/tpcc-prepare.$$.cpu
  if [ -n "$SNAP" ]; then stop_strata; cp -a "$DATA" "$SNAP"; sync; start_strata; fi
fi
[ "$KIND" = strata ] && [ -n "${METRICS:-}" ] && curl -s http://127.0.0.1:10090/metrics > "$METRICS.prepared"
for th in $THREADS; do
  OUT=$(mktemp)
  server_pid
  CPU0=$(server_cpu)
  STAT0=$(head -1 /proc/stat)
  DIRTY0=$(awk '/^Dirty:/ { print $2 }' /proc/meminfo)
  /usr/bin/time -f "%U %S" -o "$OUT.cpu" "$GOTPC" tpcc run --warehouses "$W" -H 127.0.0.1 -P $PORT -D tpcc \
    -T "$th" --time "$T" --interval "${RI:-10}s" > "$OUT" 2>&1
  [ "${RI:-0}" != 0 ] && grep -E '^\[Current\] NEW_ORDER' "$OUT" | sed "s/^/$LABEL ${th}t /"
  TPMC=$(grep -E '^tpmC:' "$OUT" | tail -1)
  CPU1=$(server_cpu)
  STAT1=$(head -1 /proc/stat)
  # Server CPU per transaction: steadier than tpmC on a shared box.
  PERTX=""
  if [ -n "$SPID" ]; then
    TOTAL=$(echo "$TPMC" | sed -E 's/.*tpmTotal: ([0-9.]+).*/\1/')
    MIN=$(echo "${T%s} / 60" | bc -l)
    PERTX=" | server cpu s: $(echo "$CPU1 - $CPU0" | bc), µs/txn: $(echo "($CPU1 - $CPU0) * 1000000 / ($TOTAL * $MIN)" | bc)"
  fi
  # The whole box over the run, from /proc/stat: user, system, idle and I/O wait shares.
  BOX=$(box_shares "$STAT0" "$STAT1")
  echo "$LABEL ${th} threads: dirty page cache at the start ${DIRTY0} kB"
  echo "$LABEL ${th} threads: $TPMC | client cpu s: $(cat "$OUT.cpu")$PERTX | box: $BOX"
  [ -n "${OUTDIR:-}" ] && cp "$OUT" "$OUTDIR/$LABEL.${th}t.txt"
  rm -f "$OUT" "$OUT.cpu"
done
if [ "$KIND" = strata ]; then
  [ -n "${METRICS:-}" ] && curl -s http://127.0.0.1:10090/metrics > "$METRICS"
  stop_strata
  # Removed now, not before the next prepare: ext4 without a journal (this box's) skips
  # inodes freed in the last 60-360 s when it makes a file, one buffer lookup each, and a
  # load right after removing 1,700 table files spent 6% of the box in that scan (session 79).
  [ -z "${KEEP:-}" ] && rm -rf "$DATA"
fi
exit 0
