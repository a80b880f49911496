//! Values read under a pessimistic lock are kept for the rest of the transaction: a later
//! locking read of the same key (an UPDATE after its SELECT ... FOR UPDATE) is answered
//! without the store or a new timestamp, sees the transaction's own writes first, and a
//! transaction whose lock was taken from it still cannot commit.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use strata_common::{Result, Timestamp};
use strata_kv::{Client, Oracle};
use strata_mvcc::{LocalClient, LocalOracle, MvccStore, SystemClock};
use strata_storage::MemoryEngine;
use strata_txn::{Transaction, TxnOptions};

/// The real oracle, counting the timestamps handed out.
struct CountingOracle {
    inner: LocalOracle,
    fetched: AtomicU64,
}

#[async_trait::async_trait]
impl Oracle for CountingOracle {
    async fn get_ts(&self) -> Result<Timestamp> {
        self.fetched.fetch_add(1, Ordering::SeqCst);
        self.inner.get_ts().await
    }
}

fn setup() -> (Arc<dyn Client>, Arc<CountingOracle>) {
    let engine = Arc::new(MemoryEngine::new());
    let client: Arc<dyn Client> =
        Arc::new(LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open store")), false));
    let inner = LocalOracle::open(engine, Arc::new(SystemClock)).expect("oracle");
    (client, Arc::new(CountingOracle { inner, fetched: AtomicU64::new(0) }))
}

async fn begin(client: &Arc<dyn Client>, oracle: &Arc<CountingOracle>) -> Transaction {
    let o: Arc<dyn Oracle> = oracle.clone();
    Transaction::begin(client.clone(), o, TxnOptions::default()).await.expect("begin")
}

async fn committed(client: &Arc<dyn Client>, oracle: &Arc<CountingOracle>, key: &[u8], value: &[u8]) {
    let mut t = begin(client, oracle).await;
    t.lock_and_get(&[key.to_vec()]).await.expect("lock");
    t.put(key.to_vec(), value.to_vec());
    t.commit().await.expect("commit");
}

fn k(s: &str) -> Vec<u8> {
    s.as_bytes().to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_keys_value_is_not_read_again() {
    let (client, oracle) = setup();
    committed(&client, &oracle, b"a", b"a1").await;
    let mut t = begin(&client, &oracle).await;
    let first = t.lock_and_get(&[k("a"), k("none")]).await.expect("lock");
    assert_eq!(first, vec![Some(k("a1")), None]);

    // Locked already, values kept: no timestamp, the same answers.
    let before = oracle.fetched.load(Ordering::SeqCst);
    assert_eq!(t.lock_and_get(&[k("none"), k("a")]).await.expect("again"), vec![None, Some(k("a1"))]);
    assert_eq!(oracle.fetched.load(Ordering::SeqCst), before, "a kept value needs no timestamp");

    // Its own writes come first.
    t.put(k("a"), k("a2"));
    t.delete(k("none"));
    t.end_statement(true);
    t.start_statement().await.expect("statement");
    assert_eq!(t.lock_and_get(&[k("a"), k("none")]).await.expect("own"), vec![Some(k("a2")), None]);
    t.put(k("none"), k("n1"));
    assert_eq!(t.lock_and_get(&[k("none")]).await.expect("own"), vec![Some(k("n1"))]);

    // A key locked with others, plus a new one: only the new one is locked (one timestamp).
    committed(&client, &oracle, b"b", b"b1").await;
    let before = oracle.fetched.load(Ordering::SeqCst);
    assert_eq!(t.lock_and_get(&[k("a"), k("b")]).await.expect("mixed"), vec![Some(k("a2")), Some(k("b1"))]);
    assert_eq!(oracle.fetched.load(Ordering::SeqCst), before + 1);
    t.commit().await.expect("commit");

    let r = begin(&client, &oracle).await;
    assert_eq!(
        r.batch_get(&[k("a"), k("none"), k("b")]).await.expect("read"),
        vec![Some(k("a2")), Some(k("n1")), Some(k("b1"))]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_whose_lock_was_taken_cannot_commit_what_it_kept() {
    let (client, oracle) = setup();
    committed(&client, &oracle, b"k", b"v1").await;
    let mut a = begin(&client, &oracle).await;
    assert_eq!(a.lock_and_get(&[k("k")]).await.expect("lock"), vec![Some(k("v1"))]);

    // Someone judged `a` dead and rolled its lock back; another writer commits.
    client.rollback(&[k("k")], a.start_ts()).await.expect("rollback a's lock");
    committed(&client, &oracle, b"k", b"v2").await;

    // `a` still believes it holds the lock; whatever it read, it must not commit over v2.
    a.lock_and_get(&[k("k")]).await.expect("kept read");
    a.put(k("k"), k("from a"));
    assert!(a.commit().await.is_err(), "a lost its lock and must not commit");
    let r = begin(&client, &oracle).await;
    assert_eq!(r.get(b"k").await.expect("read"), Some(k("v2")));
}
