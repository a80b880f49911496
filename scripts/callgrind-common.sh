# Sourced by the callgrind-*.sh scripts (BIN, SNAP and PORT set): `wait_up`, the sysbench
# options `SB`, and `snapshot`, which prepares 4x100k sbtest rows with BIN into $SNAP once
# and keeps them for later runs.
wait_up() { for _ in $(seq 600); do mysql -h127.0.0.1 -P$PORT -uroot -e "select 1" >/dev/null 2>&1 && return; sleep 0.5; done; echo "server did not start" >&2; exit 1; }
SB="--mysql-host=127.0.0.1 --mysql-port=$PORT --mysql-user=root --mysql-db=sbtest --tables=4 --table-size=100000"
snapshot() {
  [ -d "$SNAP" ] && return
  mkdir -p "$SNAP"
  $BIN server --port $PORT --status-port 0 --data-dir "$SNAP" > "$SNAP.log" 2>&1 &
  local sp=$!; wait_up
  mysql -h127.0.0.1 -P$PORT -uroot -e "create database sbtest"
  sysbench oltp_point_select $SB --threads=4 prepare >/dev/null
  kill $sp; wait $sp
}
