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
//!
//! A one-command commit (`MvccStore::one_pc`) locks its keys here too, from the end of its
//! checks until its write has landed, but as one entry for all of them (`Committing`): a
//! bulk INSERT's thousand keys are then one push and one removal instead of a thousand
//! insertions into the map at prewrite and a thousand removals at commit. Every question
//! asked of the table sees those keys as locked, with the lock their prewrite would have
//! made (without its staged value, which only the committing command needs).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use parking_lot::RwLock;
use strata_common::{Result, Timestamp};
use strata_storage::{Cf, Engine, WriteBatch};

use crate::records::{Kind, Lock};

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

/// The keys of a one-command commit in flight, locked as one entry (module docs).
pub(crate) struct Committing {
    /// Its keys, ascending, each with the kind of its mutation.
    keys: Vec<(Vec<u8>, Kind)>,
    /// The transaction's primary key.
    primary: Arc<[u8]>,
    start_ts: Timestamp,
    ttl_ms: u64,
}

impl Committing {
    /// An entry for `keys` (any order, distinct) of the transaction `start_ts`.
    pub fn new(mut keys: Vec<(Vec<u8>, Kind)>, primary: Arc<[u8]>, start_ts: Timestamp, ttl_ms: u64) -> Committing {
        strata_common::keysort::sort_by_key_bytes(&mut keys, |k| &k.0);
        Committing { keys, primary, start_ts, ttl_ms }
    }

    /// The lock the prewrite of the key at `i` would have made, without its value.
    fn lock(&self, i: usize) -> Lock {
        Lock {
            kind: self.keys[i].1,
            primary: self.primary.clone(),
            start_ts: self.start_ts,
            ttl_ms: self.ttl_ms,
            for_update_ts: Timestamp::ZERO,
            short_value: None,
        }
    }

    /// The index of `key`, if it is one of the entry's.
    fn find(&self, key: &[u8]) -> Option<usize> {
        // Most keys asked about lie outside the entry's span (another loader's table or
        // warehouse): two comparisons instead of a search.
        let (first, last) = (self.keys.first()?, self.keys.last()?);
        if key < first.0.as_slice() || key > last.0.as_slice() {
            return None;
        }
        self.keys.binary_search_by(|(k, _)| k.as_slice().cmp(key)).ok()
    }

    /// The entry's keys of `[start, end)` from the first, with their indexes.
    fn within<'a>(&'a self, start: &[u8], end: &'a [u8]) -> impl Iterator<Item = (usize, &'a [u8])> + 'a {
        let from = self.keys.partition_point(|(k, _)| k.as_slice() < start);
        self.keys[from..]
            .iter()
            .enumerate()
            .map(move |(i, (k, _))| (from + i, k.as_slice()))
            .take_while(move |(_, k)| *k < end)
    }
}

/// All locks, by key.
#[derive(Default)]
pub(crate) struct LockTable {
    map: RwLock<BTreeMap<Vec<u8>, Held>>,
    /// One-command commits in flight.
    committing: RwLock<Vec<Arc<Committing>>>,
    /// `committing`'s length, read without its lock: readers skip it when it is empty.
    /// A reader that could see a commit (one whose timestamp is below the reader's) took
    /// its timestamp after that commit's entry went in, through the oracle's mutex, so it
    /// sees the count the entry's push left.
    n_committing: AtomicUsize,
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
        Ok(LockTable { map: RwLock::new(map), ..LockTable::default() })
    }

    /// Locks `entry`'s keys until `end_commit` of it.
    pub fn begin_commit(&self, entry: Arc<Committing>) {
        let mut c = self.committing.write();
        c.push(entry);
        self.n_committing.store(c.len(), Ordering::SeqCst);
    }

    /// Unlocks the keys of `entry` (from `begin_commit`).
    pub fn end_commit(&self, entry: &Arc<Committing>) {
        let mut c = self.committing.write();
        c.retain(|e| !Arc::ptr_eq(e, entry));
        self.n_committing.store(c.len(), Ordering::SeqCst);
    }

    /// The in-flight commit's lock on `key`, if one has it.
    fn committing_lock(&self, key: &[u8]) -> Option<Lock> {
        if self.n_committing.load(Ordering::SeqCst) == 0 {
            return None;
        }
        self.committing.read().iter().find_map(|e| e.find(key).map(|i| e.lock(i)))
    }

    /// The lock on `key`, if any. An in-flight commit's comes first: the map may still
    /// hold the same transaction's pessimistic lock on the key, which readers pass by.
    pub fn get(&self, key: &[u8]) -> Option<Held> {
        if let Some(lock) = self.committing_lock(key) {
            return Some(Held { lock, on_disk: false, prior: Prior::Unknown });
        }
        self.map.read().get(key).cloned()
    }

    /// The lock on `key` if `pred` accepts it (a reader's check: locks it may ignore are
    /// not copied).
    pub fn get_if(&self, key: &[u8], pred: impl Fn(&Lock) -> bool) -> Option<Lock> {
        if let Some(lock) = self.committing_lock(key) {
            return pred(&lock).then_some(lock);
        }
        self.map.read().get(key).filter(|h| pred(&h.lock)).map(|h| h.lock.clone())
    }

    /// Whether `key` holds a lock of `start_ts` naming `key` itself as the primary.
    pub fn is_primary(&self, key: &[u8], start_ts: Timestamp) -> bool {
        self.map.read().get(key).is_some_and(|h| h.lock.start_ts == start_ts && *h.lock.primary == *key)
    }

    /// The first lock in `[start, end)`, in key order, that `pred` accepts: of the map's and
    /// every in-flight commit's, whichever key is lowest. A reader whose scan a limit cut
    /// short ignores a lock past the last key it returned (`MvccStore::walk_keys`), so a
    /// later lock must never stand in for an earlier one.
    pub fn find_in_range(&self, start: &[u8], end: &[u8], pred: impl Fn(&Lock) -> bool) -> Option<(Vec<u8>, Lock)> {
        if start >= end {
            return None;
        }
        let mut found = {
            let map = self.map.read();
            map.range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
                .find(|(_, h)| pred(&h.lock))
                .map(|(k, h)| (k.clone(), h.lock.clone()))
        };
        if self.n_committing.load(Ordering::SeqCst) == 0 {
            return found;
        }
        for e in self.committing.read().iter() {
            // Only keys below the best so far can replace it.
            let upto: &[u8] = match &found {
                Some((k, _)) => k,
                None => end,
            };
            let first = e.within(start, upto).map(|(i, k)| (k, e.lock(i))).find(|(_, l)| pred(l));
            if let Some((k, l)) = first {
                found = Some((k.to_vec(), l));
            }
        }
        found
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

    /// Every lock of the map, in key order (not the keys of in-flight commits, whose
    /// command ends them itself).
    pub fn all(&self) -> Vec<(Vec<u8>, Lock)> {
        self.map.read().iter().map(|(k, h)| (k.clone(), h.lock.clone())).collect()
    }

    /// Whether `key` has a lock.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.map.read().contains_key(key) || self.committing_lock(key).is_some()
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
