//! Lock TTLs and the heartbeat, in real time on the MVCC store: a transaction that is alive
//! keeps its locks however long it runs (a writer that runs into them waits instead of
//! rolling it back), and one that stopped — dropped without commit or rollback, as a
//! crashed session would leave it — is cleaned up by the next writer once its TTL passes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_kv::{Client, LockMode, Oracle};
use strata_mvcc::{LocalClient, LocalOracle, MvccStore, SystemClock};
use strata_storage::MemoryEngine;
use strata_txn::{Transaction, TxnOptions};

fn setup() -> (Arc<dyn Client>, Arc<dyn Oracle>) {
    let engine = Arc::new(MemoryEngine::new());
    let client: Arc<dyn Client> =
        Arc::new(LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open store")), false));
    let oracle: Arc<dyn Oracle> = Arc::new(LocalOracle::open(engine, Arc::new(SystemClock)).expect("oracle"));
    (client, oracle)
}

/// A pessimistic transaction whose locks live `ttl_ms` without renewals, holding a lock on k.
async fn locking(client: &Arc<dyn Client>, oracle: &Arc<dyn Oracle>, ttl_ms: u64) -> Transaction {
    let mut t = Transaction::begin(client.clone(), oracle.clone(), TxnOptions::default())
        .await
        .expect("begin")
        .with_lock_ttl(ttl_ms);
    t.lock_and_get(&[b"k".to_vec()]).await.expect("lock");
    t
}

fn optimistic() -> TxnOptions {
    TxnOptions { mode: LockMode::Optimistic, ..TxnOptions::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_live_transaction_outlives_its_lock_ttl() {
    let (client, oracle) = setup();
    // Base TTL 200 ms: without renewals its lock would look dead after 200 ms.
    let mut a = locking(&client, &oracle, 200).await;
    a.put(b"k".to_vec(), b"from a".to_vec());
    tokio::time::sleep(Duration::from_millis(1_000)).await;

    // An optimistic writer runs into a's lock: it must wait for a, not roll it back.
    let (c2, o2) = (client.clone(), oracle.clone());
    let b = tokio::spawn(async move {
        let mut b = Transaction::begin(c2, o2, optimistic()).await.expect("begin b");
        b.put(b"k".to_vec(), b"from b".to_vec());
        b.commit().await
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    a.commit().await.expect("a commits after 1.6 s with a 200 ms TTL");
    // b started before a committed: its write conflicts.
    assert!(b.await.expect("join").is_err());
    let r = Transaction::begin(client, oracle, TxnOptions::default()).await.expect("begin");
    assert_eq!(r.get(b"k").await.expect("read"), Some(b"from a".to_vec()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_that_stopped_is_rolled_back_after_its_ttl() {
    let (client, oracle) = setup();
    let a = locking(&client, &oracle, 200).await;
    drop(a); // no rollback: its lock stays, and nothing renews it
    let started = Instant::now();
    let mut b = Transaction::begin(client.clone(), oracle.clone(), optimistic()).await.expect("begin b");
    b.put(b"k".to_vec(), b"from b".to_vec());
    b.commit().await.expect("b commits once a's lock expired");
    assert!(started.elapsed() < Duration::from_secs(5), "took {:?}", started.elapsed());
    let r = Transaction::begin(client, oracle, TxnOptions::default()).await.expect("begin");
    assert_eq!(r.get(b"k").await.expect("read"), Some(b"from b".to_vec()));
}
