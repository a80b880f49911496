//! Garbage collection of old versions behind a safe point: for each key, the newest version
//! at or below the safe point is kept (unless it is a deletion) and everything older goes,
//! as do rollback and lock-only records at or below the safe point. The pass walks the write
//! CF, which holds every version but a key's newest Put (that one is only in the latest CF,
//! see `records`), so it looks up the latest record of each key it meets. Readers never use a
//! timestamp below the safe point, so what GC removes is invisible to every reader. A key
//! whose last change is a deletion at or below the safe point also loses its latest CF
//! record (under the key's latch, so a commit racing with GC is never undone).
//!
//! Most of that removal happens without a pass, in the write CF's compactions (`WriteFilter`,
//! TiKV's GC compaction filter): RocksDB rewrites every version a few times as it moves
//! down the levels anyway, and a version below another one at or below the safe point is
//! dropped on the way. A pass over everything (the walk) then only has to run rarely
//! (`gc_periodic`), for what a compaction cannot decide alone: the newest write-CF version
//! of a key whose newest Put (in the latest CF only) is itself at or below the safe point,
//! and deletions.
//!
//! `destroy_range` is the other half: a whole key range nobody can reach any more (a dropped
//! table, once the safe point has passed the drop) goes at once, without MVCC, cleared from
//! every column family (`Engine::clear_range`) and then compacted, so its space comes back
//! now.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_common::{Result, Timestamp};
use strata_storage::engine::BatchOp;
use strata_storage::{Cf, CompactionFilter, WriteBatch};

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
    /// Write records compactions dropped since the last pass (`WriteFilter`).
    pub versions_compacted_away: u64,
    /// Long values (data CF) deleted because compactions dropped their write records.
    pub values_removed: u64,
}

/// Long values of dropped write records waiting for `advance_gc` to delete them. Beyond
/// this many a compaction keeps the write records with long values instead (the walk
/// removes them later), so the list stays bounded when nobody drains it.
const MAX_ORPHANS: usize = 1 << 20;

/// Data-CF keys deleted in one write batch.
const ORPHAN_BATCH: usize = 4096;

/// How often `gc_periodic` walks the write CF when compactions filter it: the walk only
/// removes one version per updated key and the deletions, which cost space, not reads.
pub const FILTERED_WALK_INTERVAL: Duration = Duration::from_secs(30 * 60);

/// The write CF's compaction filter: what the compactions know of GC.
#[derive(Debug, Default)]
pub(crate) struct WriteFilter {
    /// The safe point compactions use (0: none yet, they drop nothing).
    safe_point: AtomicU64,
    /// Data-CF keys of the long values whose write records compactions dropped.
    orphans: parking_lot::Mutex<Vec<Vec<u8>>>,
    /// Write records compactions dropped since `advance_gc` last looked.
    removed: AtomicU64,
}

/// `WriteFilter` as the engine holds it.
pub(crate) struct WriteFilterHandle(pub(crate) Arc<WriteFilter>);

impl CompactionFilter for WriteFilterHandle {
    fn start(&self) -> strata_storage::engine::CompactionDecider {
        let mut run = FilterRun {
            safe_point: Timestamp(self.0.safe_point.load(Ordering::SeqCst)),
            shared: self.0.clone(),
            current: Vec::new(),
            based: false,
            removed: 0,
        };
        Box::new(move |key, value| run.drops(key, value))
    }
}

/// GC's rule for a write record at or below the safe point, the walk's and the compaction
/// filter's: whether it goes. `based` says whether a Put or Delete at or below the safe
/// point of the same key (they come newest first) was kept; the first one is kept (a reader
/// at the safe point may need it) and everything older goes, rollback and lock records
/// always. A Delete kept that way still goes if the caller sees all of the key's versions
/// (`whole`: the walk), since nothing older survives it.
fn goes(kind: Kind, based: &mut bool, whole: bool) -> bool {
    match kind {
        Kind::Rollback | Kind::Lock | Kind::Pessimistic => true,
        Kind::Put | Kind::Delete if !*based => {
            *based = true;
            kind == Kind::Delete && whole
        }
        Kind::Put | Kind::Delete => true,
    }
}

/// The data-CF key of a Put's value kept there (too long for the record), if it is one.
fn long_value_key(enc: &[u8], w: &WriteRef<'_>) -> Option<Vec<u8>> {
    (w.kind == Kind::Put && w.short_value.is_none()).then(|| versioned(enc, w.start_ts))
}

/// One compaction's pass of `WriteFilter`. Entries come in key order, so each key's
/// versions newest first. The rule is the walk's, restricted to what the compaction sees:
/// at or below the safe point, rollback and lock records go; the first Put or Delete stays
/// (a reader at the safe point may need it); every older Put or Delete goes, since that
/// one hides it from every reader. Entries of the key outside this compaction do not
/// matter: a version only goes below one this compaction keeps, so a key's newest version
/// at or below the safe point never goes (even a version moved into the write CF later,
/// with an older timestamp, goes only below a kept one). A Delete stays: older versions
/// of its key may sit in files this compaction does not rewrite.
struct FilterRun {
    safe_point: Timestamp,
    shared: Arc<WriteFilter>,
    /// The encoded key of the entries being seen.
    current: Vec<u8>,
    /// Whether a Put or Delete at or below the safe point of `current` was kept.
    based: bool,
    removed: u64,
}

impl FilterRun {
    fn drops(&mut self, key: &[u8], value: &[u8]) -> bool {
        // Anything not understood stays.
        let Ok((enc, ts)) = split_versioned(key) else { return false };
        if enc != self.current.as_slice() {
            self.current.clear();
            self.current.extend_from_slice(enc);
            self.based = false;
        }
        if ts > self.safe_point || self.safe_point == Timestamp::ZERO {
            return false;
        }
        let Ok(w) = WriteRef::decode(value) else { return false };
        let drop = goes(w.kind, &mut self.based, false);
        if let Some(value) = long_value_key(enc, &w).filter(|_| drop) {
            let mut orphans = self.shared.orphans.lock();
            if orphans.len() >= MAX_ORPHANS {
                return false;
            }
            orphans.push(value);
        }
        self.removed += u64::from(drop);
        drop
    }
}

impl Drop for FilterRun {
    fn drop(&mut self) {
        self.shared.removed.fetch_add(self.removed, Ordering::SeqCst);
    }
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
    /// When the last walk ran (`gc_periodic`).
    last_walk: parking_lot::Mutex<Option<Instant>>,
    /// The write CF's compaction filter, if the engine runs it.
    pub(crate) filter: Option<Arc<WriteFilter>>,
}

impl GcState {
    /// The state of a store on `engine`, whose write CF compactions run a `WriteFilter`
    /// if the engine compacts.
    pub(crate) fn new(engine: &dyn strata_storage::Engine) -> GcState {
        let filter = Arc::new(WriteFilter::default());
        let filtered = engine.set_compaction_filter(Cf::Write, Arc::new(WriteFilterHandle(filter.clone())));
        GcState {
            // What the store holds is unknown until a pass has walked it.
            pending: AtomicU64::new(0),
            // With the filter, the first periodic walk waits a whole interval too: a
            // restarted server's compactions clear most of what it left, and a walk in
            // the first minute would cost a busy server seconds of CPU at once.
            last_walk: parking_lot::Mutex::new(filtered.then(Instant::now)),
            filter: filtered.then_some(filter),
        }
    }

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
        self.engine().clear_range(Cf::Lock, start, end)?;
        self.engine().clear_range(Cf::Write, &enc_start, &enc_end)?;
        self.engine().clear_range(Cf::Latest, &enc_start, &enc_end)?;
        self.engine().clear_range(Cf::Data, &enc_start, &enc_end)?;
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
        for ((enc, commit_ts), user) in keys.iter().zip(&users) {
            // A locked key may be committing: its commit holds only its primary's latch
            // (`MvccStore::commit_unsynced`), and its new record must not be deleted here.
            if self.locks.contains(user) {
                continue;
            }
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

    /// Moves GC to `safe_point` without walking: the write CF's compactions drop what they
    /// can below it from now on (`WriteFilter`), and the long values of the write records
    /// they dropped so far are deleted. Returns the stats of that (nothing walked).
    pub fn advance_gc(&self, safe_point: Timestamp) -> Result<GcStats> {
        // No transaction at or below the safe point runs any more (and GC removes the
        // rollback records there).
        self.rolled_back_txns.write().retain(|t| *t > safe_point);
        let mut stats = GcStats::default();
        let Some(filter) = &self.gc_state.filter else { return Ok(stats) };
        filter.safe_point.fetch_max(safe_point.0, Ordering::SeqCst);
        stats.versions_compacted_away = filter.removed.swap(0, Ordering::SeqCst);
        // A dropped write record's value is invisible to every reader whether or not the
        // compaction that dropped it is installed yet: it was below a kept version.
        let orphans = std::mem::take(&mut *filter.orphans.lock());
        let mut batch = WriteBatch::default();
        for key in orphans {
            batch.delete(Cf::Data, key);
            stats.values_removed += 1;
            if batch.ops.len() >= ORPHAN_BATCH {
                self.engine().write(std::mem::take(&mut batch), false)?;
            }
        }
        if !batch.is_empty() {
            self.engine().write(batch, false)?;
        }
        Ok(stats)
    }

    /// The periodic GC: `advance_gc`, and a walk (`gc`) if the write CF's compactions do
    /// not filter it or the last walk is at least `walk_every` old.
    pub fn gc_periodic(&self, safe_point: Timestamp, walk_every: Duration) -> Result<GcStats> {
        let filtered = self.gc_state.filter.is_some();
        let due = !filtered || self.gc_state.last_walk.lock().is_none_or(|t| t.elapsed() >= walk_every);
        if !due {
            return self.advance_gc(safe_point);
        }
        self.gc(safe_point)
    }

    /// Removes versions no reader at or above `safe_point` can see (`advance_gc`, then a
    /// walk). The walk is skipped when no record the last one did not see at or below its
    /// safe point is at or below this one (see `GcState`).
    pub fn gc(&self, safe_point: Timestamp) -> Result<GcStats> {
        let advanced = self.advance_gc(safe_point)?;
        let state = &self.gc_state;
        // Records put from here on lower it again; the walk's snapshot, taken after, holds
        // every record put before (they are noted after their write).
        let pending = state.pending.swap(u64::MAX, Ordering::SeqCst);
        if pending > safe_point.0 {
            state.pending.fetch_min(pending, Ordering::SeqCst);
            return Ok(advanced);
        }
        let started = Instant::now();
        *state.last_walk.lock() = Some(started);
        match self.gc_walk(safe_point) {
            Ok((stats, oldest_above)) => {
                state.pending.fetch_min(oldest_above, Ordering::SeqCst);
                tracing::debug!(
                    "gc pass at {safe_point:?}: walked {} write records, removed {}, in {:?}",
                    stats.records_walked,
                    stats.versions_removed,
                    started.elapsed()
                );
                Ok(GcStats {
                    versions_compacted_away: advanced.versions_compacted_away,
                    values_removed: advanced.values_removed,
                    ..stats
                })
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
            if commit_ts <= safe_point && goes(w.kind, &mut kept_base, true) {
                batch.delete(Cf::Write, c.key().to_vec());
                if let Some(value) = long_value_key(enc, &w) {
                    batch.delete(Cf::Data, value);
                }
                stats.versions_removed += 1;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::Write;

    fn entry(key: &str, commit: u64, kind: Kind, long: bool) -> (Vec<u8>, Vec<u8>) {
        let short_value = (kind == Kind::Put && !long).then(|| b"v".to_vec());
        let w = Write { kind, start_ts: Timestamp(commit - 1), short_value, delta_base: None };
        (versioned(&encode_user_key(key.as_bytes()), Timestamp(commit)), w.encode())
    }

    /// What one compaction over `entries` (in key order) drops, at `safe_point`.
    fn run(filter: &Arc<WriteFilter>, entries: &[(Vec<u8>, Vec<u8>)]) -> Vec<bool> {
        let mut drops = WriteFilterHandle(filter.clone()).start();
        entries.iter().map(|(k, v)| drops(k, v)).collect()
    }

    #[test]
    fn a_compaction_drops_only_what_a_version_it_keeps_hides() {
        let filter = Arc::new(WriteFilter::default());
        let history = [
            entry("a", 90, Kind::Put, false),
            entry("a", 40, Kind::Rollback, false),
            entry("a", 30, Kind::Put, true),
            entry("a", 20, Kind::Lock, false),
            entry("a", 10, Kind::Put, true),
            entry("b", 45, Kind::Delete, false),
            entry("b", 35, Kind::Put, true),
            entry("c", 80, Kind::Put, false),
        ];
        // No safe point yet: nothing goes.
        assert_eq!(run(&filter, &history), [false; 8]);
        filter.safe_point.store(50, Ordering::SeqCst);
        // Above the safe point everything stays; below it, the first Put or Delete of each
        // key stays (a Delete too: older versions may be in other files), rollback and lock
        // records go, and so does every version under a kept one, long values queued.
        assert_eq!(run(&filter, &history), [false, true, false, true, true, false, true, false]);
        assert_eq!(filter.removed.load(Ordering::SeqCst), 4);
        let queued = filter.orphans.lock().clone();
        let want: Vec<Vec<u8>> = [("a", 9), ("b", 34)]
            .iter()
            .map(|(k, start)| versioned(&encode_user_key(k.as_bytes()), Timestamp(*start)))
            .collect();
        assert_eq!(queued, want);
        // A compaction that holds only the older versions of a key (the newer ones are in
        // other files) keeps the newest of them: it cannot know what the others hold.
        assert_eq!(run(&filter, &history[2..5]), [false, true, true]);
        assert_eq!(run(&filter, &history[6..7]), [false]);
    }
}
