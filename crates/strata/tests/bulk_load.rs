//! Bulk loads written as table files (`storage::Engine::ingest`): a large INSERT of new
//! rows and a non-unique index's backfill skip the log and the memtable. What they write
//! reads like any commit — at the right timestamps, with duplicate keys refused — and
//! survives SIGKILL; loads that overlap stored keys take the ordinary path, as correctly.

mod common;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;

/// The `strata_mvcc_ingested_commits_total` counter on the status port.
fn ingested_commits(status_port: u16) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", status_port)).expect("status port");
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\n\r\n").expect("request");
    let mut response = String::new();
    s.read_to_string(&mut response).expect("response");
    response
        .lines()
        .find_map(|l| l.strip_prefix("strata_mvcc_ingested_commits_total "))
        .and_then(|v| v.trim().parse().ok())
        .expect("strata_mvcc_ingested_commits_total in /metrics")
}

/// An INSERT of rows `ids` into t: (id, id % 97, a 40-character pad).
fn insert(ids: impl Iterator<Item = i64>) -> String {
    let rows: Vec<String> = ids.map(|i| format!("({i},{},'{:040}')", i % 97, i)).collect();
    format!("INSERT INTO t VALUES {}", rows.join(","))
}

async fn count_sum(c: &mut Conn) -> (i64, i64) {
    c.query_first("SELECT COUNT(*), CAST(COALESCE(SUM(id), 0) AS SIGNED) FROM t").await.expect("count").expect("a row")
}

fn expected(ids: impl Iterator<Item = i64>) -> (i64, i64) {
    ids.fold((0, 0), |(n, s), i| (n + 1, s + i))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_loads_ingested_read_right_and_survive_a_kill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let data = dir.path().join("data");
    let mut server = common::StrataProcess::start(&data);
    common::exec(
        &server.pool(None),
        &["CREATE DATABASE d", "CREATE TABLE d.t (id BIGINT PRIMARY KEY, v INT, pad CHAR(40))"],
    )
    .await;
    let pool = server.pool(Some("d"));
    let mut c = pool.get_conn().await.expect("connect");
    let before = ingested_commits(server.status_port);

    // A snapshot taken before the loads sees none of them, a later one all.
    let mut old = pool.get_conn().await.expect("connect");
    old.query_drop("START TRANSACTION WITH CONSISTENT SNAPSHOT").await.expect("begin");
    assert_eq!(count_sum(&mut old).await, (0, 0));
    for chunk in 0..3i64 {
        c.query_drop(insert(chunk * 3000..(chunk + 1) * 3000)).await.expect("bulk insert");
    }
    let ingested = ingested_commits(server.status_port) - before;
    assert_eq!(ingested, 3, "each 3,000-row INSERT of new keys is one ingested commit");
    assert_eq!(count_sum(&mut old).await, (0, 0), "an older snapshot saw ingested rows");
    old.query_drop("COMMIT").await.expect("commit");
    assert_eq!(count_sum(&mut c).await, expected(0..9000));

    // A bulk INSERT with one key that exists: 1062, and none of its rows.
    let err = c.query_drop(insert((9000..11_999).chain([4500]))).await.expect_err("duplicate key");
    assert!(matches!(&err, mysql_async::Error::Server(e) if e.code == 1062), "{err}");
    assert_eq!(count_sum(&mut c).await, expected(0..9000));

    // Keys between stored ones (every other id of a range the table holds the rest of):
    // the ordinary path, the same answers.
    c.query_drop("DELETE FROM t WHERE id >= 3000 AND id < 6000 AND id % 2 = 1").await.expect("delete");
    let at = ingested_commits(server.status_port);
    c.query_drop(insert((3001..6000).step_by(2))).await.expect("refill");
    assert_eq!(ingested_commits(server.status_port), at, "a load between stored keys was ingested");
    assert_eq!(count_sum(&mut c).await, expected(0..9000));

    // A non-unique index's backfill commits its entries as one run.
    let at = ingested_commits(server.status_port);
    c.query_drop("CREATE INDEX kv ON t (v)").await.expect("create index");
    assert_eq!(ingested_commits(server.status_port), at + 1, "the backfill was not one ingested run");
    c.query_drop("ADMIN CHECK TABLE t").await.expect("index consistent");
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM t FORCE INDEX (kv) WHERE v = 5").await.expect("count");
    assert_eq!(n, Some((0..9000).filter(|i| i % 97 == 5).count() as i64));

    // Rows loaded after the index carry its entries (a mixed batch); then a crash.
    c.query_drop(insert(20_000..23_000)).await.expect("bulk insert with an index");
    drop(c);
    drop(old);
    pool.disconnect().await.expect("disconnect");
    server.kill();

    let server = common::StrataProcess::start(&data);
    let mut c = server.pool(Some("d")).get_conn().await.expect("connect");
    assert_eq!(count_sum(&mut c).await, expected((0..9000).chain(20_000..23_000)));
    c.query_drop("ADMIN CHECK TABLE t").await.expect("consistent after the kill");
    let v: Option<(i64, String)> = c.query_first("SELECT v, pad FROM t WHERE id = 22222").await.expect("row");
    assert_eq!(v, Some((22222 % 97, format!("{:040}", 22222))));
    // The table keeps working: an update of an ingested row, a point read, a range.
    c.query_drop("UPDATE t SET v = -1 WHERE id = 1234").await.expect("update");
    let v: Option<i64> = c.query_first("SELECT v FROM t WHERE id = 1234").await.expect("row");
    assert_eq!(v, Some(-1));
    let n: Option<i64> = c.query_first("SELECT COUNT(*) FROM t WHERE v = -1").await.expect("count");
    assert_eq!(n, Some(1));
}
