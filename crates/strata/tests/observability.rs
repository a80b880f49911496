//! Where time goes, against a Strata server started by the test: the Prometheus endpoint
//! (statements, phases, plan cache, the transaction layer's waits) parses as Prometheus
//! text; the slow query log is MySQL's file format with the statements over
//! `long_query_time`; statements_summary shows an account without PROCESS only the
//! statements it ran.

mod common;

use mysql_async::prelude::Queryable;
use mysql_async::Row;

/// `GET /metrics` on the status port is Prometheus text that a Prometheus parser reads:
/// statements by command and kind, the parse / compile / execute histograms, the plan
/// cache's hits and misses, and the timestamp, lock and commit histograms count what the
/// test ran.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_prometheus_text_counting_statements_phases_plan_cache_and_waits() {
    use std::io::{Read, Write};
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let status = server.status_port;
    let scrape = move || {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", status)).expect("status port");
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("request");
        let mut response = String::new();
        s.read_to_string(&mut response).expect("response");
        let (head, body) = response.split_once("\r\n\r\n").expect("headers and body");
        assert!(head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(head.to_ascii_lowercase().contains("content-type: text/plain"), "{head}");
        let lines = body.lines().map(|l| Ok(l.to_string()));
        prometheus_parse::Scrape::parse(lines).expect("Prometheus text format")
    };
    let value = |scrape: &prometheus_parse::Scrape, name: &str, label: Option<(&str, &str)>| -> f64 {
        let sample = scrape
            .samples
            .iter()
            .find(|s| s.metric == name && label.is_none_or(|(k, v)| s.labels.get(k) == Some(v)))
            .unwrap_or_else(|| panic!("{name}{label:?} in the scrape"));
        match &sample.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => *v,
            prometheus_parse::Value::Histogram(buckets) => buckets.last().map_or(0.0, |b| b.count),
            other => panic!("unexpected {other:?}"),
        }
    };
    let before = scrape();
    let pool = server.pool(None);
    let mut c = pool.get_conn().await.expect("connect");
    c.query_drop("CREATE DATABASE m").await.expect("create");
    c.query_drop("CREATE TABLE m.t (id INT PRIMARY KEY, v INT)").await.expect("create");
    c.query_drop("INSERT INTO m.t VALUES (1, 10), (2, 20)").await.expect("insert");
    let stmt = c.prep("SELECT v FROM m.t WHERE id = ?").await.expect("prepare");
    for id in [1, 2, 1] {
        let _: Option<i64> = c.exec_first(&stmt, (id,)).await.expect("execute");
    }
    // A pessimistic transaction locks the row it updates, then commits.
    c.query_drop("BEGIN").await.expect("begin");
    c.query_drop("UPDATE m.t SET v = 11 WHERE id = 1").await.expect("update");
    c.query_drop("COMMIT").await.expect("commit");
    let after = scrape();
    let delta = |name: &str, label: Option<(&str, &str)>| value(&after, name, label) - value(&before, name, label);
    assert_eq!(delta("strata_server_query_total", Some(("type", "StmtExecute"))), 3.0);
    assert_eq!(delta("strata_server_query_total", Some(("type", "StmtPrepare"))), 1.0);
    assert!(delta("strata_server_query_total", Some(("type", "Query"))) >= 6.0);
    assert_eq!(delta("strata_executor_statement_total", Some(("type", "Insert"))), 1.0);
    assert_eq!(delta("strata_executor_statement_total", Some(("type", "Update"))), 1.0);
    assert!(delta("strata_executor_statement_total", Some(("type", "Select"))) >= 3.0);
    assert_eq!(delta("strata_plan_cache_total", Some(("result", "hit"))), 2.0);
    // Misses: the prepared query's first execution, the text UPDATE's new shape (the
    // non-prepared plan cache), and whatever the client's own text queries were.
    assert!(delta("strata_plan_cache_total", Some(("result", "miss"))) >= 2.0);
    assert!(delta("strata_session_statement_duration_seconds", Some(("phase", "parse"))) >= 4.0);
    assert!(delta("strata_session_statement_duration_seconds", Some(("phase", "compile"))) >= 3.0);
    assert!(delta("strata_session_statement_duration_seconds", Some(("phase", "execute"))) >= 6.0);
    // Every statement's transaction took a start timestamp; the UPDATE a lock; the INSERT
    // and the transaction committed.
    assert!(delta("strata_tso_wait_duration_seconds", None) >= 6.0);
    assert!(delta("strata_txn_lock_wait_duration_seconds", None) >= 1.0);
    assert!(delta("strata_txn_commit_duration_seconds", None) >= 2.0);
    // Both commits waited for group commit's WAL fsync, which ran at least once.
    assert!(delta("strata_wal_sync_waits_total", None) >= 2.0);
    assert!(delta("strata_wal_fsync_duration_seconds", None) >= 1.0);
    let connections = after.samples.iter().find(|s| s.metric == "strata_connections").expect("connections");
    assert!(matches!(connections.value, prometheus_parse::Value::Gauge(n) if n >= 1.0), "{connections:?}");

    // A deleted row's current-version record is pruned within seconds, not at GC (ten
    // minutes on): once the DELETE has committed, no transaction is older than it.
    c.query_drop("DELETE FROM m.t WHERE id = 2").await.expect("delete");
    let pruned = |s: &prometheus_parse::Scrape| value(s, "strata_mvcc_pruned_deletions_total", None);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while pruned(&scrape()) - pruned(&before) < 1.0 {
        assert!(std::time::Instant::now() < deadline, "the deletion was not pruned");
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let rows: Vec<(i64, i64)> = c.query("SELECT id, v FROM m.t").await.expect("select");
    assert_eq!(rows, vec![(1, 11)]);

    // A table scanned again and again becomes resident: its scans read its records from
    // memory, and see every write from then on.
    let resident = |s: &prometheus_parse::Scrape| value(s, "strata_storage_resident_scans_total", None);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut v = 11;
    while resident(&scrape()) - resident(&before) < 3.0 {
        assert!(std::time::Instant::now() < deadline, "the table did not become resident");
        v += 1;
        c.query_drop(format!("UPDATE m.t SET v = {v} WHERE id = 1")).await.expect("update");
        let rows: Vec<(i64, i64)> = c.query("SELECT id, v FROM m.t").await.expect("select");
        assert_eq!(rows, vec![(1, v)]);
    }
    let now = scrape();
    assert!(value(&now, "strata_storage_resident_tables", None) >= 1.0);
    assert!(value(&now, "strata_storage_resident_bytes", None) > 0.0);
    c.query_drop("INSERT INTO m.t VALUES (3, 30)").await.expect("insert");
    c.query_drop("DELETE FROM m.t WHERE id = 1").await.expect("delete");
    let rows: Vec<(i64, i64)> = c.query("SELECT id, v FROM m.t").await.expect("select");
    assert_eq!(rows, vec![(3, 30)]);

    // The Grafana dashboard in the repository charts only metrics the server exports.
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana/strata.json");
    let dashboard: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("dashboard")).expect("dashboard is JSON");
    let panels = dashboard["panels"].as_array().expect("panels");
    assert!(panels.len() >= 11);
    let mut charted = 0;
    for target in panels.iter().flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default()) {
        let expr = target["expr"].as_str().expect("expr");
        for word in expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).filter(|w| w.starts_with("strata_"))
        {
            let family = ["_bucket", "_sum", "_count"].iter().fold(word, |w, s| w.strip_suffix(s).unwrap_or(w));
            assert!(after.samples.iter().any(|s| s.metric == family), "the dashboard charts {word}, not exported");
            charted += 1;
        }
    }
    assert!(charted >= 18, "{charted}");
}

/// With `slow_query_log=ON`, statements slower than the session's `long_query_time` go to
/// `slow_query_log_file` (in the data directory by default) in MySQL's format; faster ones
/// do not; Slow_queries counts them; FLUSH SLOW LOGS starts a new file after a rotation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_statements_go_to_the_slow_log_in_mysql_format() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let server = common::StrataProcess::start(&data);
    let pool = server.pool(None);
    let mut c = pool.get_conn().await.expect("connect");
    let file: String = c.query_first("SELECT @@slow_query_log_file").await.expect("var").expect("row");
    assert_eq!(std::path::Path::new(&file), data.join("strata-slow.log"));
    c.query_drop("CREATE DATABASE shop").await.expect("create");
    c.query_drop("CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)").await.expect("create");
    c.query_drop("INSERT INTO shop.t VALUES (1, 10), (2, 20), (3, 30)").await.expect("insert");
    // Off: nothing is written, even at long_query_time 0.
    c.query_drop("SET long_query_time = 0").await.expect("set");
    c.query_drop("SELECT v FROM shop.t WHERE id = 1").await.expect("select");
    assert!(!std::path::Path::new(&file).exists(), "the slow log was written while off");

    c.query_drop("SET GLOBAL slow_query_log = ON").await.expect("on");
    c.query_drop("USE shop").await.expect("use");
    c.query_drop("SELECT v FROM t WHERE id >= 2 /* logged */").await.expect("select");
    let stmt = c.prep("SELECT v FROM t WHERE id = ?").await.expect("prepare");
    let _: Option<i64> = c.exec_first(&stmt, (3,)).await.expect("execute");
    c.query_drop("SET long_query_time = 10").await.expect("set");
    c.query_drop("SELECT v FROM t WHERE id = 1 /* fast */").await.expect("select");
    let log = std::fs::read_to_string(&file).expect("slow log");
    assert!(log.starts_with("strata, Version: "), "{log}");
    assert!(log.contains("# User@Host: root[root] @  [127.0.0.1]  Id: "), "{log}");
    assert!(log.contains("Rows_sent: 2  Rows_examined: "), "{log}");
    assert!(log.contains("use shop;\nSET timestamp="), "{log}");
    assert!(log.contains("\nSELECT v FROM t WHERE id >= 2 /* logged */;\n"), "{log}");
    assert!(log.contains("\nSELECT v FROM t WHERE id = ?;\n"), "the prepared statement: {log}");
    assert!(log.contains("# Query_time: 0."), "{log}");
    assert!(log.contains("# Parse_time: "), "{log}");
    assert!(!log.contains("/* fast */"), "a statement under long_query_time was logged: {log}");
    let slow: Vec<(String, String)> = c.query("SHOW GLOBAL STATUS LIKE 'Slow_queries'").await.expect("status");
    let count: u64 = slow[0].1.parse().expect("count");
    assert!(count >= 4, "Slow_queries {count}");

    // A rotation moves the file; FLUSH SLOW LOGS reopens it by name.
    std::fs::rename(&file, data.join("rotated.log")).expect("rotate");
    c.query_drop("SET long_query_time = 0").await.expect("set");
    c.query_drop("FLUSH SLOW LOGS").await.expect("flush");
    c.query_drop("SELECT v FROM t WHERE id = 2 /* after */").await.expect("select");
    let fresh = std::fs::read_to_string(&file).expect("new slow log");
    assert!(fresh.contains("/* after */"), "{fresh}");
    assert!(!std::fs::read_to_string(data.join("rotated.log")).expect("old").contains("/* after */"));
}

/// statements_summary aggregates every account's statements; an account without PROCESS
/// sees only the rows of statements it ran, one with PROCESS sees them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn statements_summary_shows_an_account_its_own_statements() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let pool = server.pool(None);
    let mut root = pool.get_conn().await.expect("connect");
    for sql in [
        "CREATE DATABASE app",
        "CREATE TABLE app.t (id INT PRIMARY KEY, v INT)",
        "INSERT INTO app.t VALUES (1, 10)",
        "CREATE USER viewer IDENTIFIED BY 'pw'",
        "GRANT SELECT ON app.* TO viewer",
    ] {
        root.query_drop(sql).await.expect(sql);
    }
    let url = format!("mysql://viewer:pw@127.0.0.1:{}/app", server.port);
    let opts =
        mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&url).expect("url")).prefer_socket(false);
    let mut viewer = mysql_async::Conn::new(opts).await.expect("viewer connects");
    viewer.query_drop("SELECT v FROM t WHERE id = 1").await.expect("select");
    let summary = "SELECT DIGEST_TEXT, SAMPLE_USER, EXEC_COUNT FROM information_schema.statements_summary \
                   WHERE DIGEST_TEXT LIKE '%from t where%' OR DIGEST_TEXT LIKE 'insert into app%' ORDER BY DIGEST_TEXT";
    let seen: Vec<Row> = viewer.query(summary).await.expect("viewer reads the summary");
    let seen: Vec<(String, String, u64)> = seen.into_iter().map(mysql_async::from_row).collect();
    assert_eq!(seen, vec![("select v from t where id = ?".to_string(), "viewer".to_string(), 1)]);
    let all: Vec<Row> = root.query(summary).await.expect("root reads the summary");
    let all: Vec<(String, String, u64)> = all.into_iter().map(mysql_async::from_row).collect();
    assert_eq!(
        all,
        vec![
            ("insert into app . t values ( ... )".to_string(), "root".to_string(), 1),
            ("select v from t where id = ?".to_string(), "viewer".to_string(), 1),
        ]
    );
    // A SQL-level EXECUTE is summarized once, as its prepared statement.
    root.query_drop("PREPARE q FROM 'SELECT v FROM app.t WHERE id = ?'").await.expect("prepare");
    root.query_drop("SET @id = 1").await.expect("set");
    for _ in 0..3 {
        root.query_drop("EXECUTE q USING @id").await.expect("execute");
    }
    let rows: Vec<(String, u64)> = root
        .query(
            "SELECT DIGEST_TEXT, EXEC_COUNT FROM information_schema.statements_summary \
             WHERE DIGEST_TEXT LIKE 'select v from app%' OR DIGEST_TEXT LIKE 'execute q%'",
        )
        .await
        .expect("summary");
    assert_eq!(rows, vec![("select v from app . t where id = ?".to_string(), 3)]);
}
