#!/usr/bin/env bash
# The SQL fuzzer: generated queries (mixed-type predicates, cross-type joins, random
# expressions over every function family) against a real server for SECS seconds (default
# 600), comparing index paths with full scans. A lost connection (crash), a query without an
# answer within a minute (hang) or a wrong answer fails the run; the message names the seed
# (replay with STRATA_DIFF_SEED) and the queries. Optional: STRATA_DIFF_PEER=mysql://... to
# compare answers with MySQL/MariaDB too.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-600}
SEED=${STRATA_DIFF_SEED:-$(date +%s)}
echo "fuzzing for ${SECS}s, seed ${SEED}"
STRATA_DIFF_SECS="$SECS" STRATA_DIFF_SEED="$SEED" cargo test --workspace --locked --test differential -- --nocapture
