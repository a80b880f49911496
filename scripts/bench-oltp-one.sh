#!/usr/bin/env bash
# One scenario of the banking workload (bench/oltp-jdbc) on a fresh Strata, then the
# statements summary of the run: per statement digest its executions, average server
# latency, parse and compile time (µs) and plan-cache hits. Needs a JDK and Maven.
# Usage: scripts/bench-oltp-one.sh STRATA_BIN SCENARIO [SECS=10] [THREADS=8]
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:?strata binary}; SCEN=${2:?scenario 1-5}; SECS=${3:-10}; THREADS=${4:-8}
PORT=${PORT:-4700}
(cd bench/oltp-jdbc && mvn -q -B compile dependency:build-classpath -Dmdep.outputFile=cp.txt >/dev/null)
CP="bench/oltp-jdbc/target/classes:$(cat bench/oltp-jdbc/cp.txt)"
DATA=${DATA:-/tmp/strata-bench-oltp-one}; rm -rf "$DATA"; mkdir -p "$DATA"
"$BIN" server --port "$PORT" --status-port 0 --data-dir "$DATA" > "$DATA.log" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null || true' EXIT
for _ in $(seq 120); do mysql -h127.0.0.1 -P"$PORT" -uroot -e "select 1" >/dev/null 2>&1 && break; sleep 0.5; done
java -cp "$CP" strata.bench.BankBench --threads "$THREADS" --secs "$SECS" --scenarios "$SCEN" --server strata \
  --url "jdbc:mysql://127.0.0.1:$PORT"
mysql -h127.0.0.1 -P"$PORT" -uroot -e "SELECT exec_count, avg_latency DIV 1000 AS avg_us,
  avg_parse_latency DIV 1000 AS parse_us, avg_compile_latency DIV 1000 AS compile_us, plan_cache_hits,
  LEFT(digest_text, 70) AS statement FROM information_schema.statements_summary ORDER BY exec_count DESC LIMIT 12"
