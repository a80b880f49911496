//! Waiting for pessimistic locks, and deadlock detection.
//!
//! A transaction blocked on a key registers interest in that key ([`LockManager::watch`]),
//! then retries once (the holder may have released it in between), then sleeps until the
//! key is released or its deadline passes. Before sleeping it records the edge `waiter ->
//! holder` in the wait-for graph; if the holder already (transitively) waits for the waiter,
//! the waiter is the deadlock victim and fails with `Error::Deadlock` instead of sleeping.
//!
//! A release wakes one waiter of the key, the longest waiting (tokio's `Notify::notify_one`
//! is first in, first out), as InnoDB grants a released row lock to one waiter: waking them
//! all had every other waiter retry, fail and go back to sleep, which at 32 TPC-C threads on
//! four warehouses cost more CPU than the transactions. So a wake must never be lost: a
//! woken waiter that does not end up holding the key (it gave up, failed, or was blocked on
//! another key) passes the wake on to the next one when its [`Watch`] goes. One blocked
//! again on the same key keeps it: the new holder's release wakes the queue. Readers
//! waiting for a lock to go ([`LockManager::watch_as_reader`]) are all woken by every
//! release: the waiter woken with them may lock the key again at once, in a way that does
//! not block reads, and a reader left asleep behind it waited out its whole timeout (Stock
//! Level's reads stalled for seconds at 32 TPC-C threads).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_common::{Error, Result, Timestamp};
use tokio::sync::futures::Notified;
use tokio::sync::Notify;

/// The waiters of one key.
struct Queue {
    /// Transactions waiting to lock it: one is woken per release.
    notify: Arc<Notify>,
    /// Readers waiting for a lock on it to go: all are woken on every release (a reader
    /// only needs the lock it ran into gone, and the key may be locked again at once by
    /// the waiter that was woken, in a way readers do not wait for).
    readers: Arc<Notify>,
    /// Live `Watch`es on the key.
    watchers: usize,
}

/// Waiters per key and the wait-for graph.
#[derive(Default)]
pub struct LockManager {
    waiters: Mutex<HashMap<Vec<u8>, Queue>>,
    wait_for: Mutex<HashMap<Timestamp, Timestamp>>,
}

/// One waiter's registration on a key's queue, held while it waits and retries.
pub struct Watch<'m> {
    manager: &'m LockManager,
    key: Vec<u8>,
    notify: Arc<Notify>,
    /// A wake was taken and not settled: passed on to the next waiter when dropped.
    pass_on: AtomicBool,
}

impl Watch<'_> {
    /// The key watched.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// A future that completes at the key's next wake (enable it before checking the key,
    /// so a release in between is not missed).
    pub fn notified(&self) -> Notified<'_> {
        self.notify.notified()
    }

    /// This waiter took a wake: until it settles, dropping the watch passes it on.
    pub fn woke(&self) {
        self.pass_on.store(true, Ordering::Relaxed);
    }

    /// This waiter holds the key now, or found it held again (that holder's release wakes
    /// the queue): a wake it took is used up.
    pub fn settle(&self) {
        self.pass_on.store(false, Ordering::Relaxed);
    }
}

impl Drop for Watch<'_> {
    fn drop(&mut self) {
        if self.pass_on.load(Ordering::Relaxed) {
            self.notify.notify_one();
        }
        let mut map = self.manager.waiters.lock();
        if let Some(q) = map.get_mut(&self.key) {
            q.watchers -= 1;
            if q.watchers == 0 {
                map.remove(&self.key);
            }
        }
    }
}

impl LockManager {
    /// Registers a transaction's interest in locking `key`.
    pub fn watch(&self, key: &[u8]) -> Watch<'_> {
        self.register(key, false)
    }

    /// Registers a reader's interest in `key`'s lock going: woken by every release.
    pub fn watch_as_reader(&self, key: &[u8]) -> Watch<'_> {
        self.register(key, true)
    }

    fn register(&self, key: &[u8], reader: bool) -> Watch<'_> {
        let mut map = self.waiters.lock();
        let q = map.entry(key.to_vec()).or_insert_with(|| Queue {
            notify: Arc::new(Notify::new()),
            readers: Arc::new(Notify::new()),
            watchers: 0,
        });
        q.watchers += 1;
        let notify = if reader { q.readers.clone() } else { q.notify.clone() };
        drop(map);
        Watch { manager: self, key: key.to_vec(), notify, pass_on: AtomicBool::new(false) }
    }

    /// Wakes one waiter of each of `keys` (after their locks were released); with no
    /// waiter ready yet, the next one to wait returns at once.
    pub fn wake<K: AsRef<[u8]>>(&self, keys: impl IntoIterator<Item = K>) {
        let map = self.waiters.lock();
        if map.is_empty() {
            return;
        }
        for k in keys {
            if let Some(q) = map.get(k.as_ref()) {
                q.notify.notify_one();
                q.readers.notify_waiters();
            }
        }
    }

    /// Records that `waiter` waits for `holder`, unless that closes a cycle.
    pub fn start_wait(&self, waiter: Timestamp, holder: Timestamp) -> Result<()> {
        let mut g = self.wait_for.lock();
        let mut cur = holder;
        for _ in 0..=g.len() {
            if cur == waiter {
                return Err(Error::Deadlock);
            }
            match g.get(&cur) {
                Some(next) => cur = *next,
                None => break,
            }
        }
        g.insert(waiter, holder);
        Ok(())
    }

    /// Removes `waiter`'s edge.
    pub fn end_wait(&self, waiter: Timestamp) {
        self.wait_for.lock().remove(&waiter);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Whether `f` completes within a short while.
    async fn fires(f: std::pin::Pin<&mut Notified<'_>>) -> bool {
        tokio::time::timeout(Duration::from_millis(30), f).await.is_ok()
    }

    #[tokio::test]
    async fn a_release_wakes_one_waiter_and_a_woken_one_that_gives_up_passes_it_on() {
        let m = LockManager::default();
        let (a, b) = (m.watch(b"k"), m.watch(b"k"));
        // The futures borrow the shared `Notify`, so the watches can be dropped under them.
        let (na, nb) = (a.notify.clone(), b.notify.clone());
        let (fa, fb) = (na.notified(), nb.notified());
        tokio::pin!(fa, fb);
        fa.as_mut().enable();
        fb.as_mut().enable();
        m.wake([b"k"]);
        assert!(fires(fa.as_mut()).await, "the first waiter is woken");
        assert!(!fires(fb.as_mut()).await, "only one");
        // `a` took the wake and leaves without the key: `b` gets it.
        a.woke();
        drop(a);
        assert!(fires(fb.as_mut()).await);
        // `b` settles (it holds the key now): its going wakes nobody.
        b.woke();
        b.settle();
        let c = m.watch(b"k");
        let nc = c.notify.clone();
        let fc = nc.notified();
        tokio::pin!(fc);
        fc.as_mut().enable();
        drop(b);
        assert!(!fires(fc.as_mut()).await);
        drop(c);
        assert!(m.waiters.lock().is_empty(), "a key's queue goes with its last watch");
    }

    #[tokio::test]
    async fn every_waiting_reader_is_woken_with_one_locker() {
        let m = LockManager::default();
        let (l1, l2, r1, r2) = (m.watch(b"k"), m.watch(b"k"), m.watch_as_reader(b"k"), m.watch_as_reader(b"k"));
        let (n1, n2, n3, n4) = (l1.notify.clone(), l2.notify.clone(), r1.notify.clone(), r2.notify.clone());
        let (f1, f2, f3, f4) = (n1.notified(), n2.notified(), n3.notified(), n4.notified());
        tokio::pin!(f1, f2, f3, f4);
        for f in [f1.as_mut(), f2.as_mut(), f3.as_mut(), f4.as_mut()] {
            f.enable();
        }
        m.wake([b"k"]);
        assert!(fires(f3.as_mut()).await && fires(f4.as_mut()).await, "both readers");
        assert!(fires(f1.as_mut()).await, "the first locker");
        assert!(!fires(f2.as_mut()).await, "not the second");
    }

    #[test]
    fn detects_cycles() {
        let m = LockManager::default();
        m.start_wait(Timestamp(1), Timestamp(2)).expect("no cycle");
        m.start_wait(Timestamp(2), Timestamp(3)).expect("no cycle");
        assert!(matches!(m.start_wait(Timestamp(3), Timestamp(1)), Err(Error::Deadlock)));
        m.end_wait(Timestamp(2));
        m.start_wait(Timestamp(3), Timestamp(1)).expect("cycle broken");
    }
}
