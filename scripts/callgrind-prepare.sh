#!/bin/bash
# Instructions of the whole Strata server for a sysbench prepare (4 tables, 4 threads),
# counted by callgrind and split into its two phases: the rows (CREATE TABLE + bulk
# INSERTs, sysbench --create_secondary=off) and the secondary indexes (CREATE INDEX k_N
# on each table, four clients at once, as sysbench does them).
#   scripts/callgrind-prepare.sh BIN [ROWS=100000]
# Every run starts BIN under valgrind on a fresh data dir. Automatic ANALYZE is off (under
# callgrind it would take much of the window). Needs valgrind, sysbench and the mysql client.
set -u
BIN=$1; ROWS=${2:-100000}
PORT=${PORT:-4621}; WORK=${WORK:-/tmp/strata-cg-prepare}
SB="--mysql-host=127.0.0.1 --mysql-port=$PORT --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=$ROWS"
wait_up() { for _ in $(seq 600); do mysql -h127.0.0.1 -P$PORT -uroot -e "select 1" >/dev/null 2>&1 && return; sleep 0.5; done; echo "server did not start" >&2; exit 1; }
rm -rf "$WORK"; mkdir -p "$WORK"
OUT=$(mktemp -d)
valgrind --tool=callgrind --instr-atstart=no --callgrind-out-file=$OUT/cg.%p \
  $BIN server --port $PORT --status-port 0 --data-dir "$WORK" > "$WORK.log" 2>&1 &
VP=$!; wait_up
mysql -h127.0.0.1 -P$PORT -uroot -e "set global tidb_enable_auto_analyze=0; create database sbtest"
# dump NAME: writes the counts since the last dump and prints their total.
n=0
dump() {
  callgrind_control -d "$1" $VP >/dev/null; n=$((n + 1))
  local f=$OUT/cg.$VP.$n
  for _ in $(seq 400); do [ -f $f ] && grep -q "^totals:" $f && break; sleep 0.5; done
  echo "$(basename $BIN) $1 instructions=$(awk '/^totals:/ {print $2}' $f) profile=$f"
}
callgrind_control -z $VP >/dev/null; callgrind_control -i on $VP >/dev/null
sysbench oltp_point_select $SB --threads=4 --create_secondary=off prepare >/dev/null
dump rows
P=""; for t in 1 2 3 4; do mysql -h127.0.0.1 -P$PORT -uroot sbtest -e "create index k_$t on sbtest$t(k)" & P="$P $!"; done
wait $P
callgrind_control -i off $VP >/dev/null
dump indexes
kill $VP; wait $VP 2>/dev/null
