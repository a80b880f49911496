//! `strata bench tpcc` end to end against a Strata server started by the test: prepare loads
//! one warehouse through the server, a 20-second run in the binary protocol and a short one in
//! the text protocol complete every transaction kind without errors, the JSON results say so,
//! and check finds all twelve consistency conditions holding afterwards; cleanup drops it all.

mod common;

use std::process::{Command, Output};

use mysql_async::prelude::Queryable;

fn bench(port: u16, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "tpcc"])
        .args(args)
        .args(["--host", "127.0.0.1", "--port", &port.to_string()])
        .output()
        .expect("run strata bench");
    assert!(
        out.status.success(),
        "strata bench tpcc {args:?} failed:\nstdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn assert_clean_run(json: &std::path::Path, seconds: f64) -> serde_json::Value {
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(json).expect("json written")).expect("valid json");
    assert_eq!(report["benchmark"], "tpcc");
    assert_eq!(report["warehouses"], 1);
    assert_eq!(report["time_s"].as_f64(), Some(seconds));
    for kind in ["NEW_ORDER", "PAYMENT", "ORDER_STATUS", "DELIVERY", "STOCK_LEVEL"] {
        let k = &report["kinds"][kind];
        assert!(k["count"].as_u64().unwrap_or(0) > 0, "no {kind} completed: {report}");
        assert_eq!(k["errors"].as_u64(), Some(0), "{kind} had errors: {}", report["errors"]);
        assert!(k["p99_ms"].as_f64().unwrap_or(0.0) >= k["p50_ms"].as_f64().unwrap_or(0.0));
    }
    let new_orders = report["kinds"]["NEW_ORDER"]["count"].as_f64().unwrap_or(0.0);
    let tpmc = report["tpmc"].as_f64().unwrap_or(0.0);
    assert!((tpmc - new_orders / (seconds / 60.0)).abs() < 1e-6, "tpmC {tpmc} from {new_orders} New-Orders");
    assert!(!report["intervals"].as_array().map(|a| a.is_empty()).unwrap_or(true));
    report
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpcc_prepare_run_check_cleanup_against_strata() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(&dir.path().join("data"));
    let port = server.port;

    let out = bench(port, &["prepare", "--warehouses", "1", "--threads", "2"]);
    assert!(stdout(&out).contains("loaded 1 warehouses"), "{}", stdout(&out));
    let pool = server.pool(Some("tpcc"));
    let mut conn = pool.get_conn().await.expect("connect");
    let counts: Vec<(String, i64)> = conn
        .query(
            "SELECT 'item', COUNT(*) FROM item UNION ALL SELECT 'stock', COUNT(*) FROM stock \
             UNION ALL SELECT 'customer', COUNT(*) FROM customer UNION ALL SELECT 'orders', COUNT(*) FROM orders \
             UNION ALL SELECT 'new_order', COUNT(*) FROM new_order",
        )
        .await
        .expect("counts");
    assert_eq!(
        counts,
        vec![
            ("item".to_string(), 100_000),
            ("stock".to_string(), 100_000),
            ("customer".to_string(), 30_000),
            ("orders".to_string(), 30_000),
            ("new_order".to_string(), 9_000)
        ]
    );
    // A second prepare refuses to load on top of the data.
    let again = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "tpcc", "prepare", "--host", "127.0.0.1", "--port", &port.to_string()])
        .output()
        .expect("run");
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("cleanup"));

    let json = dir.path().join("run.json");
    let json_arg = json.to_string_lossy().into_owned();
    let out = bench(
        port,
        &["run", "--threads", "2", "--time", "20s", "--interval", "5s", "--label", "strata-test", "--json", &json_arg],
    );
    let text = stdout(&out);
    assert!(text.contains("tpmC:"), "{text}");
    let report = assert_clean_run(&json, 20.0);
    assert_eq!(report["label"], "strata-test");
    assert_eq!(report["protocol"], "binary");

    let out =
        bench(port, &["run", "--threads", "2", "--time", "5s", "--interval", "5s", "--text", "--json", &json_arg]);
    assert!(stdout(&out).contains("text protocol"));
    assert_clean_run(&json, 5.0);

    let out = bench(port, &["check"]);
    assert!(stdout(&out).contains("all 12 conditions hold on 1 warehouses"), "{}", stdout(&out));

    // A broken invariant is reported by number and fails the command.
    conn.query_drop("UPDATE warehouse SET w_ytd = w_ytd + 1 WHERE w_id = 1").await.expect("corrupt");
    let broken = Command::new(env!("CARGO_BIN_EXE_strata"))
        .args(["bench", "tpcc", "check", "--host", "127.0.0.1", "--port", &port.to_string()])
        .output()
        .expect("run");
    assert!(!broken.status.success());
    let text = String::from_utf8_lossy(&broken.stdout);
    assert!(text.contains("3.3.2.1   FAIL") && text.contains("3.3.2.8   FAIL"), "{text}");
    assert!(text.contains("3.3.2.2   ok"), "{text}");

    bench(port, &["cleanup"]);
    let tables: Vec<String> = conn.query("SHOW TABLES").await.expect("show tables");
    assert!(tables.is_empty(), "{tables:?}");
}
