#!/usr/bin/env python3
"""Per column family, what a RocksDB LOG says flushes and compactions did: files and bytes
flushed (and bytes per entry), compaction output, records and CPU seconds, and compactions
by input levels. Usage: rocksdb-log-summary.py DATADIR/kv/LOG (a server's LOG covers the
process since it opened the database)."""
import collections
import json
import re
import sys

jobs = {}
flushes = collections.defaultdict(lambda: [0, 0, 0])
comps = collections.defaultdict(lambda: [0, 0, 0, 0, 0])
by_level = collections.defaultdict(lambda: [0, 0, 0, 0])
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"\[(\w+)\] \[JOB (\d+)\] Flushing memtable", line)
    if m:
        jobs[int(m.group(2))] = ("flush", m.group(1), "")
        continue
    if "EVENT_LOG_v1" not in line:
        continue
    j = json.loads(line[line.index("{"):])
    ev = j.get("event")
    if ev == "compaction_started":
        levels = ",".join(k[len("files_"):] for k in j if k.startswith("files_L"))
        jobs[j["job"]] = ("compaction", j["cf_name"], levels)
    elif ev == "table_file_creation":
        kind, cf, _ = jobs.get(j["job"], ("?", j.get("cf_name", "?"), ""))
        if kind == "flush":
            f = flushes[cf]
            f[0] += 1
            f[1] += j["file_size"]
            f[2] += j["table_properties"]["num_entries"]
    elif ev == "compaction_finished":
        _, cf, levels = jobs.get(j["job"], ("?", "?", "?"))
        c = comps[cf]
        c[0] += 1
        c[1] += j["total_output_size"]
        c[2] += j["num_input_records"]
        c[3] += j["num_output_records"]
        c[4] += j["compaction_time_cpu_micros"]
        b = by_level[(cf, f"{levels}->L{j['output_level']}")]
        b[0] += 1
        b[1] += j["total_output_size"]
        b[2] += j["compaction_time_cpu_micros"]
for cf, (n, size, entries) in sorted(flushes.items()):
    print(f"flush {cf}: {n} files {size / 1e6:.1f} MB {entries} entries {size / max(entries, 1):.0f} B/entry")
for cf, (n, out, rin, rout, cpu) in sorted(comps.items()):
    print(f"compaction {cf}: {n} jobs out {out / 1e6:.1f} MB records in {rin} out {rout} cpu {cpu / 1e6:.2f} s")
for (cf, levels), (n, out, cpu, _) in sorted(by_level.items(), key=lambda kv: -kv[1][2]):
    print(f"  {cf} {levels}: {n} jobs out {out / 1e6:.1f} MB cpu {cpu / 1e6:.2f} s")
