//! Columnar replicas against a Strata server started by the test: `ALTER TABLE .. SET
//! TIFLASH REPLICA` builds one (information_schema.TIFLASH_REPLICA shows it become
//! available), analytic queries then read it by default, and every answer equals the row
//! engine's at the same snapshot — after writes, inside a transaction with its own
//! uncommitted writes, under a snapshot older than later commits, and while transfers keep
//! committing (which must never change the total). `REPLICA 0` drops it; an ALTER that
//! changes the columns rebuilds it. A replica written to disk survives a crash: the
//! restarted server loads it and catches up with the writes since, without a rebuild.
//! And with the TPC-C driver committing from its own process, analytic queries over its
//! tables' replicas agree with the row engine, see consistent snapshots and fresh commits.
//! With statistics, the cost model sends each query to the engine it estimates cheaper.

mod common;

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Error, Pool};

fn server_code(e: &Error) -> Option<u16> {
    match e {
        Error::Server(s) => Some(s.code),
        _ => None,
    }
}

const ROWS: i64 = 3_000;

/// Scans of a columnar replica so far (SHOW GLOBAL STATUS).
async fn replica_reads(c: &mut Conn) -> u64 {
    let row: Option<(String, u64)> =
        c.query_first("SHOW GLOBAL STATUS LIKE 'Strata_columnar_replica_reads'").await.expect("status");
    row.expect("the counter exists").1
}

/// (AVAILABLE, PROGRESS) of `db.table` in information_schema.TIFLASH_REPLICA, if listed.
async fn replica_row(c: &mut Conn, table: &str) -> Option<(i64, u64, f64)> {
    c.query_first(format!(
        "SELECT AVAILABLE, REPLICA_COUNT, PROGRESS FROM information_schema.tiflash_replica \
         WHERE TABLE_SCHEMA = 'h' AND TABLE_NAME = '{table}'"
    ))
    .await
    .expect("tiflash_replica")
}

async fn wait_available(c: &mut Conn, table: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((1, _, p)) = replica_row(c, table).await {
            assert_eq!(p, 1.0);
            return;
        }
        assert!(Instant::now() < deadline, "the replica of {table} never became available");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The analytic query every check runs, as text rows.
const Q: &str = "SELECT k % 7 AS g, COUNT(*), SUM(v), MIN(s), MAX(d) FROM h.t WHERE id >= 0 GROUP BY g ORDER BY g";

async fn answer(c: &mut Conn, engines: &str) -> Vec<Vec<Option<String>>> {
    c.query_drop(format!("SET SESSION tidb_isolation_read_engines = '{engines}'")).await.expect("set engines");
    let rows: Vec<mysql_async::Row> = c.query(Q).await.expect("query");
    rows.into_iter().map(|r| (0..r.len()).map(|i| r.get::<Option<String>, _>(i).flatten()).collect()).collect()
}

/// The replica's answer (checked to come from it) and the row engine's, in the current
/// transaction or autocommit.
async fn both(c: &mut Conn) -> (Vec<Vec<Option<String>>>, Vec<Vec<Option<String>>>) {
    let before = replica_reads(c).await;
    let column = answer(c, "tikv,tiflash").await;
    assert!(replica_reads(c).await > before, "the default engines read the replica for {Q}");
    let row = answer(c, "tikv").await;
    c.query_drop("SET SESSION tidb_isolation_read_engines = 'tikv,tiflash,tidb'").await.expect("reset");
    (column, row)
}

async fn setup(pool: &Pool) {
    common::exec(
        pool,
        &[
            "CREATE DATABASE h",
            "CREATE TABLE h.t (id INT PRIMARY KEY, k INT NOT NULL, v DECIMAL(12,2), s VARCHAR(20), d DATE)",
            "CREATE VIEW h.vw AS SELECT id FROM h.t",
        ],
    )
    .await;
    let mut c = pool.get_conn().await.expect("connect");
    for start in (0..ROWS).step_by(1_000) {
        let values: Vec<String> = (start..start + 1_000)
            .map(|i| {
                let s = if i % 11 == 0 { "NULL".to_string() } else { format!("'s{:04}'", i % 500) };
                format!(
                    "({i}, {}, {}.25, {s}, DATE '2024-01-01' + INTERVAL {} DAY)",
                    i * 13 % 1000,
                    100 + i % 50,
                    i % 300
                )
            })
            .collect();
        c.query_drop(format!("INSERT INTO h.t VALUES {}", values.join(","))).await.expect("insert");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn columnar_replica_answers_like_the_row_store() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let pool = server.pool(None);
    setup(&pool).await;
    let mut c = pool.get_conn().await.expect("connect");

    // Errors as TiDB gives them.
    let err = |r: Result<(), Error>| server_code(&r.expect_err("must fail"));
    assert_eq!(err(c.query_drop("ALTER TABLE h.nope SET TIFLASH REPLICA 1").await), Some(1146));
    assert_eq!(err(c.query_drop("ALTER TABLE h.vw SET TIFLASH REPLICA 1").await), Some(1347));
    assert_eq!(err(c.query_drop("ALTER TABLE h.t SET TIFLASH REPLICA 2").await), Some(1105));
    assert_eq!(err(c.query_drop("ALTER TABLE h.t SET TIFLASH REPLICA").await), Some(1064));
    assert_eq!(replica_row(&mut c, "t").await, None);

    // Build it; the answer comes from it and equals the row engine's.
    c.query_drop("ALTER TABLE h.t SET TIFLASH REPLICA 1").await.expect("set replica");
    let listed = replica_row(&mut c, "t").await.expect("listed at once");
    assert_eq!(listed.1, 1);
    wait_available(&mut c, "t").await;
    let (column, row) = both(&mut c).await;
    assert_eq!(column, row);
    assert_eq!(column.len(), 7);

    // Committed writes of every kind reach it.
    common::exec(
        &pool,
        &[
            "INSERT INTO h.t VALUES (100000, 3, 1.00, 'new', '2030-01-01'), (100001, 4, NULL, NULL, NULL)",
            "UPDATE h.t SET v = v + 1000, s = 'zzz' WHERE id % 97 = 0",
            "DELETE FROM h.t WHERE id % 89 = 1",
            "REPLACE INTO h.t VALUES (5, 5, 5.55, 'five', '2001-01-01')",
        ],
    )
    .await;
    let (column, row) = both(&mut c).await;
    assert_eq!(column, row);

    // A transaction sees its own uncommitted writes through the replica.
    c.query_drop("BEGIN").await.expect("begin");
    c.query_drop("INSERT INTO h.t VALUES (200000, 0, 9999.99, 'mine', '2040-02-02')").await.expect("own insert");
    c.query_drop("DELETE FROM h.t WHERE id BETWEEN 10 AND 20").await.expect("own delete");
    c.query_drop("UPDATE h.t SET v = 0 WHERE id = 30").await.expect("own update");
    let (mine, row) = both(&mut c).await;
    assert_eq!(mine, row);
    c.query_drop("ROLLBACK").await.expect("rollback");
    let (column, row) = both(&mut c).await;
    assert_eq!(column, row);
    assert_ne!(mine, column, "the rolled-back writes were seen inside the transaction only");

    // A snapshot older than a commit does not see it, on either engine.
    let mut other = pool.get_conn().await.expect("connect");
    c.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT").await.expect("begin");
    let (before, _) = both(&mut c).await;
    other.query_drop("UPDATE h.t SET v = v + 1 WHERE id < 1000").await.expect("other's update");
    let (column, row) = both(&mut c).await;
    assert_eq!(column, before, "the snapshot does not move");
    assert_eq!(row, before);
    c.query_drop("COMMIT").await.expect("commit");
    let (column, row) = both(&mut c).await;
    assert_eq!(column, row);
    assert_ne!(column, before, "a new snapshot sees the update");

    // Transfers keep committing while the replica is read (and compacted): the total never
    // changes and each answer equals the row engine's in the same transaction.
    let total: Option<String> = c.query_first("SELECT SUM(v) FROM h.t").await.expect("total");
    let writer_pool = pool.clone();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let writer = tokio::spawn(async move {
        let mut w = writer_pool.get_conn().await.expect("connect");
        let mut n = 0u64;
        let mut i = 0i64;
        while !stop2.load(std::sync::atomic::Ordering::Relaxed) {
            let (a, b) = ((i * 37) % ROWS, (i * 53 + 7) % ROWS);
            i += 1;
            if a == b {
                continue;
            }
            let r = async {
                w.query_drop("BEGIN").await?;
                w.query_drop(format!("UPDATE h.t SET v = v - 1 WHERE id = {a} AND v IS NOT NULL")).await?;
                let moved = w.affected_rows();
                w.query_drop(format!("UPDATE h.t SET v = v + {moved} WHERE id = {b} AND v IS NOT NULL")).await?;
                if w.affected_rows() == 1 || moved == 0 {
                    w.query_drop("COMMIT").await
                } else {
                    w.query_drop("ROLLBACK").await
                }
            }
            .await;
            match r {
                Ok(()) => n += 1,
                Err(e) => {
                    let _ = w.query_drop("ROLLBACK").await;
                    assert!(matches!(server_code(&e), Some(1205 | 1213 | 8028)), "transfer failed: {e}");
                }
            }
        }
        n
    });
    let sum_q = "SELECT SUM(v), COUNT(*) FROM h.t WHERE id >= 0";
    let deadline = Instant::now() + Duration::from_secs(14);
    let mut checks = 0;
    while Instant::now() < deadline {
        let before = replica_reads(&mut c).await;
        let t: Option<(String, i64)> = c.query_first(sum_q).await.expect("sum");
        assert_eq!(t.as_ref().map(|t| Some(t.0.clone())), Some(total.clone()), "the total is constant");
        assert!(replica_reads(&mut c).await > before, "read from the replica");
        c.query_drop("BEGIN").await.expect("begin");
        let (column, row) = both(&mut c).await;
        assert_eq!(column, row, "same snapshot, same answer");
        c.query_drop("COMMIT").await.expect("commit");
        checks += 1;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let transfers = writer.await.expect("writer");
    assert!(transfers > 20 && checks > 5, "{transfers} transfers, {checks} checks");

    // An ALTER that changes the columns rebuilds the replica for the new definition.
    c.query_drop("ALTER TABLE h.t ADD COLUMN extra INT DEFAULT 7").await.expect("add column");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let before = replica_reads(&mut c).await;
        let s: Option<i64> = c.query_first("SELECT SUM(extra) FROM h.t WHERE id >= 0").await.expect("sum extra");
        let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM h.t").await.expect("count");
        assert_eq!(s, n.map(|n| n * 7));
        if replica_reads(&mut c).await > before {
            break;
        }
        assert!(Instant::now() < deadline, "the replica was not rebuilt after ADD COLUMN");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // REPLICA 0 drops it: no longer listed, no longer read.
    c.query_drop("ALTER TABLE h.t SET COLUMNAR REPLICA 0").await.expect("drop replica");
    assert_eq!(replica_row(&mut c, "t").await, None);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let before = replica_reads(&mut c).await;
    let _: Vec<mysql_async::Row> = c.query(Q).await.expect("query");
    assert_eq!(replica_reads(&mut c).await, before, "a dropped replica is not read");
}

/// A SHOW GLOBAL STATUS counter.
async fn status(c: &mut Conn, name: &str) -> u64 {
    let row: Option<(String, u64)> = c.query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'")).await.expect("status");
    row.unwrap_or_else(|| panic!("{name} exists")).1
}

/// Waits (up to 30 s) for a SHOW GLOBAL STATUS counter to reach `want`.
async fn wait_status(c: &mut Conn, name: &str, want: u64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let now = status(c, name).await;
        if now == want {
            return;
        }
        assert!(Instant::now() < deadline, "{name} is {now}, not {want}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_survive_a_crash_without_a_rebuild() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut server = common::StrataProcess::start(&data);
    let pool = server.pool(None);
    setup(&pool).await;
    let mut c = pool.get_conn().await.expect("connect");
    c.query_drop("ALTER TABLE h.t SET TIFLASH REPLICA 1").await.expect("set replica");
    wait_available(&mut c, "t").await;
    wait_status(&mut c, "Strata_columnar_replica_builds", 1).await;
    let id: i64 = c
        .query_first("SELECT TABLE_ID FROM information_schema.tiflash_replica WHERE TABLE_NAME = 't'")
        .await
        .expect("id")
        .expect("listed");
    let file = data.join("columnar").join(format!("t{id}.arrow"));
    let deadline = Instant::now() + Duration::from_secs(30);
    while !file.exists() {
        assert!(Instant::now() < deadline, "the replica was not written to {}", file.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Writes after the file was written; then the process dies.
    common::exec(
        &pool,
        &[
            "UPDATE h.t SET v = v * 2, s = 'after' WHERE id % 13 = 0",
            "DELETE FROM h.t WHERE id BETWEEN 1000 AND 1500",
            "INSERT INTO h.t VALUES (300000, 1, 2.50, 'late', '2031-03-03')",
        ],
    )
    .await;
    let (before, row) = both(&mut c).await;
    assert_eq!(before, row);
    drop(c);
    pool.disconnect().await.expect("disconnect");
    server.kill();

    // The restarted server loads the file and catches up; nothing is rebuilt.
    let server = common::StrataProcess::start(&data);
    let pool = server.pool(None);
    let mut c = pool.get_conn().await.expect("connect");
    wait_available(&mut c, "t").await;
    wait_status(&mut c, "Strata_columnar_replica_loads", 1).await;
    assert_eq!(status(&mut c, "Strata_columnar_replica_builds").await, 0, "loaded, not rebuilt");
    let (column, row) = both(&mut c).await;
    assert_eq!(column, row);
    assert_eq!(column, before, "every committed write is in the restarted replica");
    common::exec(&pool, &["UPDATE h.t SET k = k + 1 WHERE id < 500", "DELETE FROM h.t WHERE id = 300000"]).await;
    let (column, row) = both(&mut c).await;
    assert_eq!(column, row);
    assert!(status(&mut c, "Strata_columnar_replica_disk_bytes").await > 0);

    // REPLICA 0 gives the space back.
    c.query_drop("ALTER TABLE h.t SET TIFLASH REPLICA 0").await.expect("drop replica");
    let deadline = Instant::now() + Duration::from_secs(30);
    while file.exists() {
        assert!(Instant::now() < deadline, "REPLICA 0 left {}", file.display());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_status(&mut c, "Strata_columnar_replica_disk_bytes", 0).await;
    wait_status(&mut c, "Strata_columnar_replica_memory_bytes", 0).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_over_the_memory_limit_stays_unavailable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start_with(&dir.path().join("data"), &["--columnar-memory-limit", "16K"], &[]);
    let pool = server.pool(None);
    setup(&pool).await;
    let mut c = pool.get_conn().await.expect("connect");
    c.query_drop("ALTER TABLE h.t SET TIFLASH REPLICA 1").await.expect("set replica");
    // The build gives up; the table is listed, unavailable, and queries read the row store.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (available, count, _) = replica_row(&mut c, "t").await.expect("listed");
    assert_eq!((available, count), (0, 1));
    let before = replica_reads(&mut c).await;
    let column = answer(&mut c, "tikv,tiflash").await;
    assert_eq!(replica_reads(&mut c).await, before, "nothing to read");
    assert_eq!(column, answer(&mut c, "tikv").await);
    assert_eq!(status(&mut c, "Strata_columnar_replica_builds").await, 0);
    assert_eq!(status(&mut c, "Strata_columnar_replica_memory_bytes").await, 0);
    assert_eq!(status(&mut c, "Strata_columnar_replica_delta_versions").await, 0);
}

/// Analytic queries over TPC-C's tables in the style of CH-benCHmark: each must give the same
/// rows on both engines at one snapshot.
const CH_QUERIES: [&str; 4] = [
    "SELECT ol_number, SUM(ol_quantity), SUM(ol_amount), AVG(ol_quantity), AVG(ol_amount), COUNT(*) \
     FROM order_line WHERE ol_delivery_d > '2007-01-02 00:00:00' GROUP BY ol_number ORDER BY ol_number",
    "SELECT o_ol_cnt, COUNT(*), SUM(CASE WHEN o_carrier_id IS NULL THEN 1 ELSE 0 END) \
     FROM orders WHERE o_entry_d >= '2000-01-01' GROUP BY o_ol_cnt ORDER BY o_ol_cnt",
    "SELECT c_credit, c_d_id, COUNT(*), SUM(c_balance), SUM(c_ytd_payment), MAX(c_payment_cnt) \
     FROM customer WHERE c_w_id = 1 GROUP BY c_credit, c_d_id ORDER BY c_credit, c_d_id",
    "SELECT d.d_id, d.d_next_o_id, COUNT(n.no_o_id), MIN(n.no_o_id), MAX(n.no_o_id) \
     FROM district d LEFT JOIN new_order n ON n.no_w_id = d.d_w_id AND n.no_d_id = d.d_id \
     GROUP BY d.d_id, d.d_next_o_id ORDER BY d.d_id",
];

/// TPC-C's consistency conditions 1–4 as queries that return the districts (or warehouses)
/// breaking them: every snapshot must return none, whichever engine reads it.
const CONSISTENCY: [&str; 4] = [
    "SELECT w_id FROM warehouse WHERE w_ytd <> (SELECT SUM(d_ytd) FROM district WHERE d_w_id = w_id)",
    "SELECT d_id FROM district WHERE d_next_o_id - 1 <> \
     (SELECT MAX(o_id) FROM orders WHERE o_w_id = d_w_id AND o_d_id = d_id)",
    "SELECT no_d_id FROM new_order GROUP BY no_w_id, no_d_id \
     HAVING MAX(no_o_id) - MIN(no_o_id) + 1 <> COUNT(*)",
    "SELECT o_d_id FROM orders GROUP BY o_w_id, o_d_id HAVING SUM(o_ol_cnt) <> \
     (SELECT COUNT(*) FROM order_line WHERE ol_w_id = o_w_id AND ol_d_id = o_d_id)",
];

async fn rows_on(c: &mut Conn, engines: &str, sql: &str) -> Vec<Vec<Option<String>>> {
    c.query_drop(format!("SET SESSION tidb_isolation_read_engines = '{engines}'")).await.expect("set engines");
    common::text_rows(c.query(sql).await.unwrap_or_else(|e| panic!("{sql} on {engines}: {e}")))
}

/// The TPC-C driver (`strata bench tpcc run`) commits New-Order, Payment and Delivery
/// transactions from its own process while analytic queries read the columnar replicas of
/// its tables: inside one transaction each answer equals the row engine's, every snapshot
/// meets TPC-C's consistency conditions on the column engine, and an order the driver had
/// committed (or a write the test committed) before a query starts is in that query's answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpcc_writes_while_analytic_queries_read_the_replicas() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let port = server.port.to_string();
    let bench = |args: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_strata"))
            .args(["bench", "tpcc"])
            .args(args)
            .args(["--host", "127.0.0.1", "--port", &port])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run strata bench")
    };
    let out = bench(&["prepare", "--warehouses", "1", "--threads", "2"]).wait_with_output().expect("prepare");
    assert!(out.status.success(), "prepare: {}", String::from_utf8_lossy(&out.stderr));

    let pool = server.pool(Some("tpcc"));
    let mut c = pool.get_conn().await.expect("connect");
    let tables = ["warehouse", "district", "customer", "orders", "new_order", "order_line"];
    for t in tables {
        c.query_drop(format!("ALTER TABLE {t} SET TIFLASH REPLICA 1")).await.expect("set replica");
    }
    for t in tables {
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            let row: Option<i64> = c
                .query_first(format!(
                    "SELECT AVAILABLE FROM information_schema.tiflash_replica \
                     WHERE TABLE_SCHEMA = 'tpcc' AND TABLE_NAME = '{t}'"
                ))
                .await
                .expect("tiflash_replica");
            if row == Some(1) {
                break;
            }
            assert!(Instant::now() < deadline, "the replica of {t} never became available");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    // EXPLAIN shows the column engine's plan and that it reads the replica.
    let plan: Vec<String> = c.query(format!("EXPLAIN {}", CH_QUERIES[0])).await.expect("explain");
    assert_eq!(plan[0], "ColumnEngine (DataFusion)", "{plan:#?}");
    assert!(plan.iter().any(|l| l == "t0: table:order_line columnar replica"), "{plan:#?}");

    let json = dir.path().join("run.json");
    let json_arg = json.to_string_lossy().into_owned();
    let driver = bench(&["run", "--threads", "2", "--time", "25s", "--interval", "5s", "--json", &json_arg]);
    let driver = tokio::task::spawn_blocking(move || driver.wait_with_output());

    let mut other = pool.get_conn().await.expect("connect");
    let started = Instant::now();
    let (mut compared, mut marker) = (0usize, 0i64);
    while started.elapsed() < Duration::from_secs(22) {
        // Same snapshot, same answer.
        c.query_drop("BEGIN").await.expect("begin");
        let sql = CH_QUERIES[compared % CH_QUERIES.len()];
        let before = replica_reads(&mut c).await;
        let column = rows_on(&mut c, "tiflash", sql).await;
        assert!(replica_reads(&mut c).await > before, "{sql} read the replicas");
        let row = rows_on(&mut c, "tikv", sql).await;
        assert_eq!(column, row, "{sql}");
        c.query_drop("COMMIT").await.expect("commit");
        compared += 1;

        // Every snapshot is consistent on the column engine.
        for check in CONSISTENCY {
            let before = replica_reads(&mut c).await;
            let broken = rows_on(&mut c, "tiflash", check).await;
            assert!(broken.is_empty(), "{check} found {broken:?} while the driver runs");
            assert!(replica_reads(&mut c).await > before, "{check} read the replicas");
        }

        // Fresh: the orders the driver committed before the query began are in its answer,
        // and so is a write this test committed on another connection just before.
        let next: Vec<(i64, i64)> =
            other.query("SELECT d_id, d_next_o_id FROM district WHERE d_w_id = 1 ORDER BY d_id").await.expect("next");
        marker += 1;
        other
            .query_drop(format!("UPDATE warehouse SET w_street_2 = 'mark {marker}' WHERE w_id = 1"))
            .await
            .expect("mark");
        let before = replica_reads(&mut c).await;
        let newest = rows_on(
            &mut c,
            "tiflash",
            "SELECT o_d_id, MAX(o_id), MAX(w_street_2) FROM orders JOIN warehouse ON w_id = o_w_id \
             GROUP BY o_d_id ORDER BY o_d_id",
        )
        .await;
        assert!(replica_reads(&mut c).await > before, "the freshness query read the replicas");
        assert_eq!(newest.len(), next.len());
        for (row, (d, next_o_id)) in newest.iter().zip(&next) {
            assert_eq!(row[0].as_deref(), Some(d.to_string().as_str()));
            let max: i64 = row[1].as_deref().and_then(|v| v.parse().ok()).expect("max o_id");
            assert!(
                max >= next_o_id - 1,
                "district {d}: orders up to {} were committed, the replica shows {max}",
                next_o_id - 1
            );
            assert_eq!(row[2].as_deref(), Some(format!("mark {marker}").as_str()));
        }
    }
    c.query_drop("SET SESSION tidb_isolation_read_engines = 'tikv,tiflash,tidb'").await.expect("reset");

    let out = driver.await.expect("join").expect("driver");
    assert!(out.status.success(), "run: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("valid json");
    let new_orders = report["kinds"]["NEW_ORDER"]["count"].as_u64().unwrap_or(0);
    assert!(new_orders > 20 && compared >= 4, "{new_orders} New-Orders committed, {compared} answers compared");
    for kind in ["NEW_ORDER", "PAYMENT", "DELIVERY"] {
        assert_eq!(report["kinds"][kind]["errors"].as_u64(), Some(0), "{kind}: {}", report["errors"]);
    }
    // After the run both engines still agree on the consistency conditions' inputs.
    for sql in CH_QUERIES {
        assert_eq!(rows_on(&mut c, "tiflash", sql).await, rows_on(&mut c, "tikv", sql).await, "{sql}");
    }
}

/// With statistics, the cost model picks the engine per query: a selective join that
/// index lookups answer stays on the row engine even though both tables have replicas (its
/// driving full scan reads the replica, filtered vectorized, then the row engine looks up
/// the few matches by index); an aggregate over the whole large table goes to the column
/// engine. EXPLAIN shows the estimates, and both answers equal the other engine's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cost_model_picks_the_engine_per_query() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let pool = server.pool(None);
    common::exec(
        &pool,
        &[
            "CREATE DATABASE h",
            "CREATE TABLE h.big (id INT PRIMARY KEY, grp INT NOT NULL, v INT, KEY idx_grp (grp))",
            "CREATE TABLE h.small (id INT PRIMARY KEY, tag VARCHAR(10))",
        ],
    )
    .await;
    let mut c = pool.get_conn().await.expect("connect");
    for start in (0..20_000).step_by(5_000) {
        let small: Vec<String> = (start..start + 5_000).map(|i| format!("({i}, 't{i}')")).collect();
        c.query_drop(format!("INSERT INTO h.small VALUES {}", small.join(","))).await.expect("small");
    }
    for start in (0..100_000).step_by(5_000) {
        let rows: Vec<String> = (start..start + 5_000).map(|i| format!("({i}, {}, {})", i % 5_000, i % 37)).collect();
        c.query_drop(format!("INSERT INTO h.big VALUES {}", rows.join(","))).await.expect("big");
    }
    for t in ["big", "small"] {
        c.query_drop(format!("ALTER TABLE h.{t} SET TIFLASH REPLICA 1")).await.expect("replica");
        wait_available(&mut c, t).await;
        c.query_drop(format!("ANALYZE TABLE h.{t}")).await.expect("analyze");
    }

    let lookup = "SELECT COUNT(*), SUM(b.v) FROM h.small s JOIN h.big b ON b.grp = s.id WHERE s.tag = 't7'";
    let scan = "SELECT grp % 10 AS g, COUNT(*), SUM(v) FROM h.big GROUP BY g ORDER BY g";
    for (sql, column) in [(lookup, false), (scan, true)] {
        let plan: Vec<String> = c.query(format!("EXPLAIN {sql}")).await.expect("explain");
        let choice = plan.last().expect("a plan");
        assert!(choice.starts_with("Engine choice: estimated row engine"), "{plan:#?}");
        assert_eq!(plan[0] == "ColumnEngine (DataFusion)", column, "{plan:#?}");
        if !column {
            assert!(plan.iter().any(|l| l == "Scans reading columnar replicas: small"), "{plan:#?}");
            assert!(plan.iter().any(|l| l.contains("IndexLookUp index:idx_grp")), "{plan:#?}");
        }
        let before = replica_reads(&mut c).await;
        let chosen = common::text_rows(c.query(sql).await.expect("query"));
        assert!(replica_reads(&mut c).await > before, "{sql} read a replica: {plan:#?}");
        assert_eq!(chosen, rows_on(&mut c, "tiflash", sql).await, "{sql}");
        assert_eq!(chosen, rows_on(&mut c, "tikv", sql).await, "{sql}");
        c.query_drop("SET SESSION tidb_isolation_read_engines = 'tikv,tiflash,tidb'").await.expect("reset");
    }

    // The replica-backed scan sees the transaction's own uncommitted writes.
    c.query_drop("BEGIN").await.expect("begin");
    c.query_drop("UPDATE h.small SET tag = 't7' WHERE id IN (19998, 19999)").await.expect("own update");
    c.query_drop("DELETE FROM h.small WHERE id = 7").await.expect("own delete");
    let before = replica_reads(&mut c).await;
    let mine = common::text_rows(c.query(lookup).await.expect("query"));
    assert!(replica_reads(&mut c).await > before, "read the replica");
    assert_eq!(mine, rows_on(&mut c, "tikv", lookup).await);
    c.query_drop("ROLLBACK").await.expect("rollback");
    c.query_drop("SET SESSION tidb_isolation_read_engines = 'tikv,tiflash,tidb'").await.expect("reset");
    let after = common::text_rows(c.query(lookup).await.expect("query"));
    assert_ne!(mine, after, "the rolled-back writes were seen inside the transaction");
}
