//! `strata bench tpch` end to end against a Strata server started by the test: prepare loads
//! scale factor 0.01 through the server, check runs the queries and compares each with the
//! committed DuckDB reference answer, repeats are timed one by one, and a wrong answer fails
//! the check naming the query.

mod common;

use std::process::{Command, Output};

fn bench(port: u16, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "tpch"])
        .args(args)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .output()
        .expect("run strata bench")
}

fn text(o: &Output) -> String {
    format!("stdout:\n{}\nstderr:\n{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpch_prepare_and_check_at_sf_001_against_strata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let port = server.port;

    let out = bench(port, &["prepare", "--sf", "0.01", "--threads", "2"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("loaded TPC-H sf 0.01"), "{}", text(&out));

    // Every query must match the reference answer.
    let json = dir.path().join("tpch.json");
    let out = bench(port, &["check", "--timeout", "300s", "--label", "strata-test", "--json", &json.to_string_lossy()]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("check: 22 of 22 queries match"), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("valid json");
    assert_eq!(report["sf"].as_f64(), Some(0.01), "scale factor worked out from the data");
    assert_eq!(report["label"], "strata-test");
    let queries = report["queries"].as_array().expect("queries");
    assert_eq!(queries.len(), 22);
    assert!(queries.iter().all(|q| q["check"] == "pass" && q["times_s"].as_array().map(|t| t.len()) == Some(1)));

    // The same check with the column engine forced: every query it can translate runs on
    // DataFusion and must give the reference answer; the others fall back to the row engine.
    {
        let pool = server.pool(Some("tpch"));
        common::exec(&pool, &["SET GLOBAL tidb_isolation_read_engines = 'tiflash'"]).await;
        let out = bench(port, &["check", "--timeout", "300s"]);
        assert!(out.status.success(), "{}", text(&out));
        assert!(String::from_utf8_lossy(&out.stdout).contains("check: 22 of 22 queries match"), "{}", text(&out));
        let mut conn = pool.get_conn().await.expect("connect");
        let ran: Option<(String, u64)> = mysql_async::prelude::Queryable::query_first(
            &mut conn,
            "SHOW GLOBAL STATUS LIKE 'Strata_columnar_queries'",
        )
        .await
        .expect("status");
        let ran = ran.map(|r| r.1).unwrap_or(0);
        eprintln!("column engine answered {ran} of the 22 TPC-H queries");
        assert!(ran >= 12, "the column engine answered only {ran} of the 22 queries");
        common::exec(&pool, &["SET GLOBAL tidb_isolation_read_engines = 'tikv,tiflash,tidb'"]).await;
        drop(conn);
        pool.disconnect().await.expect("disconnect");
    }

    // The results chart: the run as labelled bars, and the ratio table on stdout.
    let svg = dir.path().join("report.svg");
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "report", &json.to_string_lossy(), "--out", &svg.to_string_lossy(), "--title", "bench test"])
        .output()
        .expect("run strata bench report");
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("| strata-test | 0.01 | 22/22 |"), "{}", text(&out));
    let svg = std::fs::read_to_string(&svg).expect("svg written");
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"") && svg.trim_end().ends_with("</svg>"));
    assert!(svg.contains("strata-test: SF 0.01, 22 of 22 queries answered") && svg.contains(">Q22</text>"));
    assert_eq!(svg.matches("strata-test Q").count(), 22, "one bar per query");

    // Repeats are timed one by one.
    let out = bench(port, &["run", "--queries", "6", "--repeat", "3", "--json", &json.to_string_lossy()]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("valid json");
    assert_eq!(report["queries"][0]["times_s"].as_array().map(|t| t.len()), Some(3));

    // A query over its time limit is reported as a timeout and stopped on the server (KILL
    // QUERY); the run goes on with the next query on a new connection.
    let out = bench(port, &["run", "--queries", "18,6", "--timeout", "1ms", "--json", &json.to_string_lossy()]);
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("valid json");
    assert_eq!(report["queries"][0]["status"], "timeout", "{report}");
    assert_eq!(report["queries"].as_array().map(Vec::len), Some(2), "the run went on after the timeout");
    let mut conn = server.pool(Some("tpch")).get_conn().await.expect("connect");
    let n: Option<i64> = mysql_async::prelude::Queryable::query_first(&mut conn, "SELECT COUNT(*) FROM region")
        .await
        .expect("the server still answers");
    assert_eq!(n, Some(5));

    // A wrong answer fails the check and names the query.
    mysql_async::prelude::Queryable::query_drop(&mut conn, "DELETE FROM region WHERE r_name = 'ASIA'")
        .await
        .expect("delete");
    let out = bench(port, &["check", "--queries", "6,22,5"]);
    assert!(!out.status.success());
    let t = text(&out);
    assert!(t.contains("Q5  check: fail") && t.contains("Q6  check: pass"), "{t}");
    assert!(t.contains("1 of 3 queries do not match: Q5"), "{t}");

    // An unknown query number is a usage error.
    let out = bench(port, &["run", "--queries", "23"]);
    assert!(!out.status.success());
    assert!(text(&out).contains("numbered 1 to 22"), "{}", text(&out));
}
