#!/usr/bin/env python3
"""Times the 22 TPC-H queries on DuckDB, the columnar engine Strata's analytics are measured
against, on the same data and query texts `strata bench tpch` uses.

`strata bench tpch dbgen` writes the data `tpch prepare` loads; DuckDB (`pip install duckdb`)
loads it in memory and runs each query REPEAT times (after one warm-up run). Answers are
checked against crates/bench/tpch/answers/sf<SF>/ when present. The result is a JSON file
in `strata bench tpch run --json`'s format, so `strata bench report` charts it beside the
servers' runs.

Usage: scripts/tpch-duckdb.py SF OUT.json [REPEAT]     (REPEAT defaults to 3)
Set STRATA=path/to/strata to use a built binary instead of `cargo run --release`.
"""

import importlib.util
import json
import pathlib
import subprocess
import sys
import tempfile
import time

import duckdb

HERE = pathlib.Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("tpch_answers", HERE / "tpch-answers.py")
answers = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(answers)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    sf = answers.fmt_sf(sys.argv[1])
    out = pathlib.Path(sys.argv[2])
    repeat = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    ref_dir = answers.ANSWERS / f"sf{sf}"
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            answers.strata_cmd() + ["bench", "tpch", "dbgen", "--sf", sf, "--out", tmp], check=True, cwd=answers.ROOT
        )
        con = duckdb.connect()
        start = time.monotonic()
        for table, columns in answers.TABLES.items():
            con.execute(f"CREATE TABLE {table} ({columns})")
            con.execute(f"COPY {table} FROM '{tmp}/{table}.tbl' (DELIMITER '|', HEADER false, QUOTE '')")
        print(f"DuckDB loaded sf {sf} in {time.monotonic() - start:.1f} s")
        for n in range(1, 23):
            sql = (answers.QUERIES / f"q{n:02}.sql").read_text().replace(":sf", sf)
            con.execute(sql).fetchall()  # warm-up
            times = []
            for _ in range(repeat):
                t = time.monotonic()
                cur = con.execute(sql)
                rows = cur.fetchall()
                times.append(time.monotonic() - t)
            names = [d[0] for d in cur.description]
            text = "\n".join(["\t".join(names)] + ["\t".join(answers.render(v) for v in r) for r in rows]) + "\n"
            ref = ref_dir / f"q{n:02}.tsv"
            check = None
            if ref.exists():
                check = "pass" if ref.read_text() == text else "fail: differs from the reference answer"
            results.append(
                {
                    "query": n,
                    "times_s": times,
                    "status": "ok",
                    "error": None,
                    "rows": len(rows),
                    "check": check,
                }
            )
            print(f"q{n:02}: {sorted(times)[len(times) // 2]:.3f} s, {len(rows)} rows, {check}")
    report = {
        "benchmark": "tpch",
        "label": f"DuckDB {duckdb.__version__} (pip)",
        "server_version": duckdb.__version__,
        "target": "in-process",
        "sf": float(sf),
        "queries": results,
    }
    out.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
