//! Table statistics against a Strata server started by the test: ANALYZE TABLE answers as
//! MySQL does (a row per table, a missing table a row, not an error), the statistics show in
//! TiDB's SHOW STATS_* and in information_schema / SHOW INDEX, survive a restart, are
//! gathered again by auto-analyze once enough rows change, and decide the join order: the
//! selective table drives index lookups into the large one, with the same answer.

mod common;

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::{Conn, Error, Row};

fn server_code(e: &Error) -> Option<u16> {
    match e {
        Error::Server(s) => Some(s.code),
        _ => None,
    }
}

fn text(rows: Vec<Row>) -> Vec<Vec<Option<String>>> {
    rows.into_iter().map(|r| (0..r.len()).map(|i| r.get::<Option<String>, _>(i).flatten()).collect()).collect()
}

/// SHOW STATS_META's (Modify_count, Row_count) of `s.<table>`, if it was analyzed.
async fn stats_meta(c: &mut Conn, table: &str) -> Option<(i64, i64)> {
    let rows: Vec<Row> = c.query(format!("SHOW STATS_META WHERE Table_name = '{table}'")).await.expect("stats_meta");
    rows.into_iter().next().map(|r| (r.get::<i64, _>(4).expect("modify"), r.get::<i64, _>(5).expect("rows")))
}

/// Inserts `n` rows into `s.big`: id from `from`, fk = id % 100 (a part key), v = id.
async fn fill_big(c: &mut Conn, from: i64, n: i64) {
    for start in (from..from + n).step_by(500) {
        let values: Vec<String> =
            (start..(start + 500).min(from + n)).map(|i| format!("({i}, {}, {i}, NULL)", i % 100)).collect();
        c.query_drop(format!("INSERT INTO s.big VALUES {}", values.join(","))).await.expect("insert big");
    }
}

async fn setup(c: &mut Conn) {
    for sql in [
        "CREATE DATABASE s",
        "CREATE TABLE s.big (id INT PRIMARY KEY, fk INT NOT NULL, v INT, note VARCHAR(10), KEY idx_fk (fk))",
        "CREATE TABLE s.small (id INT PRIMARY KEY, tag VARCHAR(10) NOT NULL, grp INT)",
    ] {
        c.query_drop(sql).await.expect(sql);
    }
    fill_big(c, 0, 5_000).await;
    let values: Vec<String> =
        (0..100).map(|i| format!("({i}, '{}', {})", if i % 25 == 3 { "rare" } else { "common" }, i % 4)).collect();
    c.query_drop(format!("INSERT INTO s.small VALUES {}", values.join(","))).await.expect("insert small");
}

/// A server on a fresh data directory with `setup`'s tables, and a connection to it.
async fn started_with_tables() -> (tempfile::TempDir, common::StrataProcess, Conn) {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let mut c = server.pool(None).get_conn().await.expect("connect");
    setup(&mut c).await;
    (dir, server, c)
}

const JOIN: &str = "SELECT small.id, COUNT(*), SUM(big.v) FROM s.big, s.small \
                    WHERE big.fk = small.id AND small.tag = 'rare' GROUP BY small.id ORDER BY small.id";

async fn plan(c: &mut Conn) -> Vec<String> {
    let rows: Vec<String> = c.query(format!("EXPLAIN {JOIN}")).await.expect("explain");
    rows.into_iter().map(|l| l.trim().to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analyze_gathers_statistics_that_persist_and_order_joins() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut server = common::StrataProcess::start(&data);
    let pool = server.pool(None);
    let mut c = pool.get_conn().await.expect("connect");
    setup(&mut c).await;

    // Before statistics: the written order, big first, small looked up by its key.
    let before = plan(&mut c).await;
    let answer: Vec<Row> = c.query(JOIN).await.expect("join");
    let answer = text(answer);
    assert_eq!(answer.len(), 4, "parts 3, 28, 53, 78 are rare: {answer:?}");
    assert!(
        before.iter().position(|l| l.contains("table:big")) < before.iter().position(|l| l.contains("table:small"))
    );
    assert_eq!(stats_meta(&mut c, "big").await, None);

    // ANALYZE: a row per table, MySQL's rows for a missing one.
    let rows: Vec<Row> = c.query("ANALYZE TABLE s.big, s.small, s.nope").await.expect("analyze");
    let rows = text(rows);
    let s = |v: &str| Some(v.to_string());
    assert_eq!(
        rows,
        vec![
            vec![s("s.big"), s("analyze"), s("status"), s("OK")],
            vec![s("s.small"), s("analyze"), s("status"), s("OK")],
            vec![s("s.nope"), s("analyze"), s("Error"), s("Table 's.nope' doesn't exist")],
            vec![s("s.nope"), s("analyze"), s("status"), s("Operation failed")],
        ]
    );
    assert_eq!(stats_meta(&mut c, "big").await, Some((0, 5_000)));
    assert_eq!(stats_meta(&mut c, "small").await, Some((0, 100)));
    let hist: Vec<Row> = c.query("SHOW STATS_HISTOGRAMS WHERE Table_name = 'big'").await.expect("histograms");
    let hist: Vec<(String, i64, i64, i64)> = hist
        .into_iter()
        .map(|r| {
            (r.get(3).expect("column"), r.get(4).expect("column"), r.get(6).expect("column"), r.get(7).expect("column"))
        })
        .collect();
    assert!(hist.contains(&("id".into(), 0, 5_000, 0)), "{hist:?}");
    assert!(hist.contains(&("fk".into(), 0, 100, 0)), "{hist:?}");
    assert!(hist.contains(&("note".into(), 0, 0, 5_000)), "{hist:?}");
    assert!(hist.contains(&("idx_fk".into(), 1, 100, 0)), "{hist:?}");
    let topn: Vec<Row> = c.query("SHOW STATS_TOPN LIKE 'small'").await.expect("topn");
    let topn: Vec<(String, String, i64)> = topn
        .into_iter()
        .map(|r| (r.get(3).expect("column"), r.get(5).expect("column"), r.get(6).expect("column")))
        .collect();
    assert!(topn.contains(&("tag".into(), "common".into(), 96)), "{topn:?}");
    let buckets: Vec<Row> =
        c.query("SHOW STATS_BUCKETS WHERE Table_name = 'big' AND Column_name = 'id'").await.expect("buckets");
    let last = buckets.last().expect("the id column has a histogram");
    assert_eq!(
        (last.get::<i64, _>(6).expect("column"), last.get::<String, _>(9).expect("column")),
        (5_000, "4999".to_string())
    );
    let rows_shown: Option<i64> = c
        .query_first("SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = 's' AND TABLE_NAME = 'big'")
        .await
        .expect("tables");
    assert_eq!(rows_shown, Some(5_000));
    let index: Vec<Row> = c.query("SHOW INDEX FROM s.big").await.expect("show index");
    let cardinality: Vec<(String, i64)> = index
        .into_iter()
        .map(|r| (r.get::<String, _>(2).expect("column"), r.get::<i64, _>(6).expect("column")))
        .collect();
    assert_eq!(cardinality, vec![("PRIMARY".to_string(), 5_000), ("idx_fk".to_string(), 100)]);

    // With statistics the few rare parts come first and drive lookups through idx_fk.
    let after = plan(&mut c).await;
    let small = after.iter().position(|l| l.contains("table:small")).expect("small is read");
    let big = after.iter().position(|l| l.contains("table:big")).expect("big is read");
    assert!(small < big, "{after:?}");
    assert!(after[big].contains("IndexLookUp index:idx_fk"), "{after:?}");
    let again: Vec<Row> = c.query(JOIN).await.expect("join");
    assert_eq!(text(again), answer);

    // Statistics survive a restart.
    drop(c);
    pool.disconnect().await.expect("disconnect");
    server.stop();
    let server = common::StrataProcess::start(&data);
    let pool = server.pool(None);
    let mut c = pool.get_conn().await.expect("connect");
    assert_eq!(stats_meta(&mut c, "big").await, Some((0, 5_000)));
    assert_eq!(plan(&mut c).await, after);

    // As go-tpc sends it: TiDB's session settings and ANALYZE in one multi-statement text;
    // the ANALYZE there runs too (a row per table).
    let mut results = c
        .query_iter("SET @@session.tidb_build_stats_concurrency=4; SET @@session.tidb_distsql_scan_concurrency=15; ANALYZE TABLE s.small")
        .await
        .expect("multi-statement analyze");
    let mut sets = Vec::new();
    while !results.is_empty() {
        let rows: Vec<Row> = results.collect().await.expect("result set");
        sets.push(rows.len());
    }
    drop(results);
    assert_eq!(sets, vec![0, 0, 1], "two SETs, then ANALYZE's row");

    // Errors: no table named, no privileges.
    let e = c.query_drop("ANALYZE TABLE").await.expect_err("no table");
    assert_eq!(server_code(&e), Some(1064));
    c.query_drop("CREATE USER 'u'@'%'").await.expect("user");
    c.query_drop("GRANT SELECT ON s.small TO 'u'@'%'").await.expect("grant");
    let url = server.url(None).replacen("root", "u", 1);
    let opts =
        mysql_async::OptsBuilder::from_opts(mysql_async::Opts::from_url(&url).expect("url")).prefer_socket(false);
    let mut u = Conn::new(opts).await.expect("connect as u");
    let e = u.query_drop("ANALYZE TABLE s.small").await.expect_err("needs INSERT too");
    assert_eq!(server_code(&e), Some(1142));
    let metas: Vec<Row> = u.query("SHOW STATS_META").await.expect("stats_meta as u");
    let tables: Vec<String> = metas.into_iter().map(|r| r.get(1).expect("column")).collect();
    assert_eq!(tables, vec!["small".to_string()], "only tables the account may see");
    drop(u);

    // Auto-analyze: enough new rows (over half the table and at least 1000) bring the
    // statistics up to date by themselves.
    // A table of fewer than 1000 rows is not analyzed again however often it is written
    // (TiDB's AutoAnalyzeMinCnt): 1,500 row writes to the 100 small rows leave its
    // statistics as they were.
    async fn analyzed_at(c: &mut Conn) -> String {
        let rows: Vec<Row> = c.query("SHOW STATS_META WHERE Table_name = 'small'").await.expect("stats_meta");
        rows[0].get::<String, _>(3).expect("update time")
    }
    let small_at = analyzed_at(&mut c).await;
    for _ in 0..15 {
        c.query_drop("UPDATE s.small SET grp = grp + 1").await.expect("update small");
    }
    fill_big(&mut c, 10_000, 3_000).await;
    assert_eq!(stats_meta(&mut c, "big").await, Some((3_000, 5_000)));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some((modified, 8_000)) = stats_meta(&mut c, "big").await {
            assert_eq!(modified, 0);
            break;
        }
        assert!(Instant::now() < deadline, "auto-analyze never ran: {:?}", stats_meta(&mut c, "big").await);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(analyzed_at(&mut c).await, small_at, "the small table was analyzed again");
    assert_eq!(stats_meta(&mut c, "small").await.map(|m| m.1), Some(100));
    // Dropping a table drops its statistics.
    c.query_drop("DROP TABLE s.small").await.expect("drop");
    assert_eq!(stats_meta(&mut c, "small").await, None);
}

/// EXPLAIN ANALYZE runs the query on the engine the optimizer picks and shows, per
/// operator, the estimate next to what happened; it needs the privileges the query needs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_analyze_shows_estimated_and_actual_rows_per_operator() {
    let (_dir, server, mut c) = started_with_tables().await;
    c.query_drop("ANALYZE TABLE s.big, s.small").await.expect("analyze");

    // Row engine: the rare parts (4 of 100) drive 4 index lookups of 50 rows each.
    c.query_drop("SET SESSION tidb_isolation_read_engines = 'tikv'").await.expect("set");
    let lines: Vec<String> = c.query(format!("EXPLAIN ANALYZE {JOIN}")).await.expect("explain analyze");
    let line = |what: &str| lines.iter().find(|l| l.contains(what)).cloned().unwrap_or_default();
    let small = line("table:small");
    assert!(small.contains("estRows:4 ") && small.contains("actRows:4 runs:1 "), "{lines:#?}");
    let big = line("table:big");
    assert!(big.contains("IndexLookUp index:idx_fk"), "{lines:#?}");
    assert!(big.contains("actRows:200 runs:4 "), "{lines:#?}");
    assert!(line("HashAgg").contains("actRows:4 "), "{lines:#?}");
    assert!(lines.last().is_some_and(|l| l.starts_with("Rows: 4, execution time: ")), "{lines:#?}");
    let time = |l: &str| -> f64 {
        let t = l.split("time:").nth(1).and_then(|t| t.split("ms").next()).expect("a time");
        t.parse().expect("milliseconds")
    };
    assert!(time(&small) > 0.0 && time(&line("Projection")) >= time(&big), "{lines:#?}");
    // The query's answer is unchanged by having been explained.
    let answer: Vec<Row> = c.query(JOIN).await.expect("join");
    assert_eq!(text(answer).len(), 4);

    // Column engine: DataFusion's operators with their metrics.
    c.query_drop("SET SESSION tidb_isolation_read_engines = 'tiflash'").await.expect("set");
    let lines: Vec<String> = c.query(format!("EXPLAIN ANALYZE {JOIN}")).await.expect("explain analyze");
    assert!(lines[0].starts_with("ColumnEngine (DataFusion)"), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("HashJoinExec") && l.contains("metrics=[output_rows=200")), "{lines:#?}");
    assert!(lines.last().is_some_and(|l| l.starts_with("Rows: 4, execution time: ")), "{lines:#?}");

    // Only a query can be explained with ANALYZE, and only by someone who may run it.
    let err = c.query_drop("EXPLAIN ANALYZE DELETE FROM s.big").await.expect_err("DML");
    assert_eq!(server_code(&err), Some(1235));
    assert_eq!(c.query_first::<i64, _>("SELECT COUNT(*) FROM s.big").await.expect("count"), Some(5_000));
    c.query_drop("CREATE USER 'peek'@'%' IDENTIFIED BY 'pw'").await.expect("create user");
    c.query_drop("GRANT SELECT ON s.small TO 'peek'@'%'").await.expect("grant");
    let opts = mysql_async::OptsBuilder::default()
        .ip_or_hostname("127.0.0.1")
        .tcp_port(server.port)
        .user(Some("peek"))
        .pass(Some("pw"))
        .prefer_socket(false);
    let mut peek = Conn::new(opts).await.expect("peek logs in");
    for sql in [format!("EXPLAIN ANALYZE {JOIN}"), format!("EXPLAIN {JOIN}")] {
        let err = peek.query_drop(&sql).await.expect_err("no SELECT on s.big");
        assert_eq!(server_code(&err), Some(1142), "{sql}");
    }
    let own: Vec<String> = peek.query("EXPLAIN ANALYZE SELECT COUNT(*) FROM s.small").await.expect("own table");
    assert!(own.last().is_some_and(|l| l.starts_with("Rows: 1,")), "{own:#?}");
}

/// information_schema.OPTIMIZER_TRACE's rows, as text.
async fn trace_rows(c: &mut Conn) -> Vec<Vec<Option<String>>> {
    let rows: Vec<Row> = c
        .query(
            "SELECT QUERY, TRACE, MISSING_BYTES_BEYOND_MAX_MEM_SIZE, INSUFFICIENT_PRIVILEGES \
             FROM information_schema.OPTIMIZER_TRACE",
        )
        .await
        .expect("trace");
    text(rows)
}

/// MySQL's optimizer trace: off by default; with `SET optimizer_trace = 'enabled=on'` the
/// last statement's plan after each rule is in information_schema.OPTIMIZER_TRACE (reading
/// it does not replace it), bounded by optimizer_trace_max_mem_size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn optimizer_trace_shows_the_plan_after_each_rule() {
    let (_dir, _server, mut c) = started_with_tables().await;
    assert_eq!(trace_rows(&mut c).await, Vec::<Vec<Option<String>>>::new());
    let flags: Option<String> = c.query_first("SELECT @@optimizer_trace").await.expect("var");
    assert_eq!(flags.as_deref(), Some("enabled=off,one_line=off"));

    let err = c.query_drop("SET optimizer_trace = 'enabled=maybe'").await.expect_err("bad flag");
    assert_eq!(server_code(&err), Some(1231));
    c.query_drop("SET optimizer_trace = 'enabled=on'").await.expect("set");
    let flags: Option<String> = c.query_first("SELECT @@optimizer_trace").await.expect("var");
    assert_eq!(flags.as_deref(), Some("enabled=on,one_line=off"));

    // A LEFT JOIN whose right side WHERE needs non-NULL is an inner join; 1 + 1 folds.
    let query = "SELECT small.id, big.v FROM s.small LEFT JOIN s.big ON big.fk = small.id \
                 WHERE big.v < 1 + 1 ORDER BY small.id";
    let rows: Vec<Row> = c.query(query).await.expect("query");
    assert_eq!(text(rows), [[Some("0".into()), Some("0".into())], [Some("1".into()), Some("1".into())]]);
    let rows = trace_rows(&mut c).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let [sql, trace, missing, privileges] = &rows[0][..] else { panic!("four columns: {rows:?}") };
    assert!(sql.as_deref().is_some_and(|q| q.contains("LEFT JOIN") && q.contains("big.v < 1 + 1")), "{sql:?}");
    assert_eq!((missing.as_deref(), privileges.as_deref()), (Some("0"), Some("0")));
    let doc: serde_json::Value = serde_json::from_str(trace.as_deref().expect("trace")).expect("JSON");
    let steps = doc["steps"].as_array().expect("steps");
    let step = |rule: &str| {
        let s = steps.iter().find(|s| s["rule"] == rule).unwrap_or_else(|| panic!("{rule} in {doc:#}"));
        s["plan"].as_array().expect("plan").iter().map(|l| l.as_str().expect("line")).collect::<Vec<_>>().join("\n")
    };
    assert_eq!(
        steps.iter().map(|s| s["rule"].as_str().expect("rule")).collect::<Vec<_>>(),
        std::iter::once("bound")
            .chain(strata_sql::rules::RULES.iter().map(|r| strata_sql::rules::Rule::name(*r)))
            .collect::<Vec<_>>()
    );
    assert!(step("bound").contains("Literal(Int(1)), Literal(Int(1))"), "{doc:#}");
    assert!(step("fold_constants").contains("Literal(Int(2))"), "{doc:#}");
    assert!(step("predicate_pushdown").contains("inputs:[inner; left on"), "{doc:#}");
    assert!(step("outer_to_inner").contains("inputs:[inner; inner on"), "{doc:#}");

    // Statements that plan nothing leave the trace; a small memory limit cuts it.
    c.query_drop("SET @x = 1").await.expect("set");
    assert_eq!(trace_rows(&mut c).await.len(), 1);
    c.query_drop("SET optimizer_trace_max_mem_size = 100").await.expect("set");
    let _: Vec<Row> = c.query("SELECT * FROM s.small WHERE id = 3").await.expect("query");
    let rows = trace_rows(&mut c).await;
    let missing: i64 = rows[0][2].as_deref().expect("missing").parse().expect("a number");
    assert!(missing > 0, "{rows:?}");
    assert!(rows[0][0].as_deref().is_some_and(|q| q.contains("id = 3")), "{rows:?}");

    // Turned off, statements are not traced; the last trace stays readable.
    c.query_drop("SET optimizer_trace = 'enabled=off'").await.expect("set");
    let _: Vec<Row> = c.query("SELECT 1").await.expect("query");
    assert!(trace_rows(&mut c).await[0][0].as_deref().is_some_and(|q| q.contains("id = 3")));
}

/// The prepared plan cache over the binary protocol: the second execution of a statement
/// reuses its plan for other parameter values (with their own answers); new statistics make
/// it stale; tidb_prepared_plan_cache_size bounds the plans kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prepared_plans_are_reused_until_statistics_change() {
    let (_dir, _server, mut c) = started_with_tables().await;
    c.query_drop("ANALYZE TABLE s.big, s.small").await.expect("analyze");
    async fn from_cache(c: &mut Conn) -> i64 {
        c.query_first("SELECT @@last_plan_from_cache").await.expect("var").expect("a row")
    }
    let count = c.prep("SELECT COUNT(*), SUM(v) FROM s.big WHERE fk = ?").await.expect("prepare");
    let mut answers = Vec::new();
    for fk in [3, 7, 3] {
        answers.push(c.exec_first::<(i64, i64), _, _>(&count, (fk,)).await.expect("execute").expect("a row"));
        answers.push((from_cache(&mut c).await, fk));
    }
    // fk = id % 100 over ids 0..5000: 50 rows each, v = id.
    let sum = |fk: i64| (0..50).map(|k| k * 100 + fk).sum::<i64>();
    assert_eq!(answers, [(50, sum(3)), (0, 3), (50, sum(7)), (1, 7), (50, sum(3)), (1, 3)]);

    c.query_drop("ANALYZE TABLE s.big").await.expect("analyze");
    let _ = c.exec_first::<(i64, i64), _, _>(&count, (5,)).await.expect("execute");
    assert_eq!(from_cache(&mut c).await, 0, "new statistics make the plan stale");
    let _ = c.exec_first::<(i64, i64), _, _>(&count, (5,)).await.expect("execute");
    assert_eq!(from_cache(&mut c).await, 1);

    // DML plans too: a prepared UPDATE and INSERT reuse theirs, each execution with its
    // own values.
    let retag = c.prep("UPDATE s.small SET tag = ? WHERE id = ?").await.expect("prepare");
    let add = c.prep("INSERT INTO s.small (id, tag) VALUES (?, ?)").await.expect("prepare");
    for (tag, id) in [("x", 3), ("y", 4)] {
        c.exec_drop(&retag, (tag, id)).await.expect("update");
        answers.push((from_cache(&mut c).await, id));
        c.exec_drop(&add, (id + 1000, tag)).await.expect("insert");
        answers.push((from_cache(&mut c).await, id + 1000));
    }
    assert_eq!(answers[6..], [(0, 3), (0, 1003), (1, 4), (1, 1004)]);
    let rows: Vec<(i64, String)> =
        c.query("SELECT id, tag FROM s.small WHERE id IN (3, 4, 1003, 1004) ORDER BY id").await.expect("query");
    let expected = [(3, "x"), (4, "y"), (1003, "x"), (1004, "y")].map(|(i, t)| (i, t.to_string()));
    assert_eq!(rows, expected);
    let dup = c.exec_drop(&add, (1003, "z")).await.expect_err("duplicate");
    assert_eq!(server_code(&dup), Some(1062), "a cached INSERT plan still checks keys");

    // One plan per session: two statements in turn push each other out.
    c.query_drop("SET tidb_prepared_plan_cache_size = 1").await.expect("set");
    let other = c.prep("SELECT tag FROM s.small WHERE id = ?").await.expect("prepare");
    for _ in 0..2 {
        let _: Option<String> = c.exec_first(&other, (3,)).await.expect("execute");
        assert_eq!(from_cache(&mut c).await, 0);
        let _ = c.exec_first::<(i64, i64), _, _>(&count, (5,)).await.expect("execute");
        assert_eq!(from_cache(&mut c).await, 0);
    }
    let err = c.query_drop("SET tidb_prepared_plan_cache_size = 0").await.expect_err("size 0");
    assert_eq!(server_code(&err), Some(1231));
}

/// A table reached by index lookup costs, per row joined before it, the rows its fixed key
/// prefix matches: TPC-C's Stock-Level shape (a range of order lines, each line's stock row
/// by key) starts from the order lines even though fewer stock rows pass their own filter,
/// since stock first would read the whole order-line range once per stock row.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_join_is_costed_by_the_rows_each_lookup_reads() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let mut c = server.pool(None).get_conn().await.expect("connect");
    for sql in [
        "CREATE DATABASE t",
        "CREATE TABLE t.stock (w INT, i INT, q INT, PRIMARY KEY (w, i))",
        "CREATE TABLE t.line (w INT, d INT, o INT, n INT, i INT, PRIMARY KEY (w, d, o, n))",
    ] {
        c.query_drop(sql).await.expect(sql);
    }
    // 2 warehouses x 500 items, quantity i % 100; 2 warehouses x 2 districts x 100 orders
    // x 5 lines, each line an item.
    let stock: Vec<String> = (0..1000).map(|k| format!("({}, {}, {})", k / 500, k % 500, (k % 500) % 100)).collect();
    c.query_drop(format!("INSERT INTO t.stock VALUES {}", stock.join(","))).await.expect("stock");
    let lines: Vec<String> = (0..2000)
        .map(|k| format!("({}, {}, {}, {}, {})", k / 1000, (k / 500) % 2, (k / 5) % 100, k % 5, (k * 7) % 500))
        .collect();
    c.query_drop(format!("INSERT INTO t.line VALUES {}", lines.join(","))).await.expect("lines");
    c.query_drop("ANALYZE TABLE t.stock, t.line").await.expect("analyze");
    // 50 stock rows pass q < 10; the order range holds 250 lines.
    let q = "SELECT COUNT(DISTINCT stock.i) FROM t.line, t.stock WHERE line.w = 1 AND line.d = 1 \
             AND line.o >= 50 AND line.o < 100 AND stock.w = 1 AND stock.i = line.i AND stock.q < 10";
    let rows: Vec<Row> = c.query(format!("EXPLAIN {q}")).await.expect("explain");
    let lines: Vec<String> = text(rows).into_iter().filter_map(|r| r[0].clone()).collect();
    let at = |t: &str| lines.iter().position(|l| l.contains(t));
    assert!(at("table:line") < at("table:stock"), "{lines:#?}");
    assert!(lines.iter().any(|l| l.contains("PointGet") && l.contains("table:stock")), "{lines:#?}");
    let n: i64 = c.query_first(q).await.expect("query").expect("a row");
    // Lines of orders 50..100 in warehouse 1, district 1: k in 1500 + 250..500, item (7k) % 500.
    let expected: std::collections::BTreeSet<i64> =
        (1750..2000).map(|k| (k * 7) % 500).filter(|i| i % 100 < 10).collect();
    assert_eq!(n, expected.len() as i64);
}

/// SHOW STATS_HISTOGRAMS' Distinct_count of column `column` of `s.<table>`.
async fn column_ndv(c: &mut Conn, table: &str, column: &str) -> Option<i64> {
    let rows: Vec<Row> = c
        .query(format!(
            "SHOW STATS_HISTOGRAMS WHERE Table_name = '{table}' AND Column_name = '{column}' AND Is_index = 0"
        ))
        .await
        .expect("stats_histograms");
    rows.into_iter().next().and_then(|r| r.get::<i64, _>(6))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analyze_with_samples_reads_part_of_a_large_table() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let mut c = server.pool(None).get_conn().await.expect("connect");
    c.query_drop("CREATE DATABASE s").await.expect("db");
    c.query_drop("CREATE TABLE s.samp (id INT PRIMARY KEY, grp INT NOT NULL, pad VARCHAR(200))").await.expect("table");
    // 60,000 rows of ~150 bytes in commits of 2,000 (each large enough to become a table
    // file, where the store can tell how its bytes lie); pad is hex that does not compress.
    let mut state = 0x2545_f491_4f6c_dd1d_u64;
    for start in (0..60_000).step_by(2_000) {
        let values: Vec<String> = (start..start + 2_000)
            .map(|i| {
                let pad: String = (0..8)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        format!("{state:016x}")
                    })
                    .collect();
                format!("({i}, {}, '{pad}')", i % 50)
            })
            .collect();
        c.query_drop(format!("INSERT INTO s.samp VALUES {}", values.join(","))).await.expect("insert");
    }
    let status: Vec<Row> = c.query("ANALYZE TABLE s.samp WITH 5000 SAMPLES").await.expect("sampled analyze");
    assert_eq!(text(status)[0][3].as_deref(), Some("OK"));
    let (_, rows) = stats_meta(&mut c, "samp").await.expect("analyzed");
    assert!((45_000..=75_000).contains(&rows), "estimated {rows} rows of 60000");
    // A unique column is unique in the sample; one of 50 values shows each many times.
    assert_eq!(column_ndv(&mut c, "samp", "id").await, Some(rows));
    assert_eq!(column_ndv(&mut c, "samp", "grp").await, Some(50));
    // A rate of the rows last counted samples too; reading every row counts exactly.
    c.query_drop("ANALYZE TABLE s.samp WITH 0.1 SAMPLERATE").await.expect("rate");
    let (_, rows) = stats_meta(&mut c, "samp").await.expect("analyzed");
    assert!((45_000..=75_000).contains(&rows), "estimated {rows} rows of 60000");
    c.query_drop("ANALYZE TABLE s.samp").await.expect("full analyze");
    assert_eq!(stats_meta(&mut c, "samp").await.map(|m| m.1), Some(60_000));
    assert_eq!(column_ndv(&mut c, "samp", "grp").await, Some(50));
    // Options out of range are refused, as TiDB refuses them.
    for bad in ["ANALYZE TABLE s.samp WITH 0 SAMPLES", "ANALYZE TABLE s.samp WITH 1.5 SAMPLERATE"] {
        let e = c.query_drop(bad).await.expect_err(bad);
        assert_eq!(server_code(&e), Some(1105), "{bad}: {e}");
    }
    // A small table is read whole whatever the option says: exact.
    c.query_drop("CREATE TABLE s.few (id INT PRIMARY KEY)").await.expect("few");
    c.query_drop("INSERT INTO s.few VALUES (1), (2), (3)").await.expect("few rows");
    c.query_drop("ANALYZE TABLE s.few WITH 1000 SAMPLES").await.expect("few analyze");
    assert_eq!(stats_meta(&mut c, "few").await.map(|m| m.1), Some(3));
}
