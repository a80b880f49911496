#!/usr/bin/env python3
# Usage: SPID=<server pid> python3 scripts/stmt-summary-bench.py PORT N ROUNDS
# (pip install mysql-connector-python; root without a password.)
# The statement summary's cost: server CPU per point select, prepared (COM_STMT_EXECUTE)
# and as text (COM_QUERY, whose digest is computed per statement), with
# tidb_enable_stmt_summary ON and OFF alternating for ROUNDS rounds; prints each round
# and the medians.
import mysql.connector, sys, time, random, os, statistics
pid = int(os.environ.get('SPID', '0'))
def cpu():
    f = open(f'/proc/{pid}/stat').read().split(')')[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')
port, n, rounds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
c = mysql.connector.connect(host='127.0.0.1', port=port, user='root', autocommit=True)
cur = c.cursor()
cur.execute("DROP DATABASE IF EXISTS ssb"); cur.execute("CREATE DATABASE ssb"); cur.execute("USE ssb")
cur.execute("CREATE TABLE sbtest (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL)")
for s in range(0, 10000, 1000):
    cur.execute("INSERT INTO sbtest VALUES " + ",".join(f"({i},{i%997},'{'x'*100}','{'y'*50}')" for i in range(s, s + 1000)))
q = "SELECT c FROM sbtest WHERE id = %s"
results = {}
for r in range(rounds):
    for on in ('ON', 'OFF'):
        cur.execute(f"SET GLOBAL tidb_enable_stmt_summary = {on}")
        for mode in ('prepared', 'text'):
            pc = c.cursor(prepared=(mode == 'prepared'))
            for _ in range(200): pc.execute(q, (random.randrange(9990),)); pc.fetchall()
            t0, c0 = time.perf_counter(), cpu()
            for _ in range(n): pc.execute(q, (random.randrange(9990),)); pc.fetchall()
            el, c1 = time.perf_counter() - t0, cpu()
            us = 1e6 * (c1 - c0) / n
            results.setdefault((mode, on), []).append(us)
            print(f"round {r} summary={on} {mode}: {n/el:.0f} exec/s, server CPU {us:.1f} us/exec", flush=True)
            pc.close()
cur.execute("SET GLOBAL tidb_enable_stmt_summary = ON")
for mode in ('prepared', 'text'):
    on, off = statistics.median(results[(mode, 'ON')]), statistics.median(results[(mode, 'OFF')])
    print(f"median {mode}: summary ON {on:.1f} us/exec, OFF {off:.1f} us/exec, ON/OFF {on/off:.3f}")
