#!/usr/bin/env bash
# The read-heavy banking workload (bench/oltp-jdbc, Connector/J) in its five client
# configurations, against MariaDB and then Strata, one server loaded at a time, both with
# durable commits. Needs a JDK and Maven; MariaDB from Debian's packages.
# Usage: scripts/bench-oltp.sh STRATA_BIN [SECS=30] [THREADS=8] [SCENARIOS=1,2,3,4,5]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:?strata binary}; SECS=${2:-30}; THREADS=${3:-8}; SCEN=${4:-1,2,3,4,5}
PORT=4700; MPORT=3307
(cd bench/oltp-jdbc && mvn -q -B compile dependency:build-classpath -Dmdep.outputFile=cp.txt >/dev/null)
CP="bench/oltp-jdbc/target/classes:$(cat bench/oltp-jdbc/cp.txt)"
run() { java -cp "$CP" strata.bench.BankBench --threads "$THREADS" --secs "$SECS" --scenarios "$SCEN" "$@"; }

# MariaDB first (started if it is not running), then stopped so Strata has the machine.
MDATA=${MDATA:-/tmp/strata-peer-mariadb}
bash ../shared/tools/start-mariadb.sh "$MPORT" "$MDATA"
run --server mariadb --url "jdbc:mysql://127.0.0.1:$MPORT"
kill "$(cat "$MDATA/mariadbd.pid")"; while pgrep -x mariadbd >/dev/null; do sleep 0.5; done

# Strata on a fresh data directory.
DATA=${DATA:-/tmp/strata-bench-oltp}; rm -rf "$DATA"; mkdir -p "$DATA"
"$BIN" server --port "$PORT" --status-port 0 --data-dir "$DATA" > "$DATA.log" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null || true' EXIT
for _ in $(seq 60); do grep -q "listening on" "$DATA.log" 2>/dev/null && break; sleep 0.5; done
STATUS=$(grep -o 'status on http://[0-9.:]*' "$DATA.log" | sed 's/status on //')
run --server strata --url "jdbc:mysql://127.0.0.1:$PORT" --metrics "$STATUS/metrics"
