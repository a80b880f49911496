//! Waiting for pessimistic locks, and deadlock detection.
//!
//! A transaction blocked on a key registers interest in that key, then retries once (the
//! holder may have released it in between), then sleeps until the key is released or its
//! deadline passes. Before sleeping it records the edge `waiter -> holder` in the wait-for
//! graph; if the holder already (transitively) waits for the waiter, the waiter is the
//! deadlock victim and fails with `Error::Deadlock` instead of sleeping.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::Mutex;
use strata_common::{Error, Result, Timestamp};
use tokio::sync::Notify;

/// Waiters per key and the wait-for graph.
#[derive(Default)]
pub struct LockManager {
    waiters: Mutex<HashMap<Vec<u8>, Arc<Notify>>>,
    wait_for: Mutex<HashMap<Timestamp, Timestamp>>,
}

impl LockManager {
    /// The notifier for `key` (created on first use).
    pub fn notifier(&self, key: &[u8]) -> Arc<Notify> {
        self.waiters.lock().entry(key.to_vec()).or_default().clone()
    }

    /// Wakes everyone waiting on any of `keys` (after their locks were released).
    pub fn wake<K: AsRef<[u8]>>(&self, keys: &[K]) {
        let mut w = self.waiters.lock();
        if w.is_empty() {
            return;
        }
        for k in keys {
            if let Some(n) = w.remove(k.as_ref()) {
                n.notify_waiters();
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
