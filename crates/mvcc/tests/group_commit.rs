//! Group commit: a commit's locks go before its WAL fsync, its client hears of it only
//! after; readers blocked by a lock wait for it to go rather than for a fixed backoff.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use strata_common::{Result, Timestamp};
use strata_kv::{Client, LockMode, Mutation, PessimisticLockRequest, PrewriteRequest};
use strata_mvcc::{LocalClient, MvccStore};
use strata_storage::{Cf, Cursor, Engine, MemoryEngine, WriteBatch};

/// An engine whose WAL fsync waits until the test opens the gate.
#[derive(Default)]
struct Gated {
    inner: MemoryEngine,
    open: Mutex<bool>,
    opened: Condvar,
    syncs: AtomicU64,
}

impl Gated {
    fn open_gate(&self) {
        *self.open.lock().expect("gate") = true;
        self.opened.notify_all();
    }
}

impl Engine for Gated {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.inner.get(cf, key)
    }
    fn cursor(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        self.inner.cursor(cf, lower, upper)
    }
    fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        self.inner.write(batch, sync)
    }
    fn sync_wal(&self) -> Result<()> {
        let mut open = self.open.lock().expect("gate");
        while !*open {
            open = self.opened.wait(open).expect("gate");
        }
        self.syncs.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }
    fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<()> {
        self.inner.compact_range(cf, start, end)
    }
    fn size_bytes(&self) -> Result<u64> {
        self.inner.size_bytes()
    }
}

fn ts(t: u64) -> Timestamp {
    Timestamp::compose(t, 0)
}

fn prewrite(key: &[u8], value: &[u8], start: Timestamp) -> Arc<PrewriteRequest> {
    Arc::new(PrewriteRequest {
        mutations: vec![Mutation::Put(key.to_vec(), value.to_vec())],
        primary: key.to_vec(),
        start_ts: start,
        ttl_ms: 3000,
        mode: LockMode::Optimistic,
        locked: vec![false],
    })
}

async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_writer_goes_ahead_before_the_holders_fsync_and_the_commit_returns_after_it() {
    let engine = Arc::new(Gated::default());
    let store = Arc::new(MvccStore::open(engine.clone()).expect("open"));
    let c = LocalClient::new(store.clone(), true);
    let key = b"k".to_vec();
    c.prewrite(prewrite(&key, b"1", ts(10))).await.expect("prewrite");
    let committing = {
        let (c, key) = (c.clone(), key.clone());
        tokio::spawn(async move { c.commit(&[key], ts(10), ts(11)).await })
    };
    // The write is applied and the lock gone while the fsync is held back.
    until("the lock is released", || !store.holds_lock(&key, ts(10))).await;
    // Another transaction locks the key at once and reads the committed value.
    let values = c
        .pessimistic_lock(PessimisticLockRequest {
            keys: vec![key.clone()],
            primary: key.clone(),
            start_ts: ts(20),
            for_update_ts: ts(20),
            ttl_ms: 3000,
            wait_timeout_ms: Some(5000),
            seen: None,
        })
        .await
        .expect("lock");
    assert_eq!(values, vec![Some(b"1".to_vec())]);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!committing.is_finished(), "the commit returned before its fsync");
    assert_eq!(engine.syncs.load(Ordering::SeqCst), 0);
    engine.open_gate();
    committing.await.expect("join").expect("commit");
    assert!(engine.syncs.load(Ordering::SeqCst) >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_waits_for_the_lock_to_go_not_for_the_whole_backoff() {
    let store = Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open"));
    let c = LocalClient::new(store, false);
    let key = b"r".to_vec();
    // No lock: no wait.
    let started = Instant::now();
    c.wait_for_lock(&key, ts(10), Duration::from_secs(30)).await.expect("wait");
    assert!(started.elapsed() < Duration::from_secs(5));

    c.prewrite(prewrite(&key, b"1", ts(10))).await.expect("prewrite");
    let started = Instant::now();
    let waiting = {
        let (c, key) = (c.clone(), key.clone());
        tokio::spawn(async move { c.wait_for_lock(&key, ts(10), Duration::from_secs(30)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "returned while the lock was held");
    c.commit(std::slice::from_ref(&key), ts(10), ts(11)).await.expect("commit");
    waiting.await.expect("join").expect("wait");
    assert!(started.elapsed() < Duration::from_secs(10), "waited out the backoff instead of the lock");
}
