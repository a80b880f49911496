//! The bank test: concurrent clients move money between accounts; the total never changes
//! and every acknowledged transfer is durable and visible. Run in pessimistic and optimistic
//! mode, under REPEATABLE READ and READ COMMITTED, and once with the server killed (SIGKILL)
//! mid-load and restarted on the same data directory.
//!
//! `BANK_SECS` sets the load duration of each run (default 60 s, as the acceptance asks).

mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql_async::prelude::Queryable;
use rand::Rng;

const ACCOUNTS: i64 = 1000;
const CLIENTS: usize = 32;
const INITIAL: i64 = 1000;

fn secs() -> u64 {
    std::env::var("BANK_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(60)
}

fn retryable(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Server(s) if matches!(s.code, 1205 | 1213 | 9007))
}

async fn setup(pool: &mysql_async::Pool) {
    let mut c = pool.get_conn().await.expect("conn");
    c.query_drop("CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL)").await.expect("create");
    c.query_drop("CREATE TABLE transfers (id BIGINT PRIMARY KEY, src BIGINT, dst BIGINT, amount BIGINT)")
        .await
        .expect("create");
    for chunk in (0..ACCOUNTS).collect::<Vec<_>>().chunks(250) {
        let values: Vec<String> = chunk.iter().map(|i| format!("({i}, {INITIAL})")).collect();
        c.query_drop(format!("INSERT INTO accounts VALUES {}", values.join(","))).await.expect("load");
    }
}

/// One transfer; Ok(true) when acknowledged, Ok(false) when it must be retried.
async fn transfer(
    c: &mut mysql_async::Conn,
    id: u64,
    src: i64,
    dst: i64,
    amount: i64,
    optimistic: bool,
) -> Result<bool, mysql_async::Error> {
    let begin = if optimistic { "BEGIN OPTIMISTIC" } else { "BEGIN PESSIMISTIC" };
    c.query_drop(begin).await?;
    let body = async {
        let bal: Option<i64> = c.exec_first("SELECT balance FROM accounts WHERE id = ? FOR UPDATE", (src,)).await?;
        if bal.unwrap_or(0) < amount {
            return Ok::<bool, mysql_async::Error>(false);
        }
        c.exec_drop("UPDATE accounts SET balance = balance - ? WHERE id = ?", (amount, src)).await?;
        c.exec_drop("UPDATE accounts SET balance = balance + ? WHERE id = ?", (amount, dst)).await?;
        c.exec_drop("INSERT INTO transfers VALUES (?, ?, ?, ?)", (id, src, dst, amount)).await?;
        Ok(true)
    }
    .await;
    match body {
        Ok(true) => match c.query_drop("COMMIT").await {
            Ok(()) => Ok(true),
            Err(e) if retryable(&e) => Ok(false),
            Err(e) => Err(e),
        },
        Ok(false) => {
            c.query_drop("ROLLBACK").await?;
            Ok(false)
        }
        Err(e) if retryable(&e) => {
            let _ = c.query_drop("ROLLBACK").await;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

struct Load {
    acked: Arc<parking_lot_free::AckLog>,
    stop: Arc<AtomicBool>,
    handles: Vec<tokio::task::JoinHandle<()>>,
    next_id: Arc<AtomicU64>,
}

mod parking_lot_free {
    use std::sync::Mutex;

    /// Transfer ids whose COMMIT was acknowledged.
    #[derive(Default)]
    pub struct AckLog(pub Mutex<Vec<u64>>);
}

fn start_load(pool: &mysql_async::Pool, isolation: &str, optimistic: bool, tolerate_disconnect: bool) -> Load {
    let acked = Arc::new(parking_lot_free::AckLog::default());
    let stop = Arc::new(AtomicBool::new(false));
    let next_id = Arc::new(AtomicU64::new(1));
    let mut handles = Vec::new();
    for _ in 0..CLIENTS {
        let (pool, acked, stop, next_id) = (pool.clone(), acked.clone(), stop.clone(), next_id.clone());
        let isolation = isolation.to_string();
        handles.push(tokio::spawn(async move {
            let Ok(mut c) = pool.get_conn().await else {
                assert!(tolerate_disconnect, "connect failed");
                return;
            };
            if c.query_drop(format!("SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")).await.is_err() {
                assert!(tolerate_disconnect);
                return;
            }
            while !stop.load(Ordering::Relaxed) {
                let (src, dst, amount) = {
                    let mut rng = rand::thread_rng();
                    let src = rng.gen_range(0..ACCOUNTS);
                    let mut dst = rng.gen_range(0..ACCOUNTS - 1);
                    if dst >= src {
                        dst += 1;
                    }
                    (src, dst, rng.gen_range(1..50))
                };
                let id = next_id.fetch_add(1, Ordering::Relaxed);
                match transfer(&mut c, id, src, dst, amount, optimistic).await {
                    Ok(true) => acked.0.lock().expect("ack log").push(id),
                    Ok(false) => {}
                    Err(e) => {
                        assert!(tolerate_disconnect, "transfer failed: {e}");
                        return;
                    }
                }
            }
        }));
    }
    Load { acked, stop, handles, next_id }
}

async fn verify(pool: &mysql_async::Pool, acked: &[u64]) {
    let mut c = pool.get_conn().await.expect("conn");
    let total: i64 = c.query_first("SELECT SUM(balance) FROM accounts").await.expect("sum").expect("row");
    assert_eq!(total, ACCOUNTS * INITIAL, "the total changed");
    let negative: i64 =
        c.query_first("SELECT COUNT(*) FROM accounts WHERE balance < 0").await.expect("q").expect("row");
    assert_eq!(negative, 0);
    let ids: Vec<u64> = c.query("SELECT id FROM transfers").await.expect("transfers");
    let present: HashSet<u64> = ids.into_iter().collect();
    let missing: Vec<&u64> = acked.iter().filter(|id| !present.contains(id)).take(5).collect();
    assert!(missing.is_empty(), "acknowledged transfers missing: {missing:?}");
    // Balances are exactly the initial ones plus the recorded transfers.
    let rows: Vec<(i64, i64, i64)> = c.query("SELECT src, dst, amount FROM transfers").await.expect("transfers");
    let mut expected = vec![INITIAL; ACCOUNTS as usize];
    for (s, d, a) in rows {
        expected[s as usize] -= a;
        expected[d as usize] += a;
    }
    let actual: Vec<(i64, i64)> = c.query("SELECT id, balance FROM accounts ORDER BY id").await.expect("accounts");
    for (id, bal) in actual {
        assert_eq!(bal, expected[id as usize], "account {id} disagrees with the transfer log");
    }
}

async fn run_mode(server: &common::StrataProcess, db: &str, isolation: &str, optimistic: bool) {
    common::exec(&server.pool(None), &[&format!("CREATE DATABASE {db}")]).await;
    let pool = server.pool(Some(db));
    setup(&pool).await;
    let load = start_load(&pool, isolation, optimistic, false);
    // A reader checks the total on its snapshot while the load runs.
    let deadline = Instant::now() + Duration::from_secs(secs());
    let mut reader = pool.get_conn().await.expect("conn");
    reader.query_drop(format!("SET SESSION TRANSACTION ISOLATION LEVEL {isolation}")).await.expect("set");
    while Instant::now() < deadline {
        let total: i64 = reader.query_first("SELECT SUM(balance) FROM accounts").await.expect("sum").expect("row");
        assert_eq!(total, ACCOUNTS * INITIAL, "a reader saw a partial transfer ({db})");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    load.stop.store(true, Ordering::Relaxed);
    for h in load.handles {
        h.await.expect("client");
    }
    let acked = load.acked.0.lock().expect("ack log").clone();
    assert!(!acked.is_empty(), "no transfer succeeded in {db}");
    eprintln!("{db}: {} transfers acknowledged of {} attempted", acked.len(), load.next_id.load(Ordering::Relaxed) - 1);
    verify(&pool, &acked).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bank_total_is_invariant_in_every_mode() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(dir.path());
    run_mode(&server, "bank_pess_rr", "REPEATABLE READ", false).await;
    run_mode(&server, "bank_pess_rc", "READ COMMITTED", false).await;
    run_mode(&server, "bank_opt_rr", "REPEATABLE READ", true).await;
    run_mode(&server, "bank_opt_rc", "READ COMMITTED", true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bank_survives_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut server = common::StrataProcess::start(dir.path());
    common::exec(&server.pool(None), &["CREATE DATABASE bank"]).await;
    let pool = server.pool(Some("bank"));
    setup(&pool).await;
    let load = start_load(&pool, "REPEATABLE READ", false, true);
    tokio::time::sleep(Duration::from_secs(secs().clamp(5, 20))).await;
    server.kill();
    load.stop.store(true, Ordering::Relaxed);
    for h in load.handles {
        let _ = h.await;
    }
    let acked = load.acked.0.lock().expect("ack log").clone();
    assert!(!acked.is_empty(), "no transfer succeeded before the crash");
    drop(pool);
    let restarted = common::StrataProcess::start(dir.path());
    let pool = restarted.pool(Some("bank"));
    verify(&pool, &acked).await;
    eprintln!("crash: {} acknowledged transfers all present after restart", acked.len());
}
