//! The lock table: every lock the store holds, in memory.
//!
//! Every command and every read asks "is this key locked?", and asking RocksDB meant a point
//! lookup (or, for scans, a cursor) in a column family holding a deletion for every key ever
//! committed, plus two writes per key (lock, then its deletion) on top of the commit record.
//!
//! Locks live only here, as TiKV's in-memory pessimistic locks do, and prewrite locks too:
//! Percolator persists prewrite locks so that a transaction whose primary committed can
//! finish its secondaries after a crash, but this store commits all of a transaction's keys
//! in one atomic write batch, so a crash leaves a transaction either wholly committed or
//! never committed, and a lock has no use after its transaction's process is gone. A lock
//! carries its staged value until commit writes it. (A replicated store, where secondaries
//! commit separately and a new leader must know the locks, has to persist prewrite locks.)
//!
//! The lock CF only holds locks written by older versions of Strata: the table loads them
//! when the store opens (marked `on_disk`, so that resolving them deletes them there too),
//! and startup recovery resolves them.
//!
//! Ordering with readers: a command writes its batch first and changes the table after, so
//! a lock is in the table before the prewrite that made it returns (hence before the commit
//! timestamp exists), and a committed key's lock leaves the table only once its commit
//! record is readable. A reader may briefly see a lock that was just committed; it resolves
//! it like any other.

use std::collections::BTreeMap;
use std::ops::Bound;

use parking_lot::RwLock;
use strata_common::{Result, Timestamp};
use strata_storage::{Cf, Engine, WriteBatch};

use crate::records::Lock;

/// One held lock.
#[derive(Clone, Debug)]
pub(crate) struct Held {
    pub lock: Lock,
    /// Whether the lock CF has it too (a lock found there when the store opened).
    pub on_disk: bool,
    /// The key's latest CF record when its pessimistic lock was taken.
    pub prior: Prior,
}

/// A key's latest CF record as its pessimistic lock command read it, kept with the lock
/// (and the prewrite lock that replaces it) so that commit, which moves a superseded Put
/// into the write CF, need not read it again: while the transaction holds the lock nobody
/// else commits the key, and pruning passes locked keys by (`MvccStore::forget_deleted`).
#[derive(Clone, Debug, Default)]
pub(crate) enum Prior {
    /// Not known: commit reads it.
    #[default]
    Unknown,
    /// The record (`None`: the key had none).
    Read(Option<std::sync::Arc<[u8]>>),
}

/// All locks, by key.
#[derive(Default)]
pub(crate) struct LockTable {
    map: RwLock<BTreeMap<Vec<u8>, Held>>,
}

impl LockTable {
    /// The table holding what the lock CF of `engine` holds.
    pub fn load(engine: &dyn Engine) -> Result<LockTable> {
        let mut map = BTreeMap::new();
        let mut c = engine.cursor(Cf::Lock, &[], &[0xFF; 16])?;
        c.seek(&[]);
        while c.valid()? {
            map.insert(c.key().to_vec(), Held { lock: Lock::decode(c.value())?, on_disk: true, prior: Prior::Unknown });
            c.next();
        }
        Ok(LockTable { map: RwLock::new(map) })
    }

    /// The lock on `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<Held> {
        self.map.read().get(key).cloned()
    }

    /// The lock on `key` if `pred` accepts it (a reader's check: locks it may ignore are
    /// not copied).
    pub fn get_if(&self, key: &[u8], pred: impl Fn(&Lock) -> bool) -> Option<Lock> {
        self.map.read().get(key).filter(|h| pred(&h.lock)).map(|h| h.lock.clone())
    }

    /// Whether `key` holds a lock of `start_ts` naming `key` itself as the primary.
    pub fn is_primary(&self, key: &[u8], start_ts: Timestamp) -> bool {
        self.map.read().get(key).is_some_and(|h| h.lock.start_ts == start_ts && *h.lock.primary == *key)
    }

    /// The first lock in `[start, end)` that `pred` accepts.
    pub fn find_in_range(&self, start: &[u8], end: &[u8], pred: impl Fn(&Lock) -> bool) -> Option<(Vec<u8>, Lock)> {
        if start >= end {
            return None;
        }
        let map = self.map.read();
        map.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .find(|(_, h)| pred(&h.lock))
            .map(|(k, h)| (k.clone(), h.lock.clone()))
    }

    /// Applies `changes` (key → new lock, or `None` to remove).
    pub fn apply(&self, changes: Vec<(Vec<u8>, Option<Held>)>) {
        if changes.is_empty() {
            return;
        }
        // In slices, so readers are not held off for the whole of a large command. The
        // changes are moved in: a lock's staged value is not copied again.
        let mut changes = changes.into_iter().peekable();
        while changes.peek().is_some() {
            let mut map = self.map.write();
            for (k, v) in changes.by_ref().take(1024) {
                match v {
                    Some(h) => map.insert(k, h),
                    None => map.remove(&k),
                };
            }
        }
    }

    /// Forgets every lock in `[start, end)`.
    pub fn remove_range(&self, start: &[u8], end: &[u8]) {
        if start >= end {
            return;
        }
        let mut map = self.map.write();
        let mut tail = map.split_off(start);
        let mut after = tail.split_off(end);
        map.append(&mut after);
    }

    /// Every lock, in key order.
    pub fn all(&self) -> Vec<(Vec<u8>, Lock)> {
        self.map.read().iter().map(|(k, h)| (k.clone(), h.lock.clone())).collect()
    }

    /// Whether `key` has a lock.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.map.read().contains_key(key)
    }

    /// How many locks are held.
    pub fn len(&self) -> usize {
        self.map.read().len()
    }
}

/// A command's changes: the batch for the engine and the lock-table changes that follow it.
#[derive(Default)]
pub(crate) struct Changes {
    pub batch: WriteBatch,
    pub locks: Vec<(Vec<u8>, Option<Held>)>,
    /// Committed changes a `ChangeSink` wants.
    pub committed: Vec<strata_kv::CommittedChange>,
    /// Offer the batch to `Engine::ingest` first (a large commit).
    pub ingest: bool,
}

impl Changes {
    /// Changes of `locks` locks and `ops` batch entries, allocated once (a command over
    /// thousands of keys otherwise regrows and copies its vectors a dozen times).
    pub fn with_capacity(locks: usize, ops: usize) -> Changes {
        Changes {
            batch: WriteBatch { ops: Vec::with_capacity(ops) },
            locks: Vec::with_capacity(locks),
            committed: Vec::new(),
            ingest: false,
        }
    }

    /// Sets `key`'s lock; one that is `on_disk` is rewritten in the lock CF too.
    pub fn put_lock(&mut self, key: &[u8], lock: Lock, on_disk: bool, prior: Prior) {
        if on_disk {
            self.batch.put(Cf::Lock, key.to_vec(), lock.encode());
        }
        self.locks.push((key.to_vec(), Some(Held { lock, on_disk, prior })));
    }

    /// Removes `key`'s lock `held`.
    pub fn remove_lock(&mut self, key: &[u8], held: &Held) {
        if held.on_disk {
            self.batch.delete(Cf::Lock, key.to_vec());
        }
        self.locks.push((key.to_vec(), None));
    }

    /// Writes the batch, hands the committed changes to `sink`, then changes the table (see
    /// the module docs and `ChangeSink` for why in this order).
    pub fn apply(
        self,
        engine: &dyn Engine,
        table: &LockTable,
        sink: Option<&dyn strata_kv::ChangeSink>,
        sync: bool,
        written: impl FnOnce(),
    ) -> Result<()> {
        if !self.batch.is_empty() {
            let keys = self.batch.ops.len() as u64;
            match if self.ingest { engine.ingest(self.batch)? } else { Some(self.batch) } {
                Some(batch) => engine.write(batch, sync)?,
                None => {
                    strata_kv::metrics::INGESTED_COMMITS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    strata_kv::metrics::INGESTED_KEYS.fetch_add(keys, std::sync::atomic::Ordering::Relaxed);
                }
            }
        }
        written();
        if let Some(sink) = sink {
            if !self.committed.is_empty() {
                sink.committed(self.committed);
            }
        }
        table.apply(self.locks);
        Ok(())
    }
}
