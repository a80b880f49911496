//! DDL survives SIGKILL: an ADD INDEX killed mid-backfill is rolled back at the next start
//! (no half-built index, ADMIN CHECK TABLE passes, the index can be added again), and a
//! dropped table's data, deleted in the background, is still deleted after a kill in the
//! middle of it (the store holds none of its keys afterwards).

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

const ENV: &[(&str, &str)] =
    &[("STRATA_FAILPOINTS", "1"), ("STRATA_FAILPOINT_PAUSE", "backfill_batch:300,delete_range:1500")];

async fn pending_deletes(c: &mut Conn) -> u64 {
    let row: Option<(String, u64)> =
        c.query_first("SHOW GLOBAL STATUS LIKE 'Strata_pending_delete_ranges'").await.expect("status");
    row.expect("status row").1
}

async fn wait_for_cleanup(c: &mut Conn) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while pending_deletes(c).await > 0 {
        assert!(Instant::now() < deadline, "background deletion did not finish");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn index_names(c: &mut Conn) -> Vec<String> {
    let rows: Vec<mysql_async::Row> = c.query("SHOW INDEX FROM d.t").await.expect("show index");
    rows.iter().map(|r| r.get::<String, _>(2).expect("Key_name")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ddl_killed_midway_recovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut server = common::StrataProcess::start_with(&data, &[], ENV);
    common::exec(
        &server.pool(None),
        &["CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, v INT, w VARCHAR(20), KEY kw (w))"],
    )
    .await;
    let mut c = server.pool(None).get_conn().await.expect("connect");
    for start in (0..5_000).step_by(1_000) {
        let values: Vec<String> = (start..start + 1_000).map(|i| format!("({i},{},'w{}')", i % 97, i % 13)).collect();
        c.query_drop(format!("INSERT INTO d.t VALUES {}", values.join(","))).await.expect("insert");
    }

    // ADD INDEX, killed after a batch or two of its five.
    let opts = c.opts().clone();
    let alter = tokio::spawn(async move {
        let mut a = Conn::new(opts).await.expect("connect");
        a.query_drop("ALTER TABLE d.t ADD INDEX kv (v)").await
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!alter.is_finished(), "the backfill should still be running");
    server.kill();
    let _ = alter.await;

    let mut server = common::StrataProcess::start_with(&data, &[], ENV);
    let mut c = server.pool(None).get_conn().await.expect("connect");
    assert_eq!(index_names(&mut c).await, vec!["PRIMARY".to_string(), "kw".to_string()], "kv rolled back");
    c.query_drop("ADMIN CHECK TABLE d.t").await.expect("consistent after the rollback");
    wait_for_cleanup(&mut c).await;
    c.query_drop("ALTER TABLE d.t ADD INDEX kv (v)").await.expect("the index can be added again");
    c.query_drop("ADMIN CHECK TABLE d.t").await.expect("consistent with the new index");
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM d.t WHERE v = 5").await.expect("count");
    assert_eq!(n, Some((0..5_000).filter(|i| i % 97 == 5).count() as i64));

    // DROP TABLE returns at once; its data goes in the background. Kill in the middle.
    let id: Option<i64> = c
        .query_first(
            "SELECT TIDB_TABLE_ID FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'd' AND TABLE_NAME = 't'",
        )
        .await
        .expect("table id");
    let id = id.expect("t has an id");
    c.query_drop("DROP TABLE d.t").await.expect("drop");
    assert!(pending_deletes(&mut c).await >= 1, "the data is deleted in the background");
    drop(c);
    server.kill();

    let mut server = common::StrataProcess::start_with(&data, &[], ENV);
    let mut c = server.pool(None).get_conn().await.expect("connect");
    wait_for_cleanup(&mut c).await;
    let tables: Vec<String> = c.query("SHOW TABLES FROM d").await.expect("show tables");
    assert!(tables.is_empty());
    drop(c);
    server.stop();

    // Nothing of the table is left in the store.
    let engine: Arc<dyn strata_storage::Engine> =
        Arc::new(strata_storage_rocks::RocksEngine::open(&data.join("kv")).expect("open store"));
    let store = strata_mvcc::MvccStore::new(engine);
    let prefix = strata_codec::keys::table_prefix(strata_common::TableId(id));
    let left =
        store.scan(&prefix, &strata_codec::keys::prefix_end(&prefix), strata_common::Timestamp::MAX, 10).expect("scan");
    assert!(left.is_empty(), "{} keys of the dropped table are left", left.len());
}
