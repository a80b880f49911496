//! DDL survives SIGKILL: an ADD INDEX killed mid-backfill is rolled back at the next start
//! (no half-built index, ADMIN CHECK TABLE passes, the index can be added again), and a
//! dropped table's data, destroyed in the background, is still destroyed after a kill in the
//! middle of it (the store holds none of its keys afterwards). A dropped table's space comes
//! back once no transaction can read it, and not before.

mod common;

use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

const ENV: &[(&str, &str)] =
    &[("STRATA_FAILPOINTS", "1"), ("STRATA_FAILPOINT_PAUSE", "backfill_batch:300,delete_range:1500")];
/// Old versions are kept for no time, so dropped data is destroyable as soon as no
/// transaction that began before the drop is open.
const ARGS: &[&str] = &["--gc-life-time", "0"];

async fn status(c: &mut Conn, name: &str) -> u64 {
    let row: Option<(String, u64)> = c.query_first(format!("SHOW GLOBAL STATUS LIKE '{name}'")).await.expect("status");
    row.expect("status row").1
}

async fn pending_deletes(c: &mut Conn) -> u64 {
    status(c, "Strata_pending_delete_ranges").await
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
    let mut server = common::StrataProcess::start_with(&data, ARGS, ENV);
    common::exec(
        &server.pool(None),
        &["CREATE DATABASE d", "CREATE TABLE d.t (id INT PRIMARY KEY, v INT, w VARCHAR(20), KEY kw (w))"],
    )
    .await;
    let mut c = server.pool(None).get_conn().await.expect("connect");
    for start in (0..10_000).step_by(1_000) {
        let values: Vec<String> = (start..start + 1_000).map(|i| format!("({i},{},'w{}')", i % 97, i % 13)).collect();
        c.query_drop(format!("INSERT INTO d.t VALUES {}", values.join(","))).await.expect("insert");
    }

    // ADD INDEX, killed after a batch or two of its five (2,000 rows each).
    let opts = c.opts().clone();
    let alter = tokio::spawn(async move {
        let mut a = Conn::new(opts).await.expect("connect");
        a.query_drop("ALTER TABLE d.t ADD INDEX kv (v)").await
    });
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert!(!alter.is_finished(), "the backfill should still be running");
    server.kill();
    let _ = alter.await;

    let mut server = common::StrataProcess::start_with(&data, ARGS, ENV);
    let mut c = server.pool(None).get_conn().await.expect("connect");
    assert_eq!(index_names(&mut c).await, vec!["PRIMARY".to_string(), "kw".to_string()], "kv rolled back");
    c.query_drop("ADMIN CHECK TABLE d.t").await.expect("consistent after the rollback");
    wait_for_cleanup(&mut c).await;
    c.query_drop("ALTER TABLE d.t ADD INDEX kv (v)").await.expect("the index can be added again");
    c.query_drop("ADMIN CHECK TABLE d.t").await.expect("consistent with the new index");
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM d.t WHERE v = 5").await.expect("count");
    assert_eq!(n, Some((0..10_000).filter(|i| i % 97 == 5).count() as i64));

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

    let mut server = common::StrataProcess::start_with(&data, ARGS, ENV);
    let mut c = server.pool(None).get_conn().await.expect("connect");
    wait_for_cleanup(&mut c).await;
    let tables: Vec<String> = c.query("SHOW TABLES FROM d").await.expect("show tables");
    assert!(tables.is_empty());
    drop(c);
    server.stop();

    // Nothing of the table is left in the store, in any column family.
    let engine = strata_storage_rocks::RocksEngine::open(&data.join("kv")).expect("open store");
    let prefix = strata_codec::keys::table_prefix(strata_common::TableId(id));
    let left = keys_under(&engine, &prefix);
    assert!(left.is_empty(), "keys of the dropped table are left: {left:?}");
}

/// The column families (other than raw metadata) holding any version, value or lock of a
/// user key under `prefix`.
fn keys_under(engine: &dyn strata_storage::Engine, prefix: &[u8]) -> Vec<String> {
    use strata_storage::Cf;
    let mut found = Vec::new();
    for cf in [Cf::Data, Cf::Write, Cf::Latest, Cf::Lock] {
        let mut c = engine.cursor(cf, &[], &[0xFF; 32]).expect("cursor");
        c.seek(&[]);
        while c.valid().expect("valid") {
            let user = match cf {
                Cf::Lock => c.key().to_vec(),
                Cf::Latest => strata_mvcc::records::decode_user_key(c.key()).expect("user key"),
                _ => {
                    let (enc, _) = strata_mvcc::records::split_versioned(c.key()).expect("versioned key");
                    strata_mvcc::records::decode_user_key(enc).expect("user key")
                }
            };
            if user.starts_with(prefix) {
                found.push(format!("{cf:?}"));
                break;
            }
            c.next();
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_table_space_comes_back_once_no_reader_needs_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = common::StrataProcess::start_with(&dir.path().join("data"), ARGS, &[]);
    let pool = server.pool(None);
    common::exec(&pool, &["CREATE DATABASE d", "CREATE TABLE d.big (id INT PRIMARY KEY, pad TEXT)"]).await;
    let mut c = pool.get_conn().await.expect("connect");
    // ~8 MB of incompressible text.
    let mut seed = 0x2545_F491_4F6C_DD1Du64;
    for start in (0..8_000).step_by(500) {
        let values: Vec<String> = (start..start + 500)
            .map(|i| {
                let pad: String = (0..125)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        format!("{:08x}", seed as u32)
                    })
                    .collect();
                format!("({i},'{pad}')")
            })
            .collect();
        c.query_drop(format!("INSERT INTO d.big VALUES {}", values.join(","))).await.expect("insert");
    }
    let before = status(&mut c, "Strata_store_bytes").await;
    assert!(before > 6_000_000, "8 MB inserted, the store reports {before} bytes");

    // A transaction that read the table before the drop keeps its data alive.
    let mut reader = pool.get_conn().await.expect("connect");
    reader.query_drop("BEGIN").await.expect("begin");
    let n: Option<i64> = reader.query_first("SELECT COUNT(*) FROM d.big").await.expect("count");
    assert_eq!(n, Some(8_000));
    c.query_drop("DROP TABLE d.big").await.expect("drop");
    tokio::time::sleep(Duration::from_secs(12)).await;
    assert_eq!(pending_deletes(&mut c).await, 1, "destroyed while a transaction from before the drop is open");
    reader.query_drop("COMMIT").await.expect("commit");

    // Now it goes, and its space with it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while pending_deletes(&mut c).await > 0 {
        assert!(Instant::now() < deadline, "the dropped table was not destroyed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let after = status(&mut c, "Strata_store_bytes").await;
    assert!(after < before / 4, "space not given back: {before} bytes before the drop, {after} after");
    drop((c, reader));
    server.stop();
}
