#!/usr/bin/env bash
# Bulk-load benchmark: LOAD DATA LOCAL INFILE of one generated tab-separated file into the
# same table on Strata and on MariaDB (Debian's package), both started here on 127.0.0.1
# with durable commits, one server at a time. Prints seconds and rows/s for each and the
# ratio. Settings (environment):
#   ROWS [1000000]                    lines in the file (an orders-like table, 7 columns)
#   STRATA [target/release/strata]   the Strata binary
#   WORK [/tmp/strata-bench-load]    scratch directory (data directories and the file)
set -euo pipefail
cd "$(dirname "$0")/.."
ROWS=${ROWS:-1000000}
WORK=${WORK:-/tmp/strata-bench-load}
STRATA=${STRATA:-target/release/strata}
[ -x "$STRATA" ] || { echo "no strata binary at $STRATA (cargo build --release)" >&2; exit 1; }
mkdir -p "$WORK"
FILE=$WORK/orders-$ROWS.tsv
if [ ! -f "$FILE" ]; then
  python3 - "$ROWS" "$FILE" <<'EOF'
import random, sys
n, path = int(sys.argv[1]), sys.argv[2]
r = random.Random(42)
with open(path, "w") as f:
    for i in range(1, n + 1):
        f.write(f"{i}\t{r.randint(1, 150000)}\t{r.choice('OFP')}\t{r.randint(100, 50000000) / 100:.2f}\t"
                f"199{r.randint(2, 8)}-0{r.randint(1, 9)}-1{r.randint(0, 9)}\tClerk#{r.randint(1, 1000):09d}\t"
                f"comment {r.getrandbits(48):x}\n")
EOF
fi
DDL="CREATE TABLE orders (o_orderkey BIGINT PRIMARY KEY, o_custkey INT NOT NULL, o_status CHAR(1) NOT NULL,
  o_total DECIMAL(15,2) NOT NULL, o_date DATE NOT NULL, o_clerk CHAR(15) NOT NULL, o_comment VARCHAR(79) NOT NULL)"
LOAD="LOAD DATA LOCAL INFILE '$FILE' INTO TABLE orders"

load() { # port label
  mariadb -h127.0.0.1 -P"$1" -uroot -e "DROP DATABASE IF EXISTS bl; CREATE DATABASE bl; USE bl; $DDL"
  local t0 t1
  t0=$(date +%s.%N)
  mariadb -h127.0.0.1 -P"$1" -uroot --local-infile=1 bl -e "$LOAD"
  t1=$(date +%s.%N)
  local n
  n=$(mariadb -h127.0.0.1 -P"$1" -uroot -N bl -e "SELECT COUNT(*) FROM orders")
  [ "$n" = "$ROWS" ] || { echo "$2 loaded $n rows, not $ROWS" >&2; exit 1; }
  python3 -c "print(f'{$t1 - $t0:.2f}')"
}

rm -rf "$WORK/strata-data"
"$STRATA" server --host 127.0.0.1 --port 4499 --status-port 0 --data-dir "$WORK/strata-data" >"$WORK/strata.log" 2>&1 &
SPID=$!
trap 'kill $SPID 2>/dev/null || true' EXIT
for _ in $(seq 1 60); do mariadb -h127.0.0.1 -P4499 -uroot -e "SELECT 1" >/dev/null 2>&1 && break; sleep 1; done
S=$(load 4499 Strata)
kill $SPID; wait $SPID 2>/dev/null || true

rm -rf "$WORK/mariadb-data"
INNODB_BP=2G bash ../shared/tools/start-mariadb.sh 3399 "$WORK/mariadb-data" >/dev/null
M=$(load 3399 MariaDB)
kill "$(cat "$WORK/mariadb-data/mariadbd.pid")"

python3 - "$ROWS" "$S" "$M" <<'EOF'
import sys
rows, s, m = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
print(f"LOAD DATA LOCAL INFILE, {rows} rows ({rows / 1e6:.1f}M), 7 columns")
print(f"  MariaDB  {m:8.2f} s  {rows / m:10.0f} rows/s")
print(f"  Strata   {s:8.2f} s  {rows / s:10.0f} rows/s")
print(f"  Strata speed / MariaDB: {m / s:.2f}x")
EOF
