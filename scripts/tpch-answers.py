#!/usr/bin/env python3
"""Produces the TPC-H reference answers that `strata bench tpch check` compares with.

The data is the one `strata bench tpch prepare` loads: `strata bench tpch dbgen` writes it
as files, DuckDB (an independent engine: `pip install duckdb`) loads them and runs the same
22 query files, and each answer goes to crates/bench/tpch/answers/sf<SF>/qNN.tsv (column
names, then rows, tab-separated, NULL for null).

Usage: scripts/tpch-answers.py SF [SF ...]   (e.g. 0.01 0.1 1)
Set STRATA=path/to/strata to use a built binary instead of `cargo run --release`.
"""

import decimal
import os
import pathlib
import subprocess
import sys
import tempfile

import duckdb

ROOT = pathlib.Path(__file__).resolve().parent.parent
QUERIES = ROOT / "crates/bench/tpch/queries"
ANSWERS = ROOT / "crates/bench/tpch/answers"

# DuckDB types for the columns of each table, in order (same as the MySQL schema).
TABLES = {
    "region": "r_regionkey INT, r_name VARCHAR, r_comment VARCHAR",
    "nation": "n_nationkey INT, n_name VARCHAR, n_regionkey INT, n_comment VARCHAR",
    "supplier": "s_suppkey INT, s_name VARCHAR, s_address VARCHAR, s_nationkey INT, s_phone VARCHAR, "
    "s_acctbal DECIMAL(15,2), s_comment VARCHAR",
    "customer": "c_custkey INT, c_name VARCHAR, c_address VARCHAR, c_nationkey INT, c_phone VARCHAR, "
    "c_acctbal DECIMAL(15,2), c_mktsegment VARCHAR, c_comment VARCHAR",
    "part": "p_partkey INT, p_name VARCHAR, p_mfgr VARCHAR, p_brand VARCHAR, p_type VARCHAR, p_size INT, "
    "p_container VARCHAR, p_retailprice DECIMAL(15,2), p_comment VARCHAR",
    "partsupp": "ps_partkey INT, ps_suppkey INT, ps_availqty INT, ps_supplycost DECIMAL(15,2), ps_comment VARCHAR",
    "orders": "o_orderkey BIGINT, o_custkey INT, o_orderstatus VARCHAR, o_totalprice DECIMAL(15,2), "
    "o_orderdate DATE, o_orderpriority VARCHAR, o_clerk VARCHAR, o_shippriority INT, o_comment VARCHAR",
    "lineitem": "l_orderkey BIGINT, l_partkey INT, l_suppkey INT, l_linenumber INT, l_quantity DECIMAL(15,2), "
    "l_extendedprice DECIMAL(15,2), l_discount DECIMAL(15,2), l_tax DECIMAL(15,2), l_returnflag VARCHAR, "
    "l_linestatus VARCHAR, l_shipdate DATE, l_commitdate DATE, l_receiptdate DATE, l_shipinstruct VARCHAR, "
    "l_shipmode VARCHAR, l_comment VARCHAR",
}


def fmt_sf(sf):
    s = repr(float(sf))
    return s[:-2] if s.endswith(".0") else s


def render(v):
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return repr(round(v, 6))
    if isinstance(v, decimal.Decimal):
        return str(v)
    return str(v)


def strata_cmd():
    if os.environ.get("STRATA"):
        return [os.environ["STRATA"]]
    return ["cargo", "run", "--quiet", "--release", "-p", "strata", "--"]


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for sf in sys.argv[1:]:
        sf = fmt_sf(sf)
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(strata_cmd() + ["bench", "tpch", "dbgen", "--sf", sf, "--out", tmp], check=True, cwd=ROOT)
            con = duckdb.connect()
            for table, columns in TABLES.items():
                con.execute(f"CREATE TABLE {table} ({columns})")
                con.execute(f"COPY {table} FROM '{tmp}/{table}.tbl' (DELIMITER '|', HEADER false, QUOTE '')")
            out = ANSWERS / f"sf{sf}"
            out.mkdir(parents=True, exist_ok=True)
            for n in range(1, 23):
                sql = (QUERIES / f"q{n:02}.sql").read_text().replace(":sf", sf)
                cur = con.execute(sql)
                names = [d[0] for d in cur.description]
                rows = cur.fetchall()
                lines = ["\t".join(names)] + ["\t".join(render(v) for v in r) for r in rows]
                (out / f"q{n:02}.tsv").write_text("\n".join(lines) + "\n")
                print(f"sf {sf} q{n:02}: {len(rows)} rows")


if __name__ == "__main__":
    main()
