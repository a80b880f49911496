//! Online schema change: ADD INDEX / CREATE UNIQUE INDEX while other sessions keep
//! inserting, updating and deleting, in autocommit statements and explicit transactions.
//! Afterwards every index must hold exactly the entries its rows imply (ADMIN CHECK TABLE)
//! and reads through the new index must return the same rows as a full scan.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql_async::prelude::Queryable;
use rand::Rng;

const ROWS: i64 = 20_000;

fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

async fn writer(pool: mysql_async::Pool, stop: Arc<AtomicBool>, ops: Arc<AtomicU64>, seed: u64) {
    let mut conn = pool.get_conn().await.expect("connect");
    let mut next_id = ROWS + 1_000_000 * (seed as i64 + 1);
    while !stop.load(Ordering::Relaxed) {
        let (op, id, k) = {
            let mut rng = rand::thread_rng();
            (rng.gen_range(0..4), rng.gen_range(1..=ROWS), rng.gen_range(0..1000))
        };
        let r = match op {
            0 => {
                next_id += 1;
                conn.exec_drop("INSERT INTO t (id, k, u, v) VALUES (?, ?, ?, 'new')", (next_id, k, next_id)).await
            }
            1 => conn.exec_drop("UPDATE t SET k = ?, v = 'upd' WHERE id = ?", (k, id)).await,
            2 => conn.exec_drop("DELETE FROM t WHERE id = ?", (id,)).await,
            _ => {
                // An explicit transaction spanning the schema change: it may fail at COMMIT
                // with 8028 (the client retries, as a TiDB client does). It writes rows the
                // backfill reaches first and stays open long enough for the backfill to pass
                // them, so a commit under the old schema would leave stale index entries.
                let id = id % 2_000 + 1;
                let txn = async {
                    conn.query_drop("BEGIN").await?;
                    conn.exec_drop("UPDATE t SET k = k + 1 WHERE id = ?", (id,)).await?;
                    // Negative ids sort first: the backfill passes them at once.
                    next_id += 1;
                    conn.exec_drop("INSERT INTO t (id, k, u) VALUES (?, ?, ?)", (-next_id, k, -next_id)).await?;
                    tokio::time::sleep(Duration::from_millis(150)).await;
                    conn.query_drop("COMMIT").await
                };
                let r = txn.await;
                if r.is_err() {
                    let _ = conn.query_drop("ROLLBACK").await;
                }
                r
            }
        };
        match r {
            Ok(()) => {
                ops.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) if matches!(server_code(&e), Some(8028 | 1205 | 1213 | 1062)) => {}
            Err(e) => panic!("writer: {e}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn add_index_while_writes_continue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(dir.path());
    let admin = server.pool(None);
    common::exec(&admin, &["CREATE DATABASE od"]).await;
    let pool = server.pool(Some("od"));
    common::exec(&pool, &["CREATE TABLE t (id INT PRIMARY KEY, k INT NOT NULL, u INT, v VARCHAR(20))"]).await;
    let mut conn = pool.get_conn().await.expect("connect");
    for chunk in 0..(ROWS / 1000) {
        let values: Vec<String> =
            (chunk * 1000 + 1..=chunk * 1000 + 1000).map(|i| format!("({i}, {}, {i}, 'v{i}')", i % 1000)).collect();
        conn.query_drop(format!("INSERT INTO t VALUES {}", values.join(","))).await.expect("load");
    }

    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..4).map(|i| tokio::spawn(writer(pool.clone(), stop.clone(), ops.clone(), i))).collect();
    tokio::time::sleep(Duration::from_millis(500)).await;

    let before = ops.load(Ordering::Relaxed);
    conn.query_drop("ALTER TABLE t ADD INDEX idx_k (k)").await.expect("add index");
    conn.query_drop("CREATE UNIQUE INDEX uk_u ON t (u)").await.expect("add unique index");
    let during = ops.load(Ordering::Relaxed) - before;
    tokio::time::sleep(Duration::from_millis(500)).await;
    stop.store(true, Ordering::Relaxed);
    for w in writers {
        w.await.expect("writer task");
    }
    assert!(during > 0, "no write committed while the indexes were built");

    conn.query_drop("ADMIN CHECK TABLE t").await.expect("indexes consistent with rows");

    let plan: Vec<String> = conn.query("EXPLAIN SELECT id FROM t WHERE k >= 0").await.expect("explain");
    assert!(plan.iter().any(|l| l.contains("idx_k")), "range on k does not use the new index: {plan:?}");
    let by_index: Vec<(i64, i64)> =
        conn.query("SELECT id, k FROM t WHERE k >= 0 ORDER BY id").await.expect("index read");
    let by_scan: Vec<(i64, i64)> = conn.query("SELECT id, k FROM t ORDER BY id").await.expect("scan");
    assert_eq!(by_index.len(), by_scan.len(), "index read and full scan disagree");
    assert!(by_index == by_scan, "index read and full scan return different rows");
    let by_unique: Vec<(i64,)> = conn.query("SELECT id FROM t WHERE u = 777").await.expect("unique read");
    let expect: Vec<(i64,)> = by_scan.iter().filter(|(id, _)| *id == 777).map(|(id, _)| (*id,)).collect();
    assert_eq!(by_unique, expect);

    // Duplicates (k repeats) make CREATE UNIQUE INDEX fail and leave no trace of the index.
    let err = conn.query_drop("CREATE UNIQUE INDEX uk_bad ON t (k)").await.expect_err("duplicate must fail");
    assert_eq!(server_code(&err), Some(1062), "{err}");
    let idx: Vec<mysql_async::Row> = conn.query("SHOW INDEX FROM t").await.expect("show index");
    assert!(!idx.iter().any(|r| r.get::<String, _>(2).as_deref() == Some("uk_bad")), "failed index left behind");
    conn.query_drop("ADMIN CHECK TABLE t").await.expect("consistent after the failed index");
}

/// A table rebuild (MODIFY COLUMN, ADD COLUMN ... FIRST) while other sessions insert and
/// increment: every write a client saw succeed is in the rebuilt table, none twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rebuild_keeps_every_acknowledged_write() {
    const BASE: i64 = 3_000;
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(dir.path());
    common::exec(&server.pool(None), &["CREATE DATABASE rb"]).await;
    let pool = server.pool(Some("rb"));
    common::exec(&pool, &["CREATE TABLE t (id INT PRIMARY KEY, n INT NOT NULL, tag VARCHAR(10), KEY kn (n))"]).await;
    let mut conn = pool.get_conn().await.expect("connect");
    let values: Vec<String> = (1..=BASE).map(|i| format!("({i}, 0, 'v')")).collect();
    conn.query_drop(format!("INSERT INTO t VALUES {}", values.join(","))).await.expect("load");

    let stop = Arc::new(AtomicBool::new(false));
    let increments = Arc::new(AtomicU64::new(0));
    let inserted = Arc::new(collected::Ids::default());
    let mut tasks = Vec::new();
    for w in 0..3i64 {
        let (pool, stop, increments, inserted) = (pool.clone(), stop.clone(), increments.clone(), inserted.clone());
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.get_conn().await.expect("connect");
            let mut next = 1_000_000 * (w + 1);
            while !stop.load(Ordering::Relaxed) {
                let id = rand::thread_rng().gen_range(1..=BASE);
                if rand::thread_rng().gen_bool(0.5) {
                    next += 1;
                    match conn.exec_drop("INSERT INTO t (id, n, tag) VALUES (?, 0, 'w')", (next,)).await {
                        Ok(()) => inserted.push(next),
                        Err(e) if matches!(server_code(&e), Some(8028 | 1205)) => {}
                        Err(e) => panic!("insert: {e}"),
                    }
                } else {
                    match conn.exec_drop("UPDATE t SET n = n + 1 WHERE id = ?", (id,)).await {
                        Ok(()) => {
                            assert_eq!(conn.affected_rows(), 1, "row {id} missing");
                            increments.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(e) if matches!(server_code(&e), Some(8028 | 1205 | 1213)) => {}
                        Err(e) => panic!("update: {e}"),
                    }
                }
            }
        }));
    }
    tokio::time::sleep(Duration::from_millis(400)).await;
    conn.query_drop("ALTER TABLE t MODIFY tag VARCHAR(20) NOT NULL DEFAULT ''").await.expect("modify");
    tokio::time::sleep(Duration::from_millis(200)).await;
    conn.query_drop("ALTER TABLE t ADD COLUMN extra INT NOT NULL FIRST").await.expect("add first");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, Ordering::Relaxed);
    for t in tasks {
        t.await.expect("writer task");
    }
    let ids = inserted.take();
    assert!(!ids.is_empty() && increments.load(Ordering::Relaxed) > 0, "writers made no progress");
    let (count, sum): (i64, i64) =
        conn.query_first("SELECT COUNT(*), CAST(SUM(n) AS SIGNED) FROM t").await.expect("totals").expect("row");
    assert_eq!(count, BASE + ids.len() as i64, "rows lost or duplicated by the rebuild");
    assert_eq!(sum, increments.load(Ordering::Relaxed) as i64, "increments lost by the rebuild");
    let present: Vec<i64> = conn.query("SELECT id FROM t WHERE id > 1000000 ORDER BY id").await.expect("new rows");
    let mut want = ids;
    want.sort();
    assert_eq!(present, want);
    let cols: Vec<String> = conn.query("SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = 'rb' AND TABLE_NAME = 't' ORDER BY ORDINAL_POSITION").await.expect("columns");
    assert_eq!(cols, ["extra", "id", "n", "tag"]);
    conn.query_drop("ADMIN CHECK TABLE t").await.expect("indexes consistent after rebuild");
}

mod collected {
    /// Ids collected from several tasks.
    #[derive(Default)]
    pub struct Ids(std::sync::Mutex<Vec<i64>>);

    impl Ids {
        pub fn push(&self, id: i64) {
            self.0.lock().expect("ids").push(id);
        }

        pub fn take(&self) -> Vec<i64> {
            std::mem::take(&mut *self.0.lock().expect("ids"))
        }
    }
}

/// Index backfills run side by side: while a long CREATE INDEX is backfilling (paused per
/// batch by a failpoint), a CREATE INDEX on another table and a second one on the same
/// table finish; other DDL on the table waits for the backfills and then applies; every
/// index ends public and consistent with its rows.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn index_builds_run_side_by_side() {
    let dir = tempfile::tempdir().expect("tempdir");
    let env = [("STRATA_FAILPOINTS", "1"), ("STRATA_FAILPOINT_PAUSE", "backfill_batch:200")];
    let server = common::StrataProcess::start_with_env(dir.path(), &env);
    common::exec(
        &server.pool(None),
        &[
            "CREATE DATABASE sbs",
            "CREATE TABLE sbs.big (id INT PRIMARY KEY, a INT, b INT)",
            "CREATE TABLE sbs.small (id INT PRIMARY KEY, a INT)",
            "INSERT INTO sbs.small VALUES (1, 10), (2, 20), (3, 30)",
        ],
    )
    .await;
    let pool = server.pool(Some("sbs"));
    let mut conn = pool.get_conn().await.expect("connect");
    for chunk in 0..10i64 {
        let values: Vec<String> =
            (chunk * 1000..chunk * 1000 + 1000).map(|i| format!("({i}, {}, {})", i % 91, i % 37)).collect();
        conn.query_drop(format!("INSERT INTO big VALUES {}", values.join(","))).await.expect("load");
    }

    // Ten 200 ms pauses: each backfill of big takes two seconds or more.
    let build = |sql: &'static str| {
        let pool = pool.clone();
        tokio::spawn(async move {
            pool.get_conn().await?.query_drop(sql).await?;
            Ok::<_, mysql_async::Error>(std::time::Instant::now())
        })
    };
    let long = build("CREATE INDEX ka ON big (a)");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = build("CREATE UNIQUE INDEX ub ON big (id, b)");
    tokio::time::sleep(Duration::from_millis(300)).await;
    conn.query_drop("CREATE INDEX sa ON small (a)").await.expect("index on another table");
    assert!(!long.is_finished(), "CREATE INDEX on another table waited for the running backfill");
    // Other DDL waits for the backfills and then applies to the table as they left it.
    conn.query_drop("ALTER TABLE big ADD COLUMN c INT DEFAULT 7").await.expect("add column");
    // The builds' own OKs may reach their tasks a moment after the ALTER's (it changes no
    // rows); a backfill still running would have hundreds of milliseconds of pauses left.
    let both_done = async {
        while !(long.is_finished() && second.is_finished()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    let done = tokio::time::timeout(Duration::from_millis(100), both_done).await;
    assert!(done.is_ok(), "ALTER TABLE ran during a backfill");
    let long_done = long.await.expect("task").expect("CREATE INDEX ka");
    let second_done = second.await.expect("task").expect("CREATE INDEX ub");
    // One after the other, ub's own two seconds of pauses would come after ka's end.
    let gap = second_done.saturating_duration_since(long_done);
    assert!(gap < Duration::from_millis(1_600), "the second index of a table waited for the first ({gap:?})");

    let names: Vec<mysql_async::Row> = conn.query("SHOW INDEX FROM big").await.expect("show index");
    let mut names: Vec<String> = names.iter().map(|r| r.get::<String, _>(2).expect("Key_name")).collect();
    names.dedup();
    assert_eq!(names, ["PRIMARY", "ka", "ub"]);
    conn.query_drop("ADMIN CHECK TABLE big").await.expect("big consistent");
    conn.query_drop("ADMIN CHECK TABLE small").await.expect("small consistent");
    let plan: Vec<String> = conn.query("EXPLAIN SELECT id FROM big WHERE a = 5").await.expect("explain");
    assert!(plan.iter().any(|l| l.contains("ka")), "ka not public: {plan:?}");
    let n: Option<(i64, i64)> = conn.query_first("SELECT COUNT(*), SUM(c) FROM big WHERE a = 5").await.expect("count");
    let expect = (0..10_000).filter(|i| i % 91 == 5).count() as i64;
    assert_eq!(n, Some((expect, 7 * expect)));
    let s: Vec<i64> = conn.query("SELECT id FROM small WHERE a >= 20 ORDER BY id").await.expect("small");
    assert_eq!(s, [2, 3]);
}
