#!/usr/bin/env bash
# Runs the sqllogictest files against MariaDB from Debian's packages, to confirm that the
# expected results are MySQL behaviour. Not part of CI (it is a check on the tests, not on
# Strata). Records marked `onlyif strata` / `skipif mariadb` and Strata-specific files are
# skipped there.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${MARIADB_PORT:-3307}
DATA=${MARIADB_DATA:-/tmp/strata-slt-mariadb}
INNODB_BP=${INNODB_BP:-512M} bash ../shared/tools/start-mariadb.sh "$PORT" "$DATA"
SLT_EXTERNAL_URL="mysql://root@127.0.0.1:$PORT" cargo test -p strata --test slt
