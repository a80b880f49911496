#!/usr/bin/env python3
# Usage: SPID=<server pid> python3 scripts/plan-cache-bench.py PORT N [cache settings: 1 0 | none]
# (pip install mysql-connector-python; the server must allow root without a password.)
# Server-side prepared point selects and a 3-table join lookup through mysql-connector's
# binary protocol, with the plan cache on and off; prints executions per second.
import mysql.connector, sys, time, random, os
pid=int(os.environ.get('SPID','0'))
def cpu():
    if not pid: return 0.0
    f=open(f'/proc/{pid}/stat').read().split(')')[1].split()
    return (int(f[11])+int(f[12]))/os.sysconf('SC_CLK_TCK')

port=int(sys.argv[1]); n=int(sys.argv[2])
def conn(cache):
    c=mysql.connector.connect(host='127.0.0.1',port=port,user='root',database='pcb',autocommit=True)
    if cache is not None:
        cur=c.cursor(); cur.execute(f"SET tidb_enable_prepared_plan_cache = {cache}"); cur.close()
    return c
c=mysql.connector.connect(host='127.0.0.1',port=port,user='root',autocommit=True); cur=c.cursor()
cur.execute("DROP DATABASE IF EXISTS pcb"); cur.execute("CREATE DATABASE pcb"); cur.execute("USE pcb")
cur.execute("CREATE TABLE sbtest (id INT PRIMARY KEY, k INT NOT NULL, c CHAR(120) NOT NULL, pad CHAR(60) NOT NULL, KEY k_1 (k))")
cur.execute("CREATE TABLE cust (id INT PRIMARY KEY, name VARCHAR(30), region INT)")
cur.execute("CREATE TABLE region (id INT PRIMARY KEY, name VARCHAR(30))")
for s in range(0, 10000, 1000):
    cur.execute("INSERT INTO sbtest VALUES " + ",".join(f"({i},{i%997},'{'x'*100}','{'y'*50}')" for i in range(s, s+1000)))
    cur.execute("INSERT INTO cust VALUES " + ",".join(f"({i},'c{i}',{i%10})" for i in range(s, s+1000)))
cur.execute("INSERT INTO region VALUES " + ",".join(f"({i},'r{i}')" for i in range(10)))
queries={
 'point': "SELECT c FROM sbtest WHERE id = %s",
 'join': "SELECT s.c, cu.name, r.name FROM sbtest s JOIN cust cu ON cu.id = s.id JOIN region r ON r.id = cu.region WHERE s.id = %s",
 'range': "SELECT SUM(k) FROM sbtest WHERE id BETWEEN %s AND %s + 9",
}
for cache in (sys.argv[3:] or ['1','0']):
    cc = conn(None if cache == 'none' else cache)
    for name, q in queries.items():
        pc = cc.cursor(prepared=True)
        args = lambda: (random.randrange(9990),) * q.count('%s')
        for _ in range(200): pc.execute(q, args()); pc.fetchall()
        t0=time.perf_counter(); c0=cpu()
        for _ in range(n): pc.execute(q, args()); pc.fetchall()
        el=time.perf_counter()-t0; c1=cpu()
        print(f"cache={cache} {name}: {n/el:.0f} exec/s, server CPU {1e6*(c1-c0)/n:.1f} us/exec")
        pc.close()
    cc.close()
