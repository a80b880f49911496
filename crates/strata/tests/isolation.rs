//! Transaction anomaly tests over the MySQL wire, named after the anomaly, asserting what
//! each isolation level promises: no dirty reads anywhere, repeatable reads under
//! REPEATABLE READ (snapshot isolation) but not under READ COMMITTED, no lost updates
//! (pessimistic: the second writer waits and applies on the latest value; optimistic: the
//! second committer fails), write skew allowed under snapshot isolation, and lock waits
//! ending in 1205 and deadlocks in 1213.

mod common;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

async fn setup(server: &common::StrataProcess, db: &str) -> mysql_async::Pool {
    let admin = server.pool(None);
    common::exec(&admin, &[&format!("CREATE DATABASE {db}")]).await;
    let pool = server.pool(Some(db));
    common::exec(&pool, &["CREATE TABLE t (id INT PRIMARY KEY, v INT)", "INSERT INTO t VALUES (1, 1), (2, 2)"]).await;
    pool
}

async fn value(c: &mut Conn, id: i32) -> i64 {
    c.query_first(format!("SELECT v FROM t WHERE id = {id}")).await.expect("select").expect("row exists")
}

fn code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anomalies() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(dir.path());
    anomaly_dirty_read(&server).await;
    anomaly_non_repeatable_read(&server).await;
    anomaly_lost_update_pessimistic(&server).await;
    anomaly_lost_update_optimistic(&server).await;
    anomaly_write_skew_allowed_under_si(&server).await;
    lock_wait_timeout_and_deadlock(&server).await;
    pessimistic_writes_read_the_latest_rows(&server).await;
    schema_changes_do_not_change_a_snapshot(&server).await;
    rc_check_ts_never_misses_a_committed_version(&server).await;
    duplicate_inserts(&server).await;
}

fn message(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => s.message.clone(),
        other => other.to_string(),
    }
}

/// An autocommit INSERT does not lock its new keys: its commit checks they have no value.
/// Duplicates still fail with 1062 naming the key and values, leave nothing behind, and an
/// INSERT of a key another transaction is inserting waits for it: 1062 if it commits, the
/// row if it rolls back. Inside an explicit transaction the keys are locked as before.
async fn duplicate_inserts(server: &common::StrataProcess) {
    let pool = server.pool(None);
    common::exec(
        &pool,
        &[
            "CREATE DATABASE dup",
            "CREATE TABLE dup.t (id INT PRIMARY KEY, u VARCHAR(10), k INT, UNIQUE KEY uk (u), KEY ik (k))",
            "INSERT INTO dup.t VALUES (1, 'a', 1), (2, 'b', 2)",
        ],
    )
    .await;
    let mut a = pool.get_conn().await.expect("conn");
    let mut b = pool.get_conn().await.expect("conn");
    for (sql, want) in [
        ("INSERT INTO dup.t VALUES (3, 'c', 3), (1, 'x', 9)", "Duplicate entry '1' for key 't.PRIMARY'"),
        ("INSERT INTO dup.t VALUES (4, 'b', 4)", "Duplicate entry 'b' for key 't.uk'"),
        ("INSERT INTO dup.t VALUES (5, 'e', 5), (5, 'f', 5)", "Duplicate entry '5' for key 't.PRIMARY'"),
    ] {
        let e = a.query_drop(sql).await.expect_err(sql);
        assert_eq!((code(&e), message(&e)), (Some(1062), want.to_string()), "{sql}");
    }
    let ids: Vec<i32> = a.query("SELECT id FROM dup.t ORDER BY id").await.expect("select");
    assert_eq!(ids, vec![1, 2], "a failed INSERT left rows behind");
    a.query_drop("ADMIN CHECK TABLE dup.t").await.expect("indexes consistent");

    // Another transaction is inserting the key: the autocommit INSERT waits for it.
    for commit in [true, false] {
        a.query_drop("BEGIN").await.expect("begin");
        a.query_drop("INSERT INTO dup.t VALUES (10, 'p', 10)").await.expect("insert");
        let mut b2 = pool.get_conn().await.expect("conn");
        let waiter = tokio::spawn(async move {
            let r = b2.query_drop("INSERT INTO dup.t VALUES (10, 'q', 11)").await;
            (r, b2)
        });
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        assert!(!waiter.is_finished(), "the INSERT did not wait for the other insert of its key");
        a.query_drop(if commit { "COMMIT" } else { "ROLLBACK" }).await.expect("end");
        let (r, _b2) = waiter.await.expect("task");
        let u: Option<String> = b.query_first("SELECT u FROM dup.t WHERE id = 10").await.expect("select");
        if commit {
            let e = r.expect_err("a committed duplicate");
            assert_eq!(code(&e), Some(1062), "{e}");
            assert_eq!(u.as_deref(), Some("p"));
            b.query_drop("DELETE FROM dup.t WHERE id = 10").await.expect("delete");
        } else {
            r.expect("the other insert rolled back");
            assert_eq!(u.as_deref(), Some("q"));
        }
    }

    // A wait for the other transaction's key ends like a lock wait: 1205 after the timeout.
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop("INSERT INTO dup.t VALUES (11, 'r', 0)").await.expect("insert");
    b.query_drop("SET innodb_lock_wait_timeout = 1").await.expect("set");
    let started = std::time::Instant::now();
    let e = b.query_drop("INSERT INTO dup.t VALUES (11, 's', 0)").await.expect_err("times out");
    assert_eq!(code(&e), Some(1205), "{e}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(900), "gave up early");
    a.query_drop("ROLLBACK").await.expect("rollback");

    // In an explicit transaction the duplicate fails the statement, not the commit.
    a.query_drop("BEGIN").await.expect("begin");
    let e = a.query_drop("INSERT INTO dup.t VALUES (2, 'z', 0)").await.expect_err("duplicate");
    assert_eq!(code(&e), Some(1062));
    a.query_drop("INSERT INTO dup.t VALUES (20, 'z', 0)").await.expect("the transaction goes on");
    a.query_drop("COMMIT").await.expect("commit");
    let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM dup.t").await.expect("count");
    assert_eq!(n, Some(4));
    a.query_drop("ADMIN CHECK TABLE dup.t").await.expect("indexes consistent");
}

/// A transaction binds against the schema its snapshot was taken under: a table truncated,
/// rebuilt or dropped after BEGIN still reads as it was at the snapshot (its data is kept
/// until the transaction ends), writes through the old definition fail at commit (8028),
/// and a table created after the snapshot is 1412, as InnoDB answers.
async fn schema_changes_do_not_change_a_snapshot(server: &common::StrataProcess) {
    let pool = setup(server, "schema_snap").await;
    let mut a = pool.get_conn().await.expect("conn");
    let mut b = pool.get_conn().await.expect("conn");
    let count = |c: &'static str| format!("SELECT COUNT(*), COALESCE(SUM(v), 0) FROM {c}");

    // TRUNCATE after the snapshot.
    a.query_drop("BEGIN").await.expect("begin");
    let seen: Option<(i64, i64)> = a.query_first(count("t")).await.expect("read");
    assert_eq!(seen, Some((2, 3)));
    b.query_drop("TRUNCATE TABLE t").await.expect("truncate");
    b.query_drop("INSERT INTO t VALUES (7, 70)").await.expect("insert after truncate");
    let again: Option<(i64, i64)> = a.query_first(count("t")).await.expect("read again");
    assert_eq!(again, seen, "the snapshot still sees the rows from before the TRUNCATE");
    a.query_drop("COMMIT").await.expect("commit");
    let now: Option<(i64, i64)> = a.query_first(count("t")).await.expect("read after");
    assert_eq!(now, Some((1, 70)));

    // A rebuild (column type change) after the snapshot; a write through the old
    // definition cannot commit.
    a.query_drop("BEGIN").await.expect("begin");
    let seen: Option<(i64, i64)> = a.query_first(count("t")).await.expect("read");
    b.query_drop("ALTER TABLE t MODIFY v BIGINT").await.expect("alter");
    b.query_drop("INSERT INTO t VALUES (8, 80)").await.expect("insert after alter");
    let again: Option<(i64, i64)> = a.query_first(count("t")).await.expect("read again");
    assert_eq!(again, seen, "the snapshot reads the table as it was");
    a.query_drop("UPDATE t SET v = v + 1 WHERE id = 7").await.expect("update through the old definition");
    let e = a.query_drop("COMMIT").await.expect_err("stale write must not commit");
    assert_eq!(code(&e), Some(8028), "{e}");
    let now: Option<(i64, i64)> = a.query_first(count("t")).await.expect("read after");
    assert_eq!(now, Some((2, 150)), "nothing of the failed transaction landed");

    // A table created after the snapshot; one dropped after it.
    a.query_drop("BEGIN").await.expect("begin");
    let seen: Option<(i64, i64)> = a.query_first(count("t")).await.expect("read");
    b.query_drop("CREATE TABLE t_new (id INT PRIMARY KEY, v INT)").await.expect("create");
    let e = a.query_drop("SELECT * FROM t_new").await.expect_err("created after the snapshot");
    assert_eq!(code(&e), Some(1412), "{e}");
    b.query_drop("DROP TABLE t").await.expect("drop");
    let again: Option<(i64, i64)> = a.query_first(count("t")).await.expect("read a dropped table");
    assert_eq!(again, seen, "the snapshot still reads the dropped table");
    a.query_drop("COMMIT").await.expect("commit");
    let e = a.query_drop("SELECT * FROM t").await.expect_err("dropped");
    assert_eq!(code(&e), Some(1146), "{e}");
    a.query_drop("SELECT * FROM t_new").await.expect("visible to a new transaction");
}

/// Pessimistic UPDATE, DELETE and SELECT ... FOR UPDATE read the latest committed rows, as
/// InnoDB does: a matching row inserted (or changed) by another transaction after BEGIN is
/// changed, not skipped, while plain SELECTs keep reading the snapshot.
async fn pessimistic_writes_read_the_latest_rows(server: &common::StrataProcess) {
    let pool = setup(server, "current_read").await;
    let mut a = pool.get_conn().await.expect("conn");
    let mut b = pool.get_conn().await.expect("conn");
    a.query_drop("BEGIN").await.expect("begin");
    let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM t").await.expect("snapshot");
    assert_eq!(n, Some(2));
    b.query_drop("INSERT INTO t VALUES (3, 3)").await.expect("b inserts after a began");
    b.query_drop("UPDATE t SET v = 20 WHERE id = 2").await.expect("b updates after a began");
    // The snapshot does not see them...
    let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM t WHERE v >= 2").await.expect("snapshot");
    assert_eq!(n, Some(1));
    // ...a locking read does.
    let locked: Vec<(i64, i64)> = a.query("SELECT id, v FROM t WHERE v >= 2 FOR UPDATE").await.expect("for update");
    assert_eq!(locked, vec![(2, 20), (3, 3)]);
    a.query_drop("UPDATE t SET v = v + 1 WHERE v >= 2").await.expect("update");
    assert_eq!(a.affected_rows(), 2, "the row inserted after BEGIN is updated too");
    a.query_drop("COMMIT").await.expect("commit");
    let rows: Vec<(i64, i64)> = a.query("SELECT id, v FROM t ORDER BY id").await.expect("after");
    assert_eq!(rows, vec![(1, 1), (2, 21), (3, 4)]);
    // DELETE too.
    a.query_drop("BEGIN").await.expect("begin");
    let _: Option<i64> = a.query_first("SELECT COUNT(*) FROM t").await.expect("snapshot");
    b.query_drop("INSERT INTO t VALUES (4, 100)").await.expect("b inserts");
    a.query_drop("DELETE FROM t WHERE v >= 100").await.expect("delete");
    assert_eq!(a.affected_rows(), 1);
    a.query_drop("COMMIT").await.expect("commit");
    let n: Option<i64> = a.query_first("SELECT COUNT(*) FROM t").await.expect("count");
    assert_eq!(n, Some(3));
}

async fn anomaly_dirty_read(server: &common::StrataProcess) {
    for level in ["REPEATABLE READ", "READ COMMITTED"] {
        let db = format!("dirty_{}", level.replace(' ', "_").to_lowercase());
        let pool = setup(server, &db).await;
        let mut writer = pool.get_conn().await.expect("conn");
        let mut reader = pool.get_conn().await.expect("conn");
        reader.query_drop(format!("SET SESSION TRANSACTION ISOLATION LEVEL {level}")).await.expect("set");
        writer.query_drop("BEGIN").await.expect("begin");
        writer.query_drop("UPDATE t SET v = 100 WHERE id = 1").await.expect("update");
        assert_eq!(value(&mut reader, 1).await, 1, "{level}: an uncommitted write must not be visible");
        writer.query_drop("ROLLBACK").await.expect("rollback");
        assert_eq!(value(&mut reader, 1).await, 1);
    }
}

async fn anomaly_non_repeatable_read(server: &common::StrataProcess) {
    for (level, repeatable) in [("REPEATABLE READ", true), ("READ COMMITTED", false)] {
        let db = format!("nrr_{}", level.replace(' ', "_").to_lowercase());
        let pool = setup(server, &db).await;
        let mut reader = pool.get_conn().await.expect("conn");
        let mut writer = pool.get_conn().await.expect("conn");
        reader.query_drop(format!("SET SESSION TRANSACTION ISOLATION LEVEL {level}")).await.expect("set");
        reader.query_drop("BEGIN").await.expect("begin");
        assert_eq!(value(&mut reader, 1).await, 1);
        writer.query_drop("UPDATE t SET v = 5 WHERE id = 1").await.expect("update");
        let again = value(&mut reader, 1).await;
        if repeatable {
            assert_eq!(again, 1, "REPEATABLE READ must see its snapshot");
        } else {
            assert_eq!(again, 5, "READ COMMITTED sees the latest committed value per statement");
        }
        reader.query_drop("COMMIT").await.expect("commit");
        assert_eq!(value(&mut reader, 1).await, 5);
    }
}

/// Timestamps taken so far by the server (`strata_tso_wait_duration_seconds_count`).
fn timestamps_taken(server: &common::StrataProcess) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.status_port)).expect("status port");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("request");
    let mut body = String::new();
    s.read_to_string(&mut body).expect("response");
    let line = body.lines().find(|l| l.starts_with("strata_tso_wait_duration_seconds_count")).expect("tso count");
    line.rsplit(' ').next().and_then(|n| n.parse().ok()).expect("count")
}

/// READ COMMITTED with `tidb_rc_read_check_ts=ON`: a SELECT inside a transaction reads at
/// the timestamp the transaction already holds (it takes none of its own), and still never
/// misses a version committed before it started — point reads, scans and aggregates see
/// updates, inserts and deletes committed since, also while a writer keeps committing.
async fn rc_check_ts_never_misses_a_committed_version(server: &common::StrataProcess) {
    let pool = setup(server, "rc_check_ts").await;
    let mut reader = pool.get_conn().await.expect("conn");
    let mut writer = pool.get_conn().await.expect("conn");
    reader.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED").await.expect("set");
    let bad = reader.query_drop("SET tidb_rc_read_check_ts = 'maybe'").await.expect_err("not ON/OFF");
    assert_eq!(code(&bad), Some(1231));
    reader.query_drop("SET tidb_rc_read_check_ts = ON").await.expect("set");
    reader.query_drop("BEGIN").await.expect("begin");
    assert_eq!(value(&mut reader, 1).await, 1);
    writer.query_drop("UPDATE t SET v = 5 WHERE id = 1").await.expect("update");
    assert_eq!(value(&mut reader, 1).await, 5, "a point read missed a committed update");
    let sums = "SELECT COUNT(*), CAST(SUM(v) AS SIGNED) FROM t";
    writer.query_drop("INSERT INTO t VALUES (3, 3)").await.expect("insert");
    assert_eq!(reader.query_first(sums).await.expect("scan"), Some((3i64, 10i64)), "a scan missed an insert");
    writer.query_drop("DELETE FROM t WHERE id = 2").await.expect("delete");
    assert_eq!(reader.query_first(sums).await.expect("scan"), Some((2i64, 8i64)), "a scan missed a delete");

    // With nothing committed meanwhile, the SELECTs take no timestamp (background work such
    // as auto-analyze may take a few); without the
    // variable each takes one.
    for (on, most, least) in [("ON", 5, 0), ("OFF", u64::MAX, 20)] {
        reader.query_drop(format!("SET tidb_rc_read_check_ts = {on}")).await.expect("set");
        let before = timestamps_taken(server);
        for _ in 0..20 {
            assert_eq!(value(&mut reader, 1).await, 5);
        }
        let taken = timestamps_taken(server) - before;
        assert!(taken <= most && taken >= least, "tidb_rc_read_check_ts={on}: 20 SELECTs took {taken} timestamps");
    }
    reader.query_drop("SET tidb_rc_read_check_ts = ON").await.expect("set");

    // A writer commits increments; each read sees at least what was committed before it.
    let committed = std::sync::Arc::new(std::sync::atomic::AtomicI64::new(5));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let task = {
        let (committed, done) = (committed.clone(), done.clone());
        tokio::spawn(async move {
            for v in 6..=205 {
                writer.query_drop(format!("UPDATE t SET v = {v} WHERE id = 1")).await.expect("update");
                committed.store(v, std::sync::atomic::Ordering::SeqCst);
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let mut reads = 0;
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let floor = committed.load(std::sync::atomic::Ordering::SeqCst);
        let seen = value(&mut reader, 1).await;
        assert!(seen >= floor, "read {seen} after {floor} was committed");
        let (n, _): (i64, i64) = reader.query_first(sums).await.expect("scan").expect("row");
        assert_eq!(n, 2);
        reads += 1;
    }
    task.await.expect("writer");
    assert!(reads > 0);
    assert_eq!(value(&mut reader, 1).await, 205);
    reader.query_drop("COMMIT").await.expect("commit");
}

async fn anomaly_lost_update_pessimistic(server: &common::StrataProcess) {
    let pool = setup(server, "lost_update_p").await;
    let mut a = pool.get_conn().await.expect("conn");
    let mut b = pool.get_conn().await.expect("conn");
    a.query_drop("BEGIN").await.expect("begin");
    b.query_drop("BEGIN").await.expect("begin");
    a.query_drop("UPDATE t SET v = v + 10 WHERE id = 1").await.expect("a update");
    // b's update waits for a's lock, then applies to a's committed value.
    let waiter = tokio::spawn(async move {
        b.query_drop("UPDATE t SET v = v + 100 WHERE id = 1").await.expect("b update");
        b.query_drop("COMMIT").await.expect("b commit");
        b
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(!waiter.is_finished(), "b must wait for a's row lock");
    a.query_drop("COMMIT").await.expect("a commit");
    let _b = waiter.await.expect("join");
    assert_eq!(value(&mut a, 1).await, 111, "both increments survive");
}

async fn anomaly_lost_update_optimistic(server: &common::StrataProcess) {
    let pool = setup(server, "lost_update_o").await;
    let mut a = pool.get_conn().await.expect("conn");
    let mut b = pool.get_conn().await.expect("conn");
    a.query_drop("BEGIN OPTIMISTIC").await.expect("begin");
    b.query_drop("BEGIN OPTIMISTIC").await.expect("begin");
    a.query_drop("UPDATE t SET v = v + 10 WHERE id = 1").await.expect("a update");
    b.query_drop("UPDATE t SET v = v + 100 WHERE id = 1").await.expect("b update");
    a.query_drop("COMMIT").await.expect("a commit");
    let err = b.query_drop("COMMIT").await.expect_err("b must fail with a write conflict");
    assert_eq!(code(&err), Some(9007), "{err}");
    assert_eq!(value(&mut a, 1).await, 11);
}

async fn anomaly_write_skew_allowed_under_si(server: &common::StrataProcess) {
    // Two on-call doctors each check that someone else is on call, then go off call.
    // Snapshot isolation allows both to commit; FOR UPDATE on the rows read prevents it.
    let pool = setup(server, "write_skew").await;
    let mut a = pool.get_conn().await.expect("conn");
    let mut b = pool.get_conn().await.expect("conn");
    a.query_drop("BEGIN").await.expect("begin");
    b.query_drop("BEGIN").await.expect("begin");
    let on_a: i64 = a.query_first("SELECT COUNT(*) FROM t WHERE v > 0").await.expect("q").expect("row");
    let on_b: i64 = b.query_first("SELECT COUNT(*) FROM t WHERE v > 0").await.expect("q").expect("row");
    assert_eq!((on_a, on_b), (2, 2));
    a.query_drop("UPDATE t SET v = 0 WHERE id = 1").await.expect("a update");
    b.query_drop("UPDATE t SET v = 0 WHERE id = 2").await.expect("b update");
    a.query_drop("COMMIT").await.expect("a commit");
    b.query_drop("COMMIT").await.expect("b commit (write skew is allowed under SI)");
    let on: i64 = a.query_first("SELECT COUNT(*) FROM t WHERE v > 0").await.expect("q").expect("row");
    assert_eq!(on, 0, "both went off call: the anomaly SI permits");
}

async fn lock_wait_timeout_and_deadlock(server: &common::StrataProcess) {
    let pool = setup(server, "locks").await;
    let mut a = pool.get_conn().await.expect("conn");
    let mut b = pool.get_conn().await.expect("conn");
    b.query_drop("SET innodb_lock_wait_timeout = 1").await.expect("set");
    a.query_drop("BEGIN").await.expect("begin");
    a.query_drop("SELECT * FROM t WHERE id = 1 FOR UPDATE").await.expect("lock");
    b.query_drop("BEGIN").await.expect("begin");
    let err = b.query_drop("UPDATE t SET v = 9 WHERE id = 1").await.expect_err("must time out");
    assert_eq!(code(&err), Some(1205), "{err}");
    b.query_drop("ROLLBACK").await.expect("rollback");
    a.query_drop("ROLLBACK").await.expect("rollback");

    // Deadlock: a locks 1, b locks 2, a waits for 2, b asks for 1.
    b.query_drop("SET innodb_lock_wait_timeout = 20").await.expect("set");
    a.query_drop("BEGIN").await.expect("begin");
    b.query_drop("BEGIN").await.expect("begin");
    a.query_drop("UPDATE t SET v = v + 1 WHERE id = 1").await.expect("a locks 1");
    b.query_drop("UPDATE t SET v = v + 1 WHERE id = 2").await.expect("b locks 2");
    let a_task = tokio::spawn(async move {
        let r = a.query_drop("UPDATE t SET v = v + 1 WHERE id = 2").await;
        (a, r)
    });
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let b_task = tokio::spawn(async move {
        let r = b.query_drop("UPDATE t SET v = v + 1 WHERE id = 1").await;
        (b, r)
    });
    let (mut a, ra) = a_task.await.expect("join");
    let (mut b, rb) = b_task.await.expect("join");
    // Exactly one transaction is the victim (normally b, which closed the cycle); its whole
    // transaction is rolled back, so the other gets its lock and commits both increments.
    let (survivor, victim_err) = match (ra, rb) {
        (Ok(()), Err(e)) => (&mut a, e),
        (Err(e), Ok(())) => (&mut b, e),
        (ra, rb) => panic!("expected exactly one deadlock victim, got {ra:?} and {rb:?}"),
    };
    assert_eq!(code(&victim_err), Some(1213), "{victim_err}");
    survivor.query_drop("COMMIT").await.expect("commit");
    assert_eq!(value(survivor, 1).await, 2);
    assert_eq!(value(survivor, 2).await, 3);
}
