#!/bin/bash
# Fresh Strata on port 4600 (data in $DATA), sysbench prepare (4x100k rows), then WORKLOAD for
# TIME seconds at 8 threads; RI=N prints TPS every N s; SBARGS adds run options
# (e.g. --db-ps-mode=disable for the text protocol). Stops the server after.
# usage: sysbench-strata.sh BIN LABEL [WORKLOAD=oltp_read_write] [TIME=20]
BIN=$1; LABEL=$2; WL=${3:-oltp_read_write}; T=${4:-20}
pkill -f "server --port 4600 --status"; while pgrep -f "server --port 4600 --status" >/dev/null; do sleep 0.5; done
DATA=${DATA:-/tmp/strata-sysbench}; rm -rf $DATA; mkdir -p $DATA
# shellcheck disable=SC2086 # SERVER_ARGS: words, more arguments for the server
$BIN server --port 4600 --status-port 0 --data-dir $DATA ${SERVER_ARGS:-} > $DATA.$LABEL.log 2>&1 &
for i in $(seq 60); do mysql -h127.0.0.1 -P4600 -uroot -e "select 1" >/dev/null 2>&1 && break; sleep 0.5; done
mysql -h127.0.0.1 -P4600 -uroot -e "create database sbtest"
S=$(date +%s.%N)
sysbench oltp_point_select --mysql-host=127.0.0.1 --mysql-port=4600 --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=100000 --threads=4 prepare >/dev/null 2>&1
E=$(date +%s.%N)
echo "$LABEL prepare $(echo "$E - $S" | bc) s"
sysbench $WL --mysql-host=127.0.0.1 --mysql-port=4600 --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=100000 --threads=8 --time=$T --report-interval=${RI:-0} ${SBARGS:-} run 2>&1 | grep -E "transactions:|queries:|95th|^\[ " | sed "s/^/$LABEL /"
pkill -f "server --port 4600 --status"; while pgrep -f "server --port 4600 --status" >/dev/null; do sleep 0.5; done
# Removed now rather than before the next prepare (see tpcc-gotpc.sh).
rm -rf $DATA
