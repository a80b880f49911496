#!/usr/bin/env bash
# Runs the same benchmarks on Strata and on MariaDB (Debian's package) in one go. Both servers
# are started here on 127.0.0.1 with durable commits, and the same `strata bench` driver runs
# the same workload against each. Writes the JSON results, a chart, and the ratios.
# BENCHMARKS.md figures are made with this script.
#
# Usage: scripts/bench-compare.sh [tpcc|tpch|all]      (default: all)
#
# Settings, from the environment (defaults in brackets):
#   TPC-C:  WAREHOUSES [4]  THREADS [8]  TIME [60s]  WARMUP [10s]
#   TPC-H:  SF [0.1]  REPEAT [3]  QUERIES [1-22]  TPCH_TIMEOUT [5m]
#           REPLICAS [1]     columnar replicas per table on Strata (0: none)
#           ROW_ENGINE [1]   1 also runs the queries on Strata with the row engine only
#           ROW_MEM_QUOTA [8589934592]  tidb_mem_quota_query (bytes) for that run: the row
#                            executor holds hash tables and sorts in memory (no spilling)
#           DUCKDB [1]       1 also times DuckDB (pip's duckdb) on the same data and texts
#   LOAD_THREADS [4]     connections that load data
#   OUT [bench-results/<UTC time>]   where results go
#   STRATA [target/release/strata, built here]   the Strata binary, also the driver
#   MARIADB_BP [2G]      InnoDB buffer pool size
#   KEEP_DATA [0]        1 keeps both data directories
#
# Durability: MariaDB runs with innodb_flush_log_at_trx_commit=1 (fsync per commit, no binary
# log); Strata syncs its WAL on every commit. Installing MariaDB (if mariadbd is missing) needs
# root. The servers stop when the script ends, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."

WHAT=${1:-all}
case "$WHAT" in tpcc | tpch | all) ;; *)
  echo "usage: $0 [tpcc|tpch|all]" >&2
  exit 2
  ;;
esac
WAREHOUSES=${WAREHOUSES:-4}
THREADS=${THREADS:-8}
TIME=${TIME:-60s}
WARMUP=${WARMUP:-10s}
SF=${SF:-0.1}
REPEAT=${REPEAT:-3}
QUERIES=${QUERIES:-1-22}
TPCH_TIMEOUT=${TPCH_TIMEOUT:-5m}
REPLICAS=${REPLICAS:-1}
ROW_ENGINE=${ROW_ENGINE:-1}
ROW_MEM_QUOTA=${ROW_MEM_QUOTA:-8589934592}
DUCKDB=${DUCKDB:-1}
LOAD_THREADS=${LOAD_THREADS:-4}
MARIADB_BP=${MARIADB_BP:-2G}
KEEP_DATA=${KEEP_DATA:-0}
OUT=${OUT:-bench-results/$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

if [ -z "${STRATA:-}" ]; then
  cargo build --release -p strata
  STRATA=$(cargo metadata --format-version 1 --no-deps | python3 -c 'import json,sys; print(json.load(sys.stdin)["target_directory"])')/release/strata
fi
[ -x "$STRATA" ] || { echo "no strata binary at $STRATA" >&2; exit 1; }

if ! command -v mariadbd >/dev/null; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "mariadbd is missing; install mariadb-server (needs root)" >&2
    exit 1
  fi
  apt-get update
  DEBIAN_FRONTEND=noninteractive apt-get install -y mariadb-server mariadb-client
fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

wait_port() { # port seconds
  for _ in $(seq 1 "$2"); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; then return 0; fi
    sleep 1
  done
  return 1
}

PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do
    for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  done
  if [ "$KEEP_DATA" != 1 ]; then rm -rf "$OUT/strata-data" "$OUT/mariadb-data"; fi
}
trap cleanup EXIT

# --- MariaDB -----------------------------------------------------------------------------
MARIADB_PORT=$(free_port)
MDATA=$OUT/mariadb-data
rm -rf "$MDATA"
mkdir -p "$MDATA"
as_user=()
if [ "$(id -u)" -eq 0 ]; then
  chown -R mysql:mysql "$MDATA"
  as_user=(--user=mysql)
fi
mariadb-install-db "${as_user[@]}" --datadir="$MDATA" --auth-root-authentication-method=normal \
  --skip-test-db >"$OUT/mariadb-install.log" 2>&1
mariadbd --no-defaults "${as_user[@]}" --datadir="$MDATA" --bind-address=127.0.0.1 \
  --port="$MARIADB_PORT" --socket="$MDATA/mariadbd.sock" --pid-file="$MDATA/mariadbd.pid" \
  --log-error="$OUT/mariadb.err" --innodb-buffer-pool-size="$MARIADB_BP" \
  --innodb-log-file-size=1G --innodb-flush-log-at-trx-commit=1 --max-connections=2000 \
  --max-prepared-stmt-count=1000000 --max-allowed-packet=64M \
  --character-set-server=utf8mb4 --collation-server=utf8mb4_general_ci --skip-name-resolve \
  >>"$OUT/mariadb.err" 2>&1 &
PIDS+=($!)
wait_port "$MARIADB_PORT" 120 || { echo "MariaDB did not start; see $OUT/mariadb.err" >&2; exit 1; }
for _ in $(seq 1 30); do
  mariadb --socket="$MDATA/mariadbd.sock" -uroot -e \
    "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;" \
    && break
  sleep 1
done
MARIADB_LABEL="MariaDB $(mariadbd --version | grep -o '[0-9]*\.[0-9]*\.[0-9]*-MariaDB' | head -1 | sed 's/-MariaDB//')"

# --- Strata ------------------------------------------------------------------------------
STRATA_PORT=$(free_port)
"$STRATA" server --host 127.0.0.1 --port "$STRATA_PORT" --status-port "$(free_port)" \
  --data-dir "$OUT/strata-data" >"$OUT/strata.log" 2>&1 &
PIDS+=($!)
wait_port "$STRATA_PORT" 120 || { echo "Strata did not start; see $OUT/strata.log" >&2; exit 1; }
STRATA_LABEL="Strata $("$STRATA" --version | awk '{print $2}')@$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"

# Systems in report order: the peer first, so ratios read "Strata vs MariaDB".
SYSTEMS=(mariadb strata)
declare -A PORT=([mariadb]=$MARIADB_PORT [strata]=$STRATA_PORT)
declare -A LABEL=([mariadb]=$MARIADB_LABEL [strata]=$STRATA_LABEL)
declare -A LOAD_S CHECK

bench() { # system args...
  local sys=$1
  shift
  "$STRATA" bench "$@" --host 127.0.0.1 --port "${PORT[$sys]}" --user root
}

timed() { # key command...: runs it, records seconds in LOAD_S[key]
  local key=$1 start
  shift
  start=$(date +%s.%N)
  "$@"
  LOAD_S[$key]=$(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')")
}

# Output goes to the terminal and to a log per step.
step() { # log-name command...
  local log=$OUT/$1.log
  shift
  "$@" > >(tee "$log") 2>&1
}

JSONS=()
STATUS=0
if [ "$WHAT" != tpch ]; then
  for sys in "${SYSTEMS[@]}"; do
    echo "== TPC-C on ${LABEL[$sys]}: prepare $WAREHOUSES warehouses"
    timed "$sys-tpcc" step "$sys-tpcc-prepare" bench "$sys" tpcc prepare \
      --warehouses "$WAREHOUSES" --threads "$LOAD_THREADS"
  done
  for sys in "${SYSTEMS[@]}"; do
    echo "== TPC-C on ${LABEL[$sys]}: run $THREADS threads, $TIME after $WARMUP warmup"
    step "$sys-tpcc-run" bench "$sys" tpcc run --warehouses "$WAREHOUSES" --threads "$THREADS" \
      --time "$TIME" --warmup "$WARMUP" --label "${LABEL[$sys]}" --json "$OUT/$sys-tpcc.json"
    JSONS+=("$OUT/$sys-tpcc.json")
  done
  for sys in "${SYSTEMS[@]}"; do
    echo "== TPC-C on ${LABEL[$sys]}: consistency check"
    if step "$sys-tpcc-check" bench "$sys" tpcc check; then CHECK[$sys-tpcc]=pass; else
      CHECK[$sys-tpcc]=FAIL
      STATUS=1
    fi
  done
fi
if [ "$WHAT" != tpcc ]; then
  for sys in "${SYSTEMS[@]}"; do
    echo "== TPC-H on ${LABEL[$sys]}: prepare SF $SF"
    replicas=()
    if [ "$sys" = strata ] && [ "$REPLICAS" != 0 ]; then replicas=(--tiflash-replica "$REPLICAS"); fi
    timed "$sys-tpch" step "$sys-tpch-prepare" bench "$sys" tpch prepare --sf "$SF" --threads "$LOAD_THREADS" \
      "${replicas[@]}"
  done
  for sys in "${SYSTEMS[@]}"; do
    echo "== TPC-H on ${LABEL[$sys]}: queries $QUERIES, $REPEAT runs each, checked"
    if step "$sys-tpch-run" bench "$sys" tpch check --queries "$QUERIES" --repeat "$REPEAT" \
      --timeout "$TPCH_TIMEOUT" --label "${LABEL[$sys]}" --json "$OUT/$sys-tpch.json"; then
      CHECK[$sys-tpch]=pass
    else
      CHECK[$sys-tpch]=FAIL
      STATUS=1
    fi
    [ -f "$OUT/$sys-tpch.json" ] && JSONS+=("$OUT/$sys-tpch.json")
  done
  if [ "$ROW_ENGINE" = 1 ]; then
    echo "== TPC-H on ${LABEL[strata]}, row engine only: queries $QUERIES, $REPEAT runs each, checked"
    if step strata-row-tpch-run bench strata tpch check --queries "$QUERIES" --repeat "$REPEAT" \
      --timeout "$TPCH_TIMEOUT" --label "${LABEL[strata]} row engine" --json "$OUT/strata-row-tpch.json" \
      --init-sql "SET SESSION tidb_isolation_read_engines = 'tikv'" \
      --init-sql "SET SESSION tidb_mem_quota_query = $ROW_MEM_QUOTA"; then
      CHECK[strata-row-tpch]=pass
    else
      CHECK[strata-row-tpch]=FAIL
      STATUS=1
    fi
    [ -f "$OUT/strata-row-tpch.json" ] && JSONS+=("$OUT/strata-row-tpch.json")
  fi
  if [ "$DUCKDB" = 1 ]; then
    python3 -c 'import duckdb' 2>/dev/null || python3 -m pip install --quiet duckdb
    echo "== TPC-H on DuckDB (pip), in process: $REPEAT runs each, checked"
    step duckdb-tpch-run env STRATA="$STRATA" python3 scripts/tpch-duckdb.py "$SF" "$OUT/duckdb-tpch.json" "$REPEAT"
    JSONS+=("$OUT/duckdb-tpch.json")
  fi
fi

MACHINE="$(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), $(free -g | awk '/^Mem:/{print $2}') GiB"
"$STRATA" bench report "${JSONS[@]}" --out "$OUT/report.svg" --markdown "$OUT/ratios.md" \
  --title "${LABEL[strata]} vs ${LABEL[mariadb]}, $(date -u +%Y-%m-%d), $(nproc) CPUs" >/dev/null

{
  echo "# strata bench compare, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- Machine: $MACHINE, $(uname -sr)"
  echo "- Command: \`$( [ "$WHAT" != tpch ] && printf 'WAREHOUSES=%s THREADS=%s TIME=%s WARMUP=%s ' "$WAREHOUSES" "$THREADS" "$TIME" "$WARMUP")$( [ "$WHAT" != tpcc ] && printf 'SF=%s REPEAT=%s QUERIES=%s ' "$SF" "$REPEAT" "$QUERIES")LOAD_THREADS=$LOAD_THREADS scripts/bench-compare.sh $WHAT\`"
  echo "- Systems: ${LABEL[strata]} and ${LABEL[mariadb]} (InnoDB buffer pool $MARIADB_BP), both on 127.0.0.1, durable commits; driver: strata bench"
  echo
  cat "$OUT/ratios.md"
  echo
  echo "| Load and check | $(for s in "${SYSTEMS[@]}"; do printf '%s | ' "${LABEL[$s]}"; done)Strata vs MariaDB |"
  echo "|---|---:|---:|---:|"
  for b in tpcc tpch; do
    [ -n "${LOAD_S[strata-$b]:-}" ] || continue
    echo "| $b load, s | ${LOAD_S[mariadb-$b]} | ${LOAD_S[strata-$b]} | $(python3 -c "print(f'{${LOAD_S[mariadb-$b]} / ${LOAD_S[strata-$b]}:.2f}×')") |"
    echo "| $b check | ${CHECK[mariadb-$b]:-} | ${CHECK[strata-$b]:-} | |"
  done
  echo
  echo "Chart: report.svg. Results: *.json; logs: *.log."
} >"$OUT/README.md"
cat "$OUT/README.md"
echo "results in $OUT"
exit $STATUS
