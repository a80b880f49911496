//! Cached tables (`ALTER TABLE t CACHE`) against a real server: reads are answered from
//! memory (`Strata_cached_table_reads` counts them) with the same rows as the store, DDL
//! is refused while a table is cached (8242), every read sees every write committed
//! before it while writers keep committing, a REPEATABLE READ transaction keeps its
//! snapshot and sees its own writes, and the setting survives a restart.

mod common;

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

fn code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

async fn status(c: &mut Conn, name: &str) -> u64 {
    let rows: Vec<(String, String)> = c.query(format!("SHOW GLOBAL STATUS LIKE '{name}'")).await.expect("status");
    rows.first().and_then(|(_, v)| v.parse().ok()).unwrap_or_else(|| panic!("{name} in SHOW STATUS"))
}

async fn rate(c: &mut Conn, id: i64) -> i64 {
    c.query_first(format!("SELECT rate FROM branch WHERE id = {id}")).await.expect("select").expect("row")
}

/// Runs `query` until a read is answered from the cache (the copy loads in the background
/// after the first read finds none); returns its answer.
async fn until_cached(c: &mut Conn, query: &str) -> Vec<(i64, String, i64)> {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let before = status(c, "Strata_cached_table_reads").await;
        let rows: Vec<(i64, String, i64)> = c.query(query).await.expect("query");
        if status(c, "Strata_cached_table_reads").await > before {
            return rows;
        }
        assert!(Instant::now() < deadline, "no read of `{query}` was answered from the cache");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_tables_answer_from_memory_and_never_miss_a_write() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut server = common::StrataProcess::start(&data);
    let admin = server.pool(None);
    common::exec(
        &admin,
        &[
            "CREATE DATABASE bank",
            "CREATE TABLE bank.branch (id INT PRIMARY KEY, name VARCHAR(20), rate INT, KEY name_idx (name))",
        ],
    )
    .await;
    let pool = server.pool(Some("bank"));
    let mut c = pool.get_conn().await.expect("conn");
    let values: Vec<String> = (1..=100).map(|i| format!("({i}, 'b{i}', {})", i * 10)).collect();
    c.query_drop(format!("INSERT INTO branch VALUES {}", values.join(","))).await.expect("insert");

    // Answers from the store, to compare with.
    let queries = [
        "SELECT id, name, rate FROM branch WHERE id = 7",
        "SELECT id, name, rate FROM branch WHERE id BETWEEN 20 AND 24 ORDER BY id",
        "SELECT id, name, rate FROM branch WHERE name = 'b42'",
        "SELECT COUNT(*), 'all', CAST(SUM(rate) AS SIGNED) FROM branch",
    ];
    let mut from_store = Vec::new();
    for q in queries {
        from_store.push(c.query::<(i64, String, i64), _>(q).await.expect("query"));
    }
    assert_eq!(from_store[3], vec![(100, "all".to_string(), 50_500)]);

    let err = c.query_drop("ALTER TABLE nosuch CACHE").await.expect_err("no table");
    assert_eq!(code(&err), Some(1146));
    c.query_drop("ALTER TABLE branch CACHE").await.expect("cache");
    let (_, create): (String, String) = c.query_first("SHOW CREATE TABLE branch").await.expect("show").expect("row");
    assert!(create.ends_with(" /* CACHED ON */"), "{create}");
    for (q, want) in queries.iter().zip(&from_store) {
        assert_eq!(&until_cached(&mut c, q).await, want, "{q} from the cache");
    }
    assert!(status(&mut c, "Strata_cached_table_loads").await >= 1);

    // DDL waits for NOCACHE.
    for ddl in [
        "ALTER TABLE branch ADD COLUMN x INT",
        "CREATE INDEX r ON branch (rate)",
        "DROP INDEX name_idx ON branch",
        "TRUNCATE TABLE branch",
        "DROP TABLE branch",
    ] {
        let err = c.query_drop(ddl).await.expect_err(ddl);
        assert_eq!(code(&err), Some(8242), "{ddl}: {err}");
    }

    // A transaction sees its own writes (read from the store), and a snapshot stays one.
    c.query_drop("BEGIN").await.expect("begin");
    c.query_drop("UPDATE branch SET rate = 999 WHERE id = 2").await.expect("update");
    assert_eq!(rate(&mut c, 2).await, 999);
    c.query_drop("ROLLBACK").await.expect("rollback");
    assert_eq!(rate(&mut c, 2).await, 20);
    let mut other = pool.get_conn().await.expect("conn");
    c.query_drop("BEGIN").await.expect("begin");
    assert_eq!(rate(&mut c, 3).await, 30);
    other.query_drop("UPDATE branch SET rate = 31 WHERE id = 3").await.expect("update");
    assert_eq!(rate(&mut c, 3).await, 30, "REPEATABLE READ must keep its snapshot");
    c.query_drop("COMMIT").await.expect("commit");
    assert_eq!(rate(&mut c, 3).await, 31, "a committed write was missed");
    until_cached(&mut c, "SELECT id, name, rate FROM branch WHERE id = 3").await;

    // Writers keep committing; every read sees at least what was committed before it.
    let committed = Arc::new(AtomicI64::new(10));
    let done = Arc::new(AtomicBool::new(false));
    let writer = {
        let (committed, done, pool) = (committed.clone(), done.clone(), pool.clone());
        tokio::spawn(async move {
            let mut w = pool.get_conn().await.expect("conn");
            for v in 11..=150 {
                w.query_drop(format!("UPDATE branch SET rate = {v} WHERE id = 1")).await.expect("update");
                committed.store(v, Ordering::SeqCst);
                if v % 20 == 0 {
                    // Pauses let copies load between writes.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
            }
            done.store(true, Ordering::SeqCst);
        })
    };
    let before = status(&mut c, "Strata_cached_table_reads").await;
    let mut reads = 0;
    while !done.load(Ordering::SeqCst) {
        let floor = committed.load(Ordering::SeqCst);
        let seen = rate(&mut other, 1).await;
        assert!(seen >= floor, "read rate {seen} after {floor} was committed");
        let total: i64 = other
            .query_first("SELECT CAST(SUM(rate) AS SIGNED) FROM branch WHERE id <= 3")
            .await
            .expect("sum")
            .expect("row");
        assert!(total >= floor + 20 + 31, "sum {total} misses a committed write ({floor})");
        reads += 1;
    }
    writer.await.expect("writer");
    assert!(reads > 10, "only {reads} reads");
    assert_eq!(rate(&mut other, 1).await, 150);
    let during = status(&mut c, "Strata_cached_table_reads").await - before;
    eprintln!("{reads} read rounds while writing, {during} of their reads from the cache");

    // The setting survives a restart; NOCACHE lets DDL run.
    drop(c);
    drop(other);
    pool.disconnect().await.expect("disconnect");
    admin.disconnect().await.expect("disconnect");
    server.stop();
    let server = common::StrataProcess::start(&data);
    let pool = server.pool(Some("bank"));
    let mut c = pool.get_conn().await.expect("conn");
    let rows = until_cached(&mut c, "SELECT id, name, rate FROM branch WHERE id = 1").await;
    assert_eq!(rows, vec![(1, "b1".to_string(), 150)]);
    c.query_drop("ALTER TABLE branch NOCACHE").await.expect("nocache");
    let (_, create): (String, String) = c.query_first("SHOW CREATE TABLE branch").await.expect("show").expect("row");
    assert!(!create.contains("CACHED ON"), "{create}");
    c.query_drop("ALTER TABLE branch ADD COLUMN x INT").await.expect("DDL after NOCACHE");
    let before = status(&mut c, "Strata_cached_table_reads").await;
    assert_eq!(rate(&mut c, 7).await, 70);
    assert_eq!(status(&mut c, "Strata_cached_table_reads").await, before, "a read after NOCACHE used a copy");
}
