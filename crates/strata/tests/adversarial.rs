//! Hostile statements against a real server over the wire. Each case gets a clean MySQL
//! error (or MySQL's answer), and after each one another connection still gets `SELECT 1`
//! answered: nothing a client sends takes the process down.
//!
//! The server runs with `STRATA_FAILPOINTS=1`, so a statement can also inject a panic, which
//! must cost only that statement (and its transaction), never the server or other sessions.

mod common;

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Pool};

fn code(e: &mysql_async::Error) -> u16 {
    match e {
        mysql_async::Error::Server(s) => s.code,
        other => panic!("expected a server error, got {other}"),
    }
}

/// Runs `sql` and returns the server's error code (panics if it succeeds).
async fn error_of(c: &mut Conn, sql: &str) -> u16 {
    match c.query_drop(sql).await {
        Ok(()) => panic!("expected an error from {}", &sql[..sql.len().min(80)]),
        Err(e) => code(&e),
    }
}

/// The server still answers, on a connection that was not involved.
async fn alive(pool: &Pool) {
    let mut c = pool.get_conn().await.expect("server still accepts connections");
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("SELECT 1");
    assert_eq!(one, Some(1));
}

async fn warnings(c: &mut Conn) -> Vec<(u16, String)> {
    let rows: Vec<(String, u16, String)> = c.query("SHOW WARNINGS").await.expect("show warnings");
    rows.into_iter().map(|(_, code, msg)| (code, msg)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_statements_fail_cleanly_and_the_server_goes_on() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start_with_env(&dir.path().join("data"), &[("STRATA_FAILPOINTS", "1")]);
    let pool = server.pool(None);
    common::exec(
        &pool,
        &[
            "CREATE DATABASE adv",
            "CREATE TABLE adv.t (id INT PRIMARY KEY, v INT)",
            "INSERT INTO adv.t VALUES (1, 10), (2, 20)",
        ],
    )
    .await;
    let mut c = pool.get_conn().await.expect("connect");
    c.query_drop("USE adv").await.expect("use");

    deep_expressions(&mut c, &pool).await;
    functions_at_their_limits(&mut c, &pool).await;
    auto_increment_at_the_top(&mut c, &pool).await;
    injected_panic(&mut c, &pool).await;
    joins_of_many_tables(&mut c, &pool).await;
    statement_memory_quota(&mut c, &pool).await;
    results_stream(&mut c, &pool).await;
    limits_read_a_batch(&mut c, &pool).await;
    let peak = server.peak_rss();
    assert!(peak < 2 << 30, "server peak RSS {} MiB", peak >> 20);
}

/// A 30-table chain join of 10-row tables, FROM written in an order where neighbours in the
/// list share no predicate: planned in the written order that is a cross product (10^30
/// rows); ordered by its predicates it is 10 rows.
async fn joins_of_many_tables(c: &mut Conn, pool: &Pool) {
    const N: usize = 30;
    for i in 0..N {
        c.query_drop(format!("CREATE TABLE j{i} (a INT PRIMARY KEY, b INT, KEY (b))")).await.expect("create");
        let rows = (0..10).map(|r| format!("({r}, {})", (r + 1) % 10)).collect::<Vec<_>>().join(",");
        c.query_drop(format!("INSERT INTO j{i} VALUES {rows}")).await.expect("insert");
    }
    // Chain j0 - j1 - ... - j29 on j{i}.b = j{i+1}.a, listed evens first, then odds.
    let order: Vec<usize> = (0..N).step_by(2).chain((1..N).step_by(2)).collect();
    let from = order.iter().map(|i| format!("j{i}")).collect::<Vec<_>>().join(", ");
    let preds = (0..N - 1).rev().map(|i| format!("j{i}.b = j{}.a", i + 1)).collect::<Vec<_>>().join(" AND ");
    let sql = format!("SELECT COUNT(*), SUM(j0.a), MAX(j29.a) FROM {from} WHERE {preds}");
    let row: Option<(i64, i64, i64)> = c.query_first(&sql).await.expect("30-table join");
    // j0.a = r fixes j{k}.a = (r + k) % 10: one row per j0 row.
    assert_eq!(row, Some((10, 45, 9)));
    // Columns still come back in written order, with an explicit JOIN ... ON chain too.
    let joins = (1..N).map(|i| format!("JOIN j{i} ON j{}.b = j{i}.a", i - 1)).collect::<Vec<_>>().join(" ");
    let sql = format!("SELECT j0.a, j29.a, j15.b FROM j0 {joins} WHERE j0.a = 3");
    let row: Option<(i64, i64, i64)> = c.query_first(&sql).await.expect("JOIN chain");
    assert_eq!(row, Some((3, 2, 9)));
    let sql = format!("SELECT * FROM {from} WHERE {preds} AND j0.a = 3");
    let rows: Vec<mysql_async::Row> = c.query(&sql).await.expect("select *");
    assert_eq!(rows.len(), 1);
    let vals: Vec<i64> = (0..2 * N).map(|i| rows[0].get(i).expect("int")).collect();
    for (pos, t) in order.iter().enumerate() {
        assert_eq!(vals[2 * pos], ((3 + t) % 10) as i64, "column a of j{t} at position {pos}");
    }
    alive(pool).await;
}

/// A join that would hold far more than the statement's quota fails with 8175, frees what
/// it held, and the session and the server go on. A join whose rows only pass through
/// (counted, not held) runs in batches within the quota.
async fn statement_memory_quota(c: &mut Conn, pool: &Pool) {
    c.query_drop("CREATE TABLE big (id INT PRIMARY KEY, pad VARCHAR(200))").await.expect("create");
    for chunk in 0..10 {
        let rows = (0..200).map(|i| format!("({}, REPEAT('x', 200))", chunk * 200 + i)).collect::<Vec<_>>().join(",");
        c.query_drop(format!("INSERT INTO big VALUES {rows}")).await.expect("insert");
    }
    c.query_drop("SET tidb_mem_quota_query = 67108864").await.expect("set quota");
    // 2000 x 2000 rows of ~500 bytes each: ~2 GB if held.
    let e = error_of(c, "SELECT a.id, b.pad FROM big a, big b ORDER BY a.pad, b.id").await;
    assert_eq!(e, 8175);
    let e = error_of(c, "SELECT DISTINCT a.pad, b.id, a.id FROM big a JOIN big b ON a.id <> b.id").await;
    assert_eq!(e, 8175);
    // 400 x 1999 joined rows of ~500 bytes (~400 MB) stream into the count.
    let n: Option<i64> = c
        .query_first(
            "SELECT COUNT(*) FROM (SELECT a.pad, b.id FROM big a JOIN big b ON a.id <> b.id WHERE a.id < 400) x",
        )
        .await
        .expect("streamed join");
    assert_eq!(n, Some(400 * 1999));
    alive(pool).await;
    // The same session goes on, and what fits the quota runs.
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM big a JOIN big b ON a.id = b.id").await.expect("join");
    assert_eq!(n, Some(2000));
    let q: Option<i64> = c.query_first("SELECT @@tidb_mem_quota_query").await.expect("quota");
    assert_eq!(q, Some(64 << 20));
    // An INSERT holds the rows it completes until it stores them: 4M rows of ~500 bytes.
    c.query_drop("CREATE TABLE big2 (id INT PRIMARY KEY, pad VARCHAR(200))").await.expect("create big2");
    let e = error_of(c, "INSERT INTO big2 SELECT a.id * 10000 + b.id, b.pad FROM big a, big b").await;
    assert_eq!(e, 8175);
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM big2").await.expect("count big2");
    assert_eq!(n, Some(0));
    c.query_drop("SET tidb_mem_quota_query = 1073741824").await.expect("reset quota");
}

/// A result set far larger than the statement's memory quota streams to the client — text
/// and binary protocol, row and column engine — while an ORDER BY, which must hold its
/// rows, still fails with 8175. An error after rows have gone out ends the result set and
/// the session goes on. Uses `big` from [`statement_memory_quota`].
async fn results_stream(c: &mut Conn, pool: &Pool) {
    c.query_drop("SET tidb_mem_quota_query = 16777216").await.expect("set quota");
    // 50 x 2000 rows of ~450 bytes: ~50 MB if held, three times the quota.
    let sql = "SELECT a.id, b.id, a.pad, b.pad FROM big a JOIN big b WHERE a.id < 50";
    for engines in ["tikv", "tiflash"] {
        c.query_drop(format!("SET tidb_isolation_read_engines = '{engines}'")).await.expect("engines");
        type Joined = (i64, i64, String, String);
        let text: Vec<Joined> = c.query(sql).await.unwrap_or_else(|e| panic!("{engines} text: {e}"));
        let binary: Vec<Joined> = c.exec(sql, ()).await.unwrap_or_else(|e| panic!("{engines} binary: {e}"));
        for rows in [&text, &binary] {
            assert_eq!(rows.len(), 50 * 2000, "{engines}");
            let sum: i64 = rows.iter().map(|r| r.0 * 2000 + r.1).sum();
            assert_eq!(sum, (0..50 * 2000).sum::<i64>(), "{engines}: every pair once");
            assert!(rows.iter().all(|r| r.2.len() == 200 && r.3.len() == 200));
        }
        let e = error_of(c, &format!("{sql} ORDER BY a.pad, b.pad, a.id, b.id")).await;
        assert_eq!(e, 8175, "{engines}: a sort holds its rows");
    }
    c.query_drop("SET tidb_isolation_read_engines = 'tikv,tiflash'").await.expect("engines");
    // The subquery gives two rows from id 1500 on (1242), after ~300 KB of rows were sent.
    let e = error_of(
        c,
        "SELECT a.id, a.pad, (SELECT b.id FROM big b WHERE b.id IN (a.id, a.id + 1) AND a.id >= 1500) FROM big a",
    )
    .await;
    assert_eq!(e, 1242);
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("the session goes on");
    assert_eq!(one, Some(1));
    alive(pool).await;
    c.query_drop("SET tidb_mem_quota_query = 1073741824").await.expect("reset quota");
}

/// `LIMIT` and `EXISTS` stop a scan after its first batch instead of reading the table, as
/// SHOW STATUS's Handler_read counters tell.
async fn limits_read_a_batch(c: &mut Conn, pool: &Pool) {
    async fn reads(c: &mut Conn) -> u64 {
        let rows: Vec<(String, u64)> = c.query("SHOW SESSION STATUS LIKE 'Handler_read%'").await.expect("status");
        rows.iter().map(|r| r.1).sum()
    }
    c.query_drop("CREATE TABLE wide (id INT PRIMARY KEY, k INT, KEY (k))").await.expect("create");
    for chunk in 0..20 {
        let rows = (0..1000).map(|i| format!("({0}, {0})", chunk * 1000 + i)).collect::<Vec<_>>().join(",");
        c.query_drop(format!("INSERT INTO wide VALUES {rows}")).await.expect("insert");
    }
    c.query_drop("FLUSH STATUS").await.expect("flush status");
    assert_eq!(reads(c).await, 0);
    let n: Vec<i64> = c.query("SELECT id FROM wide LIMIT 1").await.expect("limit 1");
    assert_eq!(n.len(), 1);
    let limited = reads(c).await;
    assert!(limited <= 1024, "LIMIT 1 read {limited} rows");
    c.query_drop("FLUSH STATUS").await.expect("flush status");
    let n: Vec<i64> = c.query("SELECT id FROM wide WHERE k >= 5 LIMIT 3").await.expect("index limit");
    assert_eq!(n.len(), 3);
    let e: Option<i64> = c.query_first("SELECT EXISTS (SELECT 1 FROM wide WHERE id > 10)").await.expect("exists");
    assert_eq!(e, Some(1));
    let limited = reads(c).await;
    assert!(limited <= 2048, "index LIMIT and EXISTS read {limited} rows");
    // Without a limit the whole table is read, and counted.
    c.query_drop("FLUSH STATUS").await.expect("flush status");
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM wide WHERE id + 0 >= 0").await.expect("count");
    assert_eq!(n, Some(20_000));
    let rows: Vec<(String, u64)> = c.query("SHOW STATUS LIKE 'Handler_read_rnd_next'").await.expect("status");
    assert_eq!(rows, vec![("Handler_read_rnd_next".to_string(), 20_000)]);
    alive(pool).await;
}

async fn deep_expressions(c: &mut Conn, pool: &Pool) {
    // A 100,000-term chain, 50,000 nested NOTs, a 100,000-term OR list, a long UNION chain.
    let chain = vec!["1"; 100_000].join("+");
    assert_eq!(error_of(c, &format!("SELECT {chain}")).await, 1436);
    alive(pool).await;
    // sqlparser stops at its recursion limit and reports the rest as a syntax error.
    let nots = format!("SELECT {}1", "NOT ".repeat(50_000));
    let e = error_of(c, &nots).await;
    assert!(e == 1064 || e == 1436, "nested NOTs: {e}");
    alive(pool).await;
    let ors = (0..100_000).map(|i| format!("v = {i}")).collect::<Vec<_>>().join(" OR ");
    assert_eq!(error_of(c, &format!("SELECT id FROM t WHERE {ors}")).await, 1436);
    alive(pool).await;
    let unions = vec!["SELECT 1"; 10_000].join(" UNION ALL ");
    assert_eq!(error_of(c, &unions).await, 1436);
    alive(pool).await;
    let parens = format!("SELECT {}1{}", "(".repeat(10_000), ")".repeat(10_000));
    assert_eq!(error_of(c, &parens).await, 1436);
    alive(pool).await;
    // A multi-row INSERT of literals has only its head parsed; the head is checked too.
    let chain = vec!["1"; 100_000].join("+");
    let e = error_of(c, &format!("INSERT INTO t (v) SELECT {chain} UNION VALUES (1), (2)")).await;
    assert!(e == 1064 || e == 1436, "deep INSERT head: {e}");
    alive(pool).await;

    // Below the limit the same shapes work, and flat lists have no depth to speak of.
    let chain = vec!["1"; 2_000].join("+");
    let sum: Option<i64> = c.query_first(format!("SELECT {chain}")).await.expect("2,000-term chain");
    assert_eq!(sum, Some(2_000));
    let ors = (0..2_000).map(|i| format!("v = {}", i * 10)).collect::<Vec<_>>().join(" OR ");
    let ids: Vec<i64> = c.query(format!("SELECT id FROM t WHERE {ors} ORDER BY id")).await.expect("2,000-term OR");
    assert_eq!(ids, vec![1, 2]);
    let list = (0..100_000).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
    let ids: Vec<i64> = c.query(format!("SELECT id FROM t WHERE v IN ({list}) ORDER BY id")).await.expect("IN list");
    assert_eq!(ids, vec![1, 2]);
    let ones = vec!["1"; 100_000].join(",");
    let eq: Option<i64> = c.query_first(format!("SELECT ({ones}) = ({ones})")).await.expect("wide row comparison");
    assert_eq!(eq, Some(1));
    alive(pool).await;
}

async fn functions_at_their_limits(c: &mut Conn, pool: &Pool) {
    let s: Option<String> =
        c.query_first("SELECT SUBSTRING('hello', 2, 9223372036854775807)").await.expect("substring");
    assert_eq!(s.as_deref(), Some("ello"));
    let s: Option<String> = c.query_first("SELECT SUBSTRING('hello', -9223372036854775808, 2)").await.expect("substr");
    assert_eq!(s.as_deref(), Some(""));

    // Results past max_allowed_packet (64 MiB) are NULL with warning 1301, never allocated.
    for sql in [
        "SELECT LPAD('a', 2000000000, 'xy')",
        "SELECT RPAD('a', 9223372036854775807, 'xy')",
        "SELECT REPEAT('ab', 100000000)",
        "SELECT SPACE(9223372036854775807)",
        "SELECT REPLACE(REPEAT('a', 1000000), 'a', REPEAT('b', 1000))",
    ] {
        let v: Option<Option<String>> = c.query_first(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(v, Some(None), "{sql} is NULL");
        let w = warnings(c).await;
        assert_eq!(w.first().map(|w| w.0), Some(1301), "{sql}: {w:?}");
    }
    let s: Option<String> = c.query_first("SELECT LPAD('hi', 5, 'xy')").await.expect("lpad");
    assert_eq!(s.as_deref(), Some("xyxhi"));
    let n: Option<i64> = c.query_first("SELECT LENGTH(REPEAT('ab', 1000000))").await.expect("repeat");
    assert_eq!(n, Some(2_000_000));

    // Wrong argument counts are 1582 at bind time, not an index out of bounds at run time.
    for sql in ["SELECT REPEAT('a')", "SELECT LPAD('a', 2)", "SELECT SUBSTRING_INDEX_NOPE(1)", "SELECT ROUND()"] {
        let e = error_of(c, sql).await;
        assert!(e == 1582 || e == 1305, "{sql}: {e}");
    }

    // Date arithmetic past the calendar is NULL; overflowing numbers are 1690.
    for sql in [
        "SELECT DATE_ADD('2020-01-01', INTERVAL 9223372036854775807 SECOND)",
        "SELECT DATE_ADD('2020-01-01', INTERVAL 9223372036854775807 YEAR)",
        "SELECT DATE_SUB('2020-01-01', INTERVAL 9223372036854775807 DAY)",
        "SELECT '9999-12-31' + INTERVAL 1 DAY",
    ] {
        let v: Option<Option<String>> = c.query_first(sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(v, Some(None), "{sql} is NULL");
    }
    let d: Option<String> = c.query_first("SELECT DATE_ADD('2020-01-31', INTERVAL 1 MONTH)").await.expect("date");
    assert_eq!(d.as_deref(), Some("2020-02-29"));
    assert_eq!(error_of(c, "SELECT ROUND(79228162514264337593543950335, -1)").await, 1690);
    assert_eq!(error_of(c, "SELECT POW(10, 400)").await, 1690);
    assert_eq!(error_of(c, "SELECT 9223372036854775807 + 1").await, 1690);
    let r: Option<String> = c.query_first("SELECT ROUND(1234.5678, -9223372036854775808)").await.expect("round");
    assert_eq!(r.as_deref(), Some("0"));
    // Zero dates have no month name (this used to subtract 1 from month 0).
    let _: Option<Option<String>> =
        c.query_first("SELECT DATE_FORMAT('0000-00-00', '%M|%b|%Y')").await.expect("zero date");
    let _: Option<Option<String>> =
        c.query_first("SELECT DATE_FORMAT(CAST('0000-00-00' AS DATETIME), '%M|%b|%W|%a')").await.expect("zero date");

    // GROUP_CONCAT stops at group_concat_max_len with warning 1260.
    c.query_drop("SET SESSION group_concat_max_len = 5").await.expect("set");
    let g: Option<String> = c.query_first("SELECT GROUP_CONCAT(v) FROM t").await.expect("group_concat");
    assert_eq!(g.as_deref(), Some("10,20"));
    c.query_drop("INSERT INTO t VALUES (3, 30)").await.expect("insert");
    let g: Option<String> = c.query_first("SELECT GROUP_CONCAT(v) FROM t").await.expect("group_concat");
    assert_eq!(g.as_deref(), Some("10,20"));
    assert_eq!(warnings(c).await.first().map(|w| w.0), Some(1260));
    c.query_drop("SET SESSION group_concat_max_len = 1024").await.expect("set");
    c.query_drop("DELETE FROM t WHERE id = 3").await.expect("delete");
    alive(pool).await;
}

async fn auto_increment_at_the_top(c: &mut Conn, pool: &Pool) {
    c.query_drop("CREATE TABLE ai8 (id TINYINT AUTO_INCREMENT PRIMARY KEY, x INT)").await.expect("create");
    c.query_drop("INSERT INTO ai8 VALUES (127, 1)").await.expect("insert max");
    assert_eq!(error_of(c, "INSERT INTO ai8 (x) VALUES (2)").await, 1467);
    c.query_drop("CREATE TABLE ai64 (id BIGINT AUTO_INCREMENT PRIMARY KEY, x INT)").await.expect("create");
    c.query_drop("INSERT INTO ai64 VALUES (9223372036854775807, 1)").await.expect("insert max");
    assert_eq!(error_of(c, "INSERT INTO ai64 (x) VALUES (2)").await, 1467);
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM ai64").await.expect("count");
    assert_eq!(n, Some(1));
    alive(pool).await;
}

async fn injected_panic(c: &mut Conn, pool: &Pool) {
    // The panicking session holds a row lock in an open transaction.
    c.query_drop("BEGIN").await.expect("begin");
    c.query_drop("UPDATE t SET v = 11 WHERE id = 1").await.expect("update");
    assert_eq!(error_of(c, "SELECT strata_failpoint('panic') FROM t").await, 1105);

    // Its transaction was rolled back at once: the lock is free for another session, and
    // the update is gone.
    let mut other = pool.get_conn().await.expect("connect");
    other.query_drop("SET innodb_lock_wait_timeout = 1").await.expect("set");
    other.query_drop("UPDATE adv.t SET v = 12 WHERE id = 1").await.expect("the panicked session's lock was released");
    let v: Option<i64> = other.query_first("SELECT v FROM adv.t WHERE id = 1").await.expect("read");
    assert_eq!(v, Some(12));

    // The session itself goes on and shows in the process list.
    let one: Option<i64> = c.query_first("SELECT 1").await.expect("same connection still works");
    assert_eq!(one, Some(1));
    let id = c.id();
    let rows: Vec<mysql_async::Row> = other.query("SHOW PROCESSLIST").await.expect("processlist");
    assert!(rows.iter().any(|r| r.get::<u64, _>(0) == Some(id as u64)), "the session is still listed");
    c.query_drop("UPDATE t SET v = 10 WHERE id = 1").await.expect("writes work again");

    // Without STRATA_FAILPOINTS the function does not exist (checked by the unit tests);
    // a panic in autocommit mode is no different.
    assert_eq!(error_of(c, "SELECT strata_failpoint('panic')").await, 1105);
    alive(pool).await;
}

/// Connections that stall in the handshake do not count against `max_connections` and are
/// dropped after `connect_timeout`; logged-in sessions past `max_connections` get 1040;
/// prepared statements past `max_prepared_stmt_count` get 1461.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connection_and_statement_limits_hold() {
    use std::io::Read;
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start_with(
        &dir.path().join("data"),
        &["--max-connections", "4", "--connect-timeout", "2"],
        &[],
    );
    let opts: mysql_async::Opts =
        mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&server.url(None)).expect("url"))
            .prefer_socket(false)
            .into();

    // 500 half-open connections: they read the greeting and never answer it.
    let mut stalled = Vec::new();
    for _ in 0..500 {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
        let mut greeting = [0u8; 4];
        s.read_exact(&mut greeting).expect("greeting header");
        stalled.push(s);
    }
    // They do not keep a real client out.
    let mut first = Conn::new(opts.clone()).await.expect("log in past 500 stalled handshakes");
    // SHOW VARIABLES reports what the command line set.
    let limits: Option<(i64, i64)> =
        first.query_first("SELECT @@max_connections, @@connect_timeout").await.expect("variables");
    assert_eq!(limits, Some((4, 2)));
    let one: Option<i64> = first.query_first("SELECT 1").await.expect("select");
    assert_eq!(one, Some(1));
    // After connect_timeout the server has closed every one of them.
    let started = Instant::now();
    for s in &mut stalled {
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    }
    assert!(started.elapsed() < Duration::from_secs(10), "stalled handshakes were cut by connect_timeout");
    drop(stalled);

    // max_connections = 4 logged-in sessions; the fifth is refused, and a freed place is reused.
    let mut held = vec![first];
    for _ in 0..3 {
        held.push(Conn::new(opts.clone()).await.expect("within max_connections"));
    }
    let refused = Conn::new(opts.clone()).await.expect_err("over max_connections");
    assert_eq!(code(&refused), 1040);
    held.pop().expect("one").disconnect().await.expect("disconnect");
    // The server frees the place when it has seen the QUIT; give it a moment.
    let mut again = None;
    for _ in 0..50 {
        match Conn::new(opts.clone()).await {
            Ok(c) => {
                again = Some(c);
                break;
            }
            Err(e) => assert_eq!(code(&e), 1040),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let mut again = again.expect("a freed place is reused");
    let one: Option<i64> = again.query_first("SELECT 1").await.expect("select");
    assert_eq!(one, Some(1));

    // max_prepared_stmt_count.
    again.query_drop("SET GLOBAL max_prepared_stmt_count = 3").await.expect("set");
    for i in 0..3 {
        again.prep(format!("SELECT {i} + ?")).await.expect("within the limit");
    }
    let e = again.prep("SELECT 4 + ?").await.expect_err("over max_prepared_stmt_count");
    assert_eq!(code(&e), 1461);
    let one: Option<i64> = again.query_first("SELECT 1").await.expect("select");
    assert_eq!(one, Some(1));

    // SET GLOBAL max_connections applies to the next login: 4 sessions now, 6 allowed.
    again.query_drop("SET GLOBAL max_connections = 6").await.expect("set");
    held.push(again);
    for _ in 0..2 {
        held.push(Conn::new(opts.clone()).await.expect("within the new max_connections"));
    }
    let refused = Conn::new(opts.clone()).await.expect_err("over the new max_connections");
    assert_eq!(code(&refused), 1040);

    // SET GLOBAL connect_timeout too: a handshake stalled for longer than the old 2 s is
    // still open.
    held[0].query_drop("SET GLOBAL connect_timeout = 30").await.expect("set");
    let mut s = std::net::TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_millis(3500))).expect("timeout");
    let mut greeting = [0u8; 4];
    s.read_exact(&mut greeting).expect("greeting header");
    let mut rest = [0u8; 4096];
    let mut open = true;
    loop {
        match s.read(&mut rest) {
            Ok(0) => {
                open = false;
                break;
            }
            Ok(_) => continue, // the rest of the greeting
            Err(_) => break,   // still waiting for us after 3.5 s
        }
    }
    assert!(open, "the server closed a handshake before the new connect_timeout");
}

/// The server-wide limit (`--memory-limit`) stops a statement that would push all
/// statements together past it, even when the statement is within its own quota.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_memory_limit_holds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start_with(&dir.path().join("data"), &["--memory-limit", "32M"], &[]);
    let pool = server.pool(None);
    common::exec(&pool, &["CREATE DATABASE m", "CREATE TABLE m.t (id INT PRIMARY KEY, pad VARCHAR(100))"]).await;
    let mut c = pool.get_conn().await.expect("connect");
    let rows = (0..1000).map(|i| format!("({i}, REPEAT('y', 100))")).collect::<Vec<_>>().join(",");
    c.query_drop(format!("INSERT INTO m.t VALUES {rows}")).await.expect("insert");
    // A sort must hold its ~200 MB of rows (a plain cross join would stream to the client).
    let e = error_of(&mut c, "SELECT a.pad, b.pad FROM m.t a, m.t b ORDER BY a.id DESC, b.id").await;
    assert_eq!(e, 8176);
    alive(&pool).await;
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM m.t").await.expect("count");
    assert_eq!(n, Some(1000));
}
