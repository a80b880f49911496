//! Garbage collection of old versions behind a safe point: for each key, the newest version
//! at or below the safe point is kept (unless it is a deletion) and everything older goes,
//! as do rollback and lock-only records at or below the safe point. The pass walks the write
//! CF, which holds every version but a key's newest Put (that one is only in the latest CF,
//! see `records`), so it looks up the latest record of each key it meets. Readers never use a
//! timestamp below the safe point, so what GC removes is invisible to every reader. A key
//! whose last change is a deletion at or below the safe point also loses its latest CF
//! record (under the key's latch, so a commit racing with GC is never undone).
//!
//! `destroy_range` is the other half: a whole key range nobody can reach any more (a dropped
//! table, once the safe point has passed the drop) goes at once, without MVCC, as range
//! tombstones in every column family followed by a compaction of the range, so its space
//! comes back now.

use std::sync::atomic::{AtomicU64, Ordering};

use strata_common::{Result, Timestamp};
use strata_storage::engine::BatchOp;
use strata_storage::{Cf, WriteBatch};

use crate::records::{
    decode_user_key, encode_user_key, is_twinless, split_latest, split_versioned, versioned, Kind, WriteRef,
};
use crate::store::MvccStore;

/// What one GC pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Write records deleted.
    pub versions_removed: u64,
    /// Write records the pass walked over (0: skipped, nothing could be removed).
    pub records_walked: u64,
}

/// Whether a GC pass can remove anything. What a pass at safe point S removes depends only
/// on the records at or below S (write records, and each key's latest record, whose
/// timestamp decides whether the write CF's versions below it can go). Once a pass has
/// seen every record at or below its safe point, a later pass at S' has work only if some
/// record it did not see at or below the old safe point is at or below S': one written
/// since (usually newer than S', as S' lags now by the GC life time), or one the pass saw
/// above its safe point. So the state is the oldest timestamp of those; a pass whose safe
/// point is below it is skipped. Without this a pass walked the whole write CF every
/// minute on an idle server (seconds of CPU at TPC-H SF 1), and under a steady load every
/// minute of the first GC life time walked all the versions written so far for nothing.
#[derive(Debug)]
pub(crate) struct GcState {
    /// The oldest timestamp of a record put since the current (or last) pass began or
    /// seen above that pass's safe point (`u64::MAX`: none; 0 until a pass has walked).
    pending: AtomicU64,
}

impl Default for GcState {
    fn default() -> GcState {
        // What the store holds is unknown until a pass has walked it.
        GcState { pending: AtomicU64::new(0) }
    }
}

impl GcState {
    /// The oldest timestamp at which a pass could remove something `batch` puts (None:
    /// it puts nothing that counts): the commit timestamp of its latest records, and for
    /// its write records their own timestamp but not below that commit timestamp. A
    /// commit moves the version it supersedes into the write CF with that version's old
    /// timestamp, yet the version can only go once the safe point passes the commit that
    /// superseded it (it is what readers below that commit see); counted at its own
    /// timestamp, every commit of a row loaded long ago made the next pass walk. Noted
    /// (`note`) once the batch is written, so that a pass that began before sees it either
    /// in its snapshot or here.
    pub(crate) fn oldest_put(batch: &WriteBatch) -> Option<u64> {
        let committed = batch
            .ops
            .iter()
            .filter_map(|op| match op {
                BatchOp::Put(Cf::Latest, _, v) => Some(split_latest(v).map(|(ts, _)| ts.0).unwrap_or(0)),
                _ => None,
            })
            .min();
        let floor = committed.unwrap_or(0);
        let written = batch
            .ops
            .iter()
            .filter_map(|op| match op {
                BatchOp::Put(Cf::Write, k, _) => Some(split_versioned(k).map(|(_, ts)| ts.0.max(floor)).unwrap_or(0)),
                _ => None,
            })
            .min();
        committed.into_iter().chain(written).min()
    }

    /// Notes records put at `oldest` or later (`oldest_put`).
    pub(crate) fn note(&self, oldest: Option<u64>) {
        if let Some(ts) = oldest {
            self.pending.fetch_min(ts, Ordering::SeqCst);
        }
    }
}

impl MvccStore {
    /// Removes every version, value and lock of the user keys in `[start, end)` and compacts
    /// the range. Not transactional: only for ranges no reader or writer can reach (the
    /// caller waits for the GC safe point to pass the change that orphaned them).
    pub fn destroy_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        // Group encoding preserves order and no encoded key is a prefix of another, so
        // every versioned key of a user key in [start, end) lies in [enc(start), enc(end)).
        let (enc_start, enc_end) = (encode_user_key(start), encode_user_key(end));
        let mut batch = WriteBatch::default();
        batch.delete_range(Cf::Lock, start.to_vec(), end.to_vec());
        batch.delete_range(Cf::Write, enc_start.clone(), enc_end.clone());
        batch.delete_range(Cf::Latest, enc_start.clone(), enc_end.clone());
        batch.delete_range(Cf::Data, enc_start.clone(), enc_end.clone());
        self.engine().write(batch, true)?;
        self.forget_locks(start, end);
        self.engine().compact_range(Cf::Lock, start, end)?;
        self.engine().compact_range(Cf::Write, &enc_start, &enc_end)?;
        self.engine().compact_range(Cf::Latest, &enc_start, &enc_end)?;
        self.engine().compact_range(Cf::Data, &enc_start, &enc_end)
    }

    /// Deletes the latest CF records of `keys` (encoded key, commit timestamp of a deletion)
    /// that are still those deletions: a key committed since keeps its new record.
    /// Returns how many it deleted.
    pub(crate) fn forget_deleted(&self, keys: &[(Vec<u8>, Timestamp)]) -> Result<usize> {
        let users = keys.iter().map(|(enc, _)| decode_user_key(enc)).collect::<Result<Vec<_>>>()?;
        let _g = self.latches.acquire(users.iter());
        let mut batch = WriteBatch::default();
        for (enc, commit_ts) in keys {
            let Some(raw) = self.engine().get(Cf::Latest, enc)? else { continue };
            let (latest_ts, w) = split_latest(&raw)?;
            if latest_ts == *commit_ts && w.kind == Kind::Delete {
                batch.delete(Cf::Latest, enc.clone());
            }
        }
        let n = batch.ops.len();
        if n > 0 {
            self.engine().write(batch, false)?;
        }
        Ok(n)
    }

    /// Removes versions no reader at or above `safe_point` can see. Skipped (nothing
    /// walked) when no record the last pass did not see at or below its safe point is at or
    /// below this one (see `GcState`).
    pub fn gc(&self, safe_point: Timestamp) -> Result<GcStats> {
        // No transaction at or below the safe point runs any more (and GC removes the
        // rollback records there).
        self.rolled_back_txns.write().retain(|t| *t > safe_point);
        let state = &self.gc_state;
        // Records put from here on lower it again; the walk's snapshot, taken after, holds
        // every record put before (they are noted after their write).
        let pending = state.pending.swap(u64::MAX, Ordering::SeqCst);
        if pending > safe_point.0 {
            state.pending.fetch_min(pending, Ordering::SeqCst);
            return Ok(GcStats::default());
        }
        let started = std::time::Instant::now();
        match self.gc_walk(safe_point) {
            Ok((stats, oldest_above)) => {
                state.pending.fetch_min(oldest_above, Ordering::SeqCst);
                tracing::debug!(
                    "gc pass at {safe_point:?}: walked {} write records, removed {}, in {:?}",
                    stats.records_walked,
                    stats.versions_removed,
                    started.elapsed()
                );
                Ok(stats)
            }
            Err(e) => {
                state.pending.fetch_min(pending, Ordering::SeqCst);
                Err(e)
            }
        }
    }

    /// The walk of a GC pass: its stats and the oldest timestamp it saw above the safe
    /// point (`u64::MAX`: none).
    fn gc_walk(&self, safe_point: Timestamp) -> Result<(GcStats, u64)> {
        let mut oldest_above = u64::MAX;
        let engine = self.engine().clone();
        let mut stats = GcStats::default();
        let mut batch = WriteBatch::default();
        let mut c = engine.cursor(Cf::Write, &[], &[0xFF; 16])?;
        c.seek(&[]);
        let mut current: Vec<u8> = Vec::new();
        let mut kept_base = false;
        // Whether the current key's newest data record has been seen.
        let mut seen_data = false;
        // Keys whose newest data record is a deletion at or below the safe point, with its
        // commit timestamp: their latest CF record can go too.
        let mut deleted: Vec<(Vec<u8>, Timestamp)> = Vec::new();
        while c.valid()? {
            let (enc, commit_ts) = split_versioned(c.key())?;
            stats.records_walked += 1;
            if commit_ts > safe_point {
                oldest_above = oldest_above.min(commit_ts.0);
            }
            if enc != current.as_slice() {
                current = enc.to_vec();
                kept_base = false;
                seen_data = false;
                // A newest Put with no twin here is in the latest CF only: it is the key's
                // newest data record, and the version kept for the safe point if it is at
                // or below it. (A commit that moves it here meanwhile writes a record this
                // walk's snapshot does not hold, so it is never removed.)
                // Its timestamp counts as seen: once a safe point passes it, the records
                // below it here can go.
                if let Some(raw) = engine.get(Cf::Latest, enc)? {
                    if is_twinless(&raw) {
                        let latest_ts = split_latest(&raw)?.0;
                        seen_data = true;
                        kept_base = latest_ts <= safe_point;
                        if latest_ts > safe_point {
                            oldest_above = oldest_above.min(latest_ts.0);
                        }
                    }
                }
            }
            // One parse per record, without copying its value.
            let w = WriteRef::decode(c.value())?;
            if !seen_data && matches!(w.kind, Kind::Put | Kind::Delete) {
                seen_data = true;
                if w.kind == Kind::Delete && commit_ts <= safe_point {
                    deleted.push((enc.to_vec(), commit_ts));
                    if deleted.len() >= 1024 {
                        self.forget_deleted(&std::mem::take(&mut deleted))?;
                    }
                }
            }
            if commit_ts <= safe_point {
                let remove = match w.kind {
                    Kind::Rollback | Kind::Lock | Kind::Pessimistic => true,
                    Kind::Put if !kept_base => {
                        kept_base = true;
                        false
                    }
                    Kind::Delete if !kept_base => {
                        kept_base = true;
                        true
                    }
                    Kind::Put | Kind::Delete => true,
                };
                if remove {
                    batch.delete(Cf::Write, c.key().to_vec());
                    if w.kind == Kind::Put && w.short_value.is_none() {
                        batch.delete(Cf::Data, versioned(enc, w.start_ts));
                    }
                    stats.versions_removed += 1;
                }
            }
            if batch.ops.len() >= 4096 {
                engine.write(std::mem::take(&mut batch), false)?;
            }
            c.next();
        }
        if !batch.is_empty() {
            engine.write(batch, false)?;
        }
        self.forget_deleted(&deleted)?;
        Ok((stats, oldest_above))
    }
}
