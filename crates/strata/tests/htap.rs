//! Columnar replicas against a Strata server started by the test: `ALTER TABLE .. SET
//! TIFLASH REPLICA` builds one (information_schema.TIFLASH_REPLICA shows it become
//! available), analytic queries then read it by default, and every answer equals the row
//! engine's at the same snapshot — after writes, inside a transaction with its own
//! uncommitted writes, under a snapshot older than later commits, and while transfers keep
//! committing (which must never change the total). `REPLICA 0` drops it; an ALTER that
//! changes the columns rebuilds it. A replica written to disk survives a crash: the
//! restarted server loads it and catches up with the writes since, without a rebuild.

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
