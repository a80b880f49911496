#!/bin/bash
# Fresh sbtest on a MariaDB at 127.0.0.1:3307 (shared/tools/start-mariadb.sh), sysbench prepare
# (4x100k rows), then WORKLOAD for TIME seconds at 8 threads; SBARGS adds run options.
# usage: sysbench-mariadb.sh [WORKLOAD=oltp_read_write] [TIME=60]
WL=${1:-oltp_read_write}; T=${2:-60}
mysql -h127.0.0.1 -P3307 -uroot -e "drop database if exists sbtest; create database sbtest"
S=$(date +%s.%N)
sysbench oltp_point_select --mysql-host=127.0.0.1 --mysql-port=3307 --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=100000 --threads=4 prepare >/dev/null 2>&1
E=$(date +%s.%N)
echo "maria prepare $(echo "$E - $S" | bc) s"
sysbench $WL --mysql-host=127.0.0.1 --mysql-port=3307 --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=100000 --threads=8 --time=$T --report-interval=${RI:-0} ${SBARGS:-} run 2>&1 | grep -E "transactions:|queries:|95th|^\[ " | sed "s/^/maria /"
