//! `LOCK TABLES`, `UNLOCK TABLES` and `FLUSH TABLES WITH READ LOCK` over the wire, with
//! MySQL's rules: the holder uses only what it locked (1100) and writes only what it locked
//! for WRITE (1099) or nothing under the global read lock (1223); other sessions wait (1205
//! after lock_wait_timeout) and go on as soon as the locks go, by UNLOCK TABLES,
//! disconnect or START TRANSACTION.

mod common;

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Error};

fn code(e: Error) -> u16 {
    match e {
        Error::Server(s) => s.code,
        other => panic!("expected a server error, got {other}"),
    }
}

async fn fails(c: &mut Conn, sql: &str) -> u16 {
    match c.query_drop(sql).await {
        Ok(()) => panic!("{sql} succeeded"),
        Err(e) => code(e),
    }
}

/// Runs `sql` on `c` in the background.
fn spawn(mut c: Conn, sql: &'static str) -> tokio::task::JoinHandle<(Conn, Result<(), Error>)> {
    tokio::spawn(async move {
        let r = c.query_drop(sql).await;
        (c, r)
    })
}

async fn count(c: &mut Conn, table: &str) -> i64 {
    c.query_first(format!("SELECT COUNT(*) FROM {table}")).await.expect("count").expect("row")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn table_locks_follow_mysql() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let pool = server.pool(Some("l"));
    common::exec(
        &server.pool(None),
        &[
            "CREATE DATABASE l",
            "CREATE TABLE l.t (id INT PRIMARY KEY)",
            "CREATE TABLE l.u (id INT PRIMARY KEY)",
            "INSERT INTO l.t VALUES (1)",
        ],
    )
    .await;
    let mut a = pool.get_conn().await.expect("a");
    let mut b = pool.get_conn().await.expect("b");
    b.query_drop("SET lock_wait_timeout = 1").await.expect("set");

    // WRITE: the holder reads and writes t, nothing else; others wait for t, not for u.
    a.query_drop("LOCK TABLES t WRITE").await.expect("lock write");
    a.query_drop("INSERT INTO t VALUES (2)").await.expect("holder writes");
    assert_eq!(fails(&mut a, "SELECT * FROM u").await, 1100);
    assert_eq!(fails(&mut a, "LOCK TABLES nosuch READ").await, 1146);
    a.query_drop("LOCK TABLES t WRITE").await.expect("lock write again");
    let started = Instant::now();
    assert_eq!(fails(&mut b, "SELECT * FROM t").await, 1205);
    assert!(started.elapsed() >= Duration::from_millis(900), "waited {:?}", started.elapsed());
    b.query_drop("INSERT INTO u VALUES (1)").await.expect("other tables are free");
    b.query_drop("SET lock_wait_timeout = 30").await.expect("set");
    let waiting = spawn(b, "INSERT INTO t VALUES (3)");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the insert must wait for UNLOCK TABLES");
    a.query_drop("UNLOCK TABLES").await.expect("unlock");
    let (mut b, r) = waiting.await.expect("join");
    r.expect("insert after unlock");
    assert_eq!(count(&mut b, "t").await, 3);

    // READ: everyone reads, nobody writes; the holder's disconnect frees the writers.
    a.query_drop("LOCK TABLES t READ, u AS uu READ").await.expect("lock read");
    assert_eq!(fails(&mut a, "INSERT INTO t VALUES (4)").await, 1099);
    assert_eq!(count(&mut a, "t").await, 3);
    assert_eq!(count(&mut b, "t").await, 3);
    b.query_drop("SET lock_wait_timeout = 1").await.expect("set");
    assert_eq!(fails(&mut b, "UPDATE t SET id = id + 10").await, 1205);
    b.query_drop("SET lock_wait_timeout = 30").await.expect("set");
    let waiting = spawn(b, "INSERT INTO t VALUES (4)");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the insert must wait for the READ lock");
    a.disconnect().await.expect("disconnect");
    let (mut b, r) = waiting.await.expect("join");
    r.expect("insert after the holder left");
    assert_eq!(count(&mut b, "t").await, 4);

    // FLUSH TABLES WITH READ LOCK: reads go on, writes wait; the holder cannot write.
    let mut a = pool.get_conn().await.expect("a again");
    a.query_drop("FLUSH TABLES WITH READ LOCK").await.expect("ftwrl");
    assert_eq!(fails(&mut a, "INSERT INTO u VALUES (9)").await, 1223);
    assert_eq!(count(&mut b, "u").await, 1);
    let waiting = spawn(b, "INSERT INTO u VALUES (2)");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "writes wait for the global read lock");
    // START TRANSACTION releases it, as in MySQL.
    a.query_drop("START TRANSACTION").await.expect("begin");
    let (mut b, r) = waiting.await.expect("join");
    r.expect("write after the global read lock went");
    a.query_drop("COMMIT").await.expect("commit");

    // A lock waits for a running statement of another session that uses the table.
    b.query_drop("SET lock_wait_timeout = 1").await.expect("set");
    a.query_drop("SET lock_wait_timeout = 1").await.expect("set");
    b.query_drop("BEGIN").await.expect("begin");
    b.query_drop("INSERT INTO t VALUES (5)").await.expect("insert");
    // Statement-scoped: b's open transaction does not hold the table between statements.
    a.query_drop("LOCK TABLES t WRITE").await.expect("lock while b idles in a transaction");
    assert_eq!(fails(&mut b, "INSERT INTO t VALUES (6)").await, 1205);
    a.query_drop("UNLOCK TABLES").await.expect("unlock");
    b.query_drop("COMMIT").await.expect("commit");
    assert_eq!(count(&mut b, "t").await, 5);
}
