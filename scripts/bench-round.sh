#!/bin/bash
# One round of issue 11's comparison against MariaDB, one server at a time, durable commits
# on both: sysbench oltp_point_select and oltp_read_write (each after its own timed 4x100k
# prepare, 8 threads, TIME_SB seconds), then go-tpc TPC-C 4 warehouses (timed prepare, 8 and
# 32 threads, TIME_TPCC each). MariaDB must be running on 127.0.0.1:3307
# (shared/tools/start-mariadb.sh); Strata is started and stopped by the scripts it calls.
#
# usage: bench-round.sh BIN   env: GOTPC [~/go-tpc/go-tpc]  TIME_SB [20]  TIME_TPCC [30s]
set -u
BIN=$(realpath "$1"); cd "$(dirname "$0")/.."
for wl in oltp_point_select oltp_read_write; do
  bash scripts/sysbench-strata.sh "$BIN" strata $wl "${TIME_SB:-20}"
  bash scripts/sysbench-mariadb.sh $wl "${TIME_SB:-20}"
done
unset SNAPSHOT
TIME=${TIME_TPCC:-30s} bash scripts/tpcc-gotpc.sh strata "$BIN" strata
TIME=${TIME_TPCC:-30s} bash scripts/tpcc-gotpc.sh mariadb - maria
