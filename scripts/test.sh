#!/usr/bin/env bash
# Runs every check CI runs: formatting, lints, all tests (unit, golden, sqllogictest over
# the MySQL wire, transaction anomaly and bank tests), and the docs build.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
cargo test --workspace --locked
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked
