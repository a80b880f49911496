//! Pruning deletions from the latest CF, long before GC.
//!
//! A Delete's latest record tells a reader "the key is gone since `commit_ts`". Once every
//! reader's timestamp is past `commit_ts`, an absent record says the same, so the record
//! can go — and it must go early: a range scan steps over every latest record in its range,
//! and a table whose rows are deleted from one end (TPC-C's `new_order`, a queue) otherwise
//! collects a run of them that grows until GC, minutes later, and slows every scan of it.
//! This is InnoDB's purge of delete-marked records, done per key as soon as it is safe.
//!
//! Commits note each Delete they write (`note_delete`). `prune_deletes(below)` — called
//! by whoever knows the oldest timestamp still in use, the SQL layer's active-transaction
//! set — raises the *prune floor* to `below` and drops the latest records of the noted
//! Deletes committed under the floor (under the keys' latches, and only if still that
//! Delete). The write CF keeps the Delete's twin and the older versions, for GC.
//!
//! Correctness does not depend on the caller's guess. A reader at or above the floor reads
//! the latest CF as before: every dropped record's Delete is below the floor, hence at or
//! below the reader, so an absent record means "no value" for it. A reader below the floor
//! (an internal transaction the active set does not know, a change feed catching up from an
//! old timestamp) reads the write CF too where the latest CF has no record (`store`). The
//! floor is raised before the records are dropped and read after the latest CF (after a
//! scan's cursor has pinned its snapshot), so a reader that sees a record gone also sees
//! the floor that covers it. Write commands use the same rule with their start timestamp.
//! The floor starts at the oracle's high-water mark when the store opens (above every
//! timestamp issued before, so above every Delete an earlier process pruned).
//!
//! The dropped records become RocksDB tombstones, which a scan still steps over until the
//! memtable is flushed and level 0 is compacted; unlike the records they replace, they do
//! not pile up for the GC life time.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use strata_common::{Result, Timestamp};

use crate::store::MvccStore;

/// Noted Deletes waiting for the floor to pass them. Beyond this many, new ones are not
/// noted and stay for GC (a long transaction holds the floor back; a huge DELETE).
const MAX_PENDING: usize = 1 << 18;

/// Keys pruned under one set of latches and one write batch.
const PRUNE_BATCH: usize = 512;

/// The prune floor and the Deletes waiting for it (module docs).
#[derive(Debug)]
pub(crate) struct Prune {
    /// Encoded keys of committed Deletes and their commit timestamps, in roughly commit
    /// order.
    pending: parking_lot::Mutex<VecDeque<(Vec<u8>, Timestamp)>>,
    /// Latest records of Deletes below this timestamp may be gone.
    floor: AtomicU64,
}

impl Prune {
    pub(crate) fn new(floor: Timestamp) -> Prune {
        Prune { pending: Default::default(), floor: AtomicU64::new(floor.0) }
    }

    /// Whether a read (or write command) at `ts` must look in the write CF for a key the
    /// latest CF has no record of. Called after the latest CF was read.
    pub(crate) fn below_floor(&self, ts: Timestamp) -> bool {
        ts.0 < self.floor.load(Ordering::SeqCst)
    }

    /// Notes that `enc`'s Delete committed at `commit_ts` may be pruned later.
    pub(crate) fn note_delete(&self, enc: &[u8], commit_ts: Timestamp) {
        let mut q = self.pending.lock();
        if q.len() < MAX_PENDING {
            q.push_back((enc.to_vec(), commit_ts));
        }
    }

    /// Takes up to `PRUNE_BATCH` noted Deletes from the front committed below `floor`.
    fn take(&self, floor: u64) -> Vec<(Vec<u8>, Timestamp)> {
        let mut q = self.pending.lock();
        let n = q.iter().take(PRUNE_BATCH).take_while(|(_, ts)| ts.0 < floor).count();
        q.drain(..n).collect()
    }

    /// Noted Deletes not pruned yet.
    pub(crate) fn pending(&self) -> usize {
        self.pending.lock().len()
    }
}

impl MvccStore {
    /// Raises the prune floor to `below` (never lowers it) and drops the latest records of
    /// the noted Deletes committed under the floor; returns how many records it dropped. The
    /// caller passes a timestamp no running reader is below (module docs: a reader below
    /// it stays correct, only slower).
    pub fn prune_deletes(&self, below: Timestamp) -> Result<u64> {
        // Raised before any record is dropped (module docs).
        let floor = self.prune.floor.fetch_max(below.0, Ordering::SeqCst).max(below.0);
        let mut n = 0;
        loop {
            let batch = self.prune.take(floor);
            if batch.is_empty() {
                return Ok(n);
            }
            let dropped = self.forget_deleted(&batch)? as u64;
            strata_kv::metrics::PRUNED_DELETIONS.fetch_add(dropped, Ordering::Relaxed);
            n += dropped;
        }
    }

    /// Deletes noted and waiting for the prune floor.
    pub fn pending_prunes(&self) -> usize {
        self.prune.pending()
    }
}
