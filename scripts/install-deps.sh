#!/usr/bin/env bash
# Installs the system packages Strata's build needs on a Debian/Ubuntu machine (RocksDB is
# C++ compiled by cmake/g++, and its bindings are generated through libclang), plus, with
# --test, what the test suite's client programs need (Python + PyMySQL, Go, a JDK, Maven,
# the mariadb client and mariadb-dump).
# Packages already present are skipped, so a machine that has them installs nothing.
set -euo pipefail

tests=false
[ "${1:-}" = "--test" ] && tests=true

sudo=""
[ "$(id -u)" -ne 0 ] && sudo="sudo"

need=()
command -v clang >/dev/null || need+=(clang)
dpkg -s libclang-dev >/dev/null 2>&1 || need+=(libclang-dev)
command -v cmake >/dev/null || need+=(cmake)
command -v g++ >/dev/null || need+=(g++)
command -v curl >/dev/null || need+=(curl)
if $tests; then
  # crates/strata/tests/clients.rs runs PyMySQL, go-sql-driver and Connector/J programs.
  command -v python3 >/dev/null || need+=(python3 python3-pip)
  command -v go >/dev/null || need+=(golang-go)
  command -v java >/dev/null || need+=(default-jdk-headless)
  command -v mvn >/dev/null || need+=(maven)
  # crates/strata/tests/dump.rs round-trips a database through mariadb-dump and mariadb.
  # ... and restores the dump into a private MariaDB server.
  command -v mariadb-dump >/dev/null || need+=(mariadb-client)
  [ -x /usr/sbin/mariadbd ] || command -v mariadbd >/dev/null || need+=(mariadb-server)
fi
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update
  $sudo apt-get install -y "${need[@]}"
fi

if $tests; then
  python3 -c 'import pymysql' 2>/dev/null \
    || python3 -m pip install --quiet pymysql \
    || python3 -m pip install --quiet --break-system-packages pymysql \
    || { $sudo apt-get update && $sudo apt-get install -y python3-pymysql; }
fi

# The toolchain is pinned in rust-toolchain.toml; rustup installs it on first use.
if ! command -v cargo >/dev/null; then
  curl -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
  echo "Rust installed: run '. \$HOME/.cargo/env' (or open a new shell) before cargo."
fi
