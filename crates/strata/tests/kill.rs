//! `KILL QUERY` and `KILL [CONNECTION]` against a Strata server started by the test: a long
//! join shows in `SHOW PROCESSLIST` and stops with 1317 while other connections keep being
//! served, the killed connection goes on (its transaction keeps the statements before the
//! killed one), `max_execution_time` stops a SELECT with 3024, and a killed connection is
//! closed with its open transaction rolled back and its locks released.

mod common;

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Error, Pool};

fn server_code(e: &Error) -> Option<(u16, String)> {
    match e {
        Error::Server(s) => Some((s.code, s.state.clone())),
        _ => None,
    }
}

/// 20,000 rows: a self join of the table is 400 million pairs, minutes of work.
async fn setup(pool: &Pool) {
    common::exec(pool, &["CREATE DATABASE k", "CREATE TABLE k.t (id INT PRIMARY KEY, v INT)"]).await;
    let mut c = pool.get_conn().await.expect("connect");
    for start in (0..20_000).step_by(2_000) {
        let values: Vec<String> = (start..start + 2_000).map(|i| format!("({i},{})", i % 100)).collect();
        c.query_drop(format!("INSERT INTO k.t VALUES {}", values.join(","))).await.expect("insert");
    }
}

const LONG: &str = "SELECT count(*) FROM k.t a, k.t b WHERE a.v + b.v < 0";

/// Runs the long join on `conn` and returns the connection with the result.
fn start_long(mut conn: Conn) -> tokio::task::JoinHandle<(Conn, Result<Option<i64>, Error>)> {
    tokio::spawn(async move {
        let r = conn.query_first::<i64, _>(LONG).await;
        (conn, r)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_query_and_kill_connection() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let pool = server.pool(None);
    setup(&pool).await;
    let mut admin = pool.get_conn().await.expect("connect");

    // A statement in an explicit transaction, then the long one, killed.
    let mut victim = pool.get_conn().await.expect("connect");
    let victim_id = victim.id();
    victim.query_drop("BEGIN").await.expect("begin");
    victim.query_drop("INSERT INTO k.t VALUES (-1, 7)").await.expect("insert");
    let long = start_long(victim);
    tokio::time::sleep(Duration::from_millis(300)).await;
    // The long join does not hold up other connections.
    let one: Option<i64> = admin.query_first("SELECT 1").await.expect("served while the join runs");
    assert_eq!(one, Some(1));
    assert!(!long.is_finished(), "the join should take minutes");
    // SHOW PROCESSLIST shows it, with the id to kill, and the caller's own statement.
    let rows: Vec<mysql_async::Row> = admin.query("SHOW FULL PROCESSLIST").await.expect("processlist");
    let row_of = |id: u32| {
        rows.iter().find(|r| r.get::<i64, _>(0) == Some(i64::from(id))).unwrap_or_else(|| panic!("no row for {id}"))
    };
    let victim_row = row_of(victim_id);
    assert_eq!(victim_row.get::<String, _>("Command").as_deref(), Some("Query"));
    assert_eq!(victim_row.get::<String, _>("Info").as_deref(), Some(LONG));
    assert!(victim_row.get::<String, _>("Host").is_some_and(|h| h.starts_with("127.0.0.1:")));
    assert_eq!(victim_row.get::<String, _>("User").as_deref(), Some("root"));
    let admin_row = row_of(admin.id());
    assert_eq!(admin_row.get::<String, _>("Info").as_deref(), Some("SHOW FULL PROCESSLIST"));
    // KILL QUERY; repeated in case it landed before the statement began (a kill between
    // statements is dropped, as in MySQL).
    let deadline = Instant::now() + Duration::from_secs(60);
    while !long.is_finished() {
        assert!(Instant::now() < deadline, "KILL QUERY did not stop the join");
        admin.query_drop(format!("KILL QUERY {victim_id}")).await.expect("kill query");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (mut victim, r) = long.await.expect("task");
    let e = r.expect_err("the join was killed");
    assert_eq!(server_code(&e), Some((1317, "70100".into())), "{e}");
    // The connection and its transaction go on; the insert before the killed statement stays.
    victim.query_drop("INSERT INTO k.t VALUES (-2, 7)").await.expect("insert after kill");
    victim.query_drop("COMMIT").await.expect("commit");
    let n: Option<i64> = admin.query_first("SELECT count(*) FROM k.t WHERE id < 0").await.expect("count");
    assert_eq!(n, Some(2));

    // Killing one's own query fails the KILL itself; unknown ids are 1094.
    let e = victim.query_drop(format!("KILL QUERY {victim_id}")).await.expect_err("self kill");
    assert_eq!(server_code(&e), Some((1317, "70100".into())), "{e}");
    let one: Option<i64> = victim.query_first("SELECT 1").await.expect("the next statement runs");
    assert_eq!(one, Some(1));
    let e = admin.query_drop("KILL 4000000").await.expect_err("unknown id");
    assert_eq!(server_code(&e), Some((1094, "HY000".into())), "{e}");
    assert!(e.to_string().contains("Unknown thread id: 4000000"), "{e}");

    // max_execution_time (ms) stops a SELECT with 3024, and only SELECTs.
    victim.query_drop("SET SESSION max_execution_time = 300").await.expect("set");
    let started = Instant::now();
    let e = victim.query_drop(LONG).await.expect_err("over the time limit");
    assert_eq!(server_code(&e), Some((3024, "HY000".into())), "{e}");
    assert!(started.elapsed() < Duration::from_secs(60));
    // EXPLAIN ANALYZE runs the SELECT, so the limit stops it too.
    let e = victim.query_drop(format!("EXPLAIN ANALYZE {LONG}")).await.expect_err("over the time limit");
    assert_eq!(server_code(&e), Some((3024, "HY000".into())), "{e}");
    victim.query_drop("UPDATE k.t SET v = v WHERE id < 10").await.expect("not a SELECT");
    victim.query_drop("SET SESSION max_execution_time = 0").await.expect("set");
    let sleeping = admin.query::<mysql_async::Row, _>("SHOW PROCESSLIST").await.expect("processlist");
    let victim_row = sleeping.iter().find(|r| r.get::<i64, _>(0) == Some(i64::from(victim_id))).expect("victim row");
    assert_eq!(victim_row.get::<String, _>("Command").as_deref(), Some("Sleep"));
    assert_eq!(victim_row.get::<Option<String>, _>("Info"), Some(None));

    // KILL CONNECTION of an idle connection holding a row lock in an open transaction: the
    // connection closes, the transaction rolls back, and the lock is free at once.
    let mut holder = pool.get_conn().await.expect("connect");
    let holder_id = holder.id();
    holder.query_drop("BEGIN").await.expect("begin");
    holder.query_drop("UPDATE k.t SET v = 1000 WHERE id = 5").await.expect("update");
    holder.query_drop("INSERT INTO k.t VALUES (-3, 7)").await.expect("insert");
    admin.query_drop(format!("KILL CONNECTION {holder_id}")).await.expect("kill connection");
    let started = Instant::now();
    admin.query_drop("UPDATE k.t SET v = 2000 WHERE id = 5").await.expect("the lock was released");
    assert!(started.elapsed() < Duration::from_secs(20), "waited for the killed transaction's lock");
    let v: Option<i64> = admin.query_first("SELECT v FROM k.t WHERE id = 5").await.expect("read");
    assert_eq!(v, Some(2000));
    let n: Option<i64> = admin.query_first("SELECT count(*) FROM k.t WHERE id = -3").await.expect("count");
    assert_eq!(n, Some(0), "the killed connection's insert was rolled back");
    assert!(holder.query_drop("SELECT 1").await.is_err(), "the killed connection is closed");

    // KILL QUERY and KILL CONNECTION end a lock wait at once (innodb_lock_wait_timeout is
    // 50 s): the waiter fails with 1317, or its connection closes.
    let mut holder = pool.get_conn().await.expect("connect");
    holder.query_drop("BEGIN").await.expect("begin");
    holder.query_drop("UPDATE k.t SET v = 1 WHERE id = 7").await.expect("lock row 7");
    for kill in ["KILL QUERY", "KILL CONNECTION"] {
        let mut waiter = pool.get_conn().await.expect("connect");
        let waiter_id = waiter.id();
        let wait = tokio::spawn(async move {
            let r = waiter.query_drop("UPDATE k.t SET v = 2 WHERE id = 7").await;
            (waiter, r)
        });
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert!(!wait.is_finished(), "the waiter waits for the lock");
        let started = Instant::now();
        admin.query_drop(format!("{kill} {waiter_id}")).await.expect("kill");
        let (mut waiter, r) = tokio::time::timeout(Duration::from_secs(5), wait).await.expect("woken").expect("task");
        assert!(started.elapsed() < Duration::from_secs(1), "{kill} took {:?}", started.elapsed());
        let e = r.expect_err("the waiting statement fails");
        if kill == "KILL QUERY" {
            assert_eq!(server_code(&e), Some((1317, "70100".into())), "{e}");
            waiter.query_drop("SELECT 1").await.expect("the connection goes on");
        } else {
            assert!(waiter.query_drop("SELECT 1").await.is_err(), "the killed connection is closed");
        }
    }
    holder.query_drop("COMMIT").await.expect("commit");
    let v: Option<i64> = admin.query_first("SELECT v FROM k.t WHERE id = 7").await.expect("read");
    assert_eq!(v, Some(1));

    // A connection idle past wait_timeout is closed, with its transaction rolled back and
    // its locks released.
    let mut idle = pool.get_conn().await.expect("connect");
    idle.query_drop("SET SESSION wait_timeout = 1").await.expect("set wait_timeout");
    idle.query_drop("BEGIN").await.expect("begin");
    idle.query_drop("UPDATE k.t SET v = 3000 WHERE id = 6").await.expect("update");
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let started = Instant::now();
    admin.query_drop("UPDATE k.t SET v = 4000 WHERE id = 6").await.expect("the idle lock was released");
    assert!(started.elapsed() < Duration::from_secs(5), "waited for the idle transaction's lock");
    let v: Option<i64> = admin.query_first("SELECT v FROM k.t WHERE id = 6").await.expect("read");
    assert_eq!(v, Some(4000));
    let e = idle.query_drop("SELECT 1").await.expect_err("the idle connection is closed");
    assert!(matches!(server_code(&e), Some((4031, _)) | None), "{e}");

    // KILL (CONNECTION) of a running statement: it stops and the connection closes.
    let busy = pool.get_conn().await.expect("connect");
    let busy_id = busy.id();
    let long = start_long(busy);
    tokio::time::sleep(Duration::from_millis(300)).await;
    admin.query_drop(format!("KILL {busy_id}")).await.expect("kill");
    let (mut busy, r) = tokio::time::timeout(Duration::from_secs(60), long).await.expect("stopped").expect("task");
    assert!(r.is_err(), "the statement of a killed connection fails");
    assert!(busy.query_drop("SELECT 1").await.is_err(), "the killed connection is closed");
    let _ = busy.disconnect().await;
    drop(pool);
}
