//! Ranges of the latest CF known to hold no record, so a scan can seek past them.
//!
//! A table deleted from one end (TPC-C's `new_order`, any queue) leaves its deleted rows
//! at the head of every scan of it: pruned Deletes (`prune`) are RocksDB tombstones until
//! a compaction drops them, and RocksDB's seek steps over each tombstone and the Put it
//! hides. `SELECT .. ORDER BY id LIMIT 1` then costs as much as the run of deleted rows
//! before the first live one: a profile of go-tpc's Delivery put a fifth of the server's
//! time there. InnoDB's purge removes such records from the B-tree; an LSM cannot, so the
//! store remembers instead: a scan whose seek stepped over many dead entries notes its
//! start (a slow seek), and the next scan
//! from that start records `[start, first record)` as empty. Later scans from there seek
//! straight to the end of the range.
//!
//! A range stays true while it exists: every write of a latest-CF record removes the ranges
//! that hold its key (`written`), after the write lands and before its locks are released.
//! A scan that records a range registers first (`begin`, before its cursor pins its
//! snapshot); a write that lands in the registered span while the scan runs is noted in the
//! registration, and the range recorded stops short of it (`finish`). So a record written
//! before the snapshot is seen by the scan, and one written after it either cuts the range
//! or removes it. Between a write landing and `written` a reader may still seek past the
//! new key: the key's lock is still in the lock table then, and a reader that would need
//! the new record is blocked by it (walks check the locks of their range first).
//!
//! Records leaving the latest CF (pruned Deletes, GC, dropped tables) never make a range
//! wrong. A reader below the prune floor reads the write CF as well and ignores ranges.

use std::collections::{BTreeMap, VecDeque};
use std::ops::Bound;

use strata_storage::engine::BatchOp;
use strata_storage::{Cf, WriteBatch};

/// A seek that stepped over more dead entries than this (`Cursor::seek_counting`) notes
/// its start. (Time would be a poorer sign: a seek that reads a block from disk is slow
/// too, and recording ranges there gains nothing.)
pub(crate) const SLOW_SEEK_SKIPS: u64 = 32;

/// How many starts of slow seeks are kept (the oldest goes first).
const SLOW_STARTS_MAX: usize = 256;

/// How many empty ranges are kept.
const RANGES_MAX: usize = 4096;

/// A commit with more latest-CF records than this (a bulk load's) removes the ranges
/// overlapping the span of its keys rather than cutting them at each key. A transaction's
/// commit spans tables (TPC-C's Delivery writes ~130 keys of four), and removing every range
/// between its lowest and highest key would remove all there are.
const KEYS_MAX: usize = 512;

/// A scan recording a range: its span, and the lowest key written into the span since it
/// registered.
struct Pending {
    id: u64,
    start: Vec<u8>,
    end: Vec<u8>,
    low: Option<Vec<u8>>,
}

#[derive(Default)]
struct Inner {
    /// Non-overlapping empty ranges: start → end (exclusive).
    ranges: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Scans recording a range.
    pending: Vec<Pending>,
    /// Starts of scans whose seek was slow.
    slow: VecDeque<Vec<u8>>,
    next_id: u64,
}

impl Inner {
    /// The range holding `key`, if any.
    fn holding(&self, key: &[u8]) -> Option<(&Vec<u8>, &Vec<u8>)> {
        self.ranges
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
            .filter(|(_, end)| key < end.as_slice())
    }

    /// Cuts every range and registration at `key`, which now has a record.
    fn cut(&mut self, key: &[u8]) {
        if let Some((start, _)) = self.holding(key) {
            let start = start.clone();
            let end = self.ranges.remove(&start).unwrap_or_default();
            if start.as_slice() < key {
                self.ranges.insert(start, key.to_vec());
            }
            // The part past the key holds nothing either.
            let mut after = key.to_vec();
            after.push(0);
            if after < end {
                self.ranges.insert(after, end);
            }
        }
        for p in &mut self.pending {
            if p.start.as_slice() <= key && key < p.end.as_slice() && p.low.as_deref().is_none_or(|l| key < l) {
                p.low = Some(key.to_vec());
            }
        }
    }

    /// Removes every range and cuts every registration overlapping `[lo, hi]`.
    fn cut_span(&mut self, lo: &[u8], hi: &[u8]) {
        let mut doomed: Vec<Vec<u8>> =
            self.ranges.range::<[u8], _>((Bound::Included(lo), Bound::Included(hi))).map(|(s, _)| s.clone()).collect();
        if let Some((start, _)) = self.holding(lo) {
            doomed.push(start.clone());
        }
        for s in doomed {
            self.ranges.remove(&s);
        }
        for p in &mut self.pending {
            if p.start.as_slice() <= hi && lo < p.end.as_slice() {
                let first = lo.max(p.start.as_slice());
                if p.low.as_deref().is_none_or(|l| first < l) {
                    p.low = Some(first.to_vec());
                }
            }
        }
    }

    /// Records `[start, end)` as empty, merged with the ranges it overlaps (all of them are
    /// empty, so their union is).
    fn insert(&mut self, mut start: Vec<u8>, mut end: Vec<u8>) {
        if start >= end {
            return;
        }
        if let Some((s, e)) = self.holding(&start).map(|(s, e)| (s.clone(), e.clone())) {
            self.ranges.remove(&s);
            start = s;
            end = end.max(e);
        }
        let inside: Vec<Vec<u8>> = self.ranges.range(start.clone()..=end.clone()).map(|(s, _)| s.clone()).collect();
        for s in inside {
            if let Some(e) = self.ranges.remove(&s) {
                end = end.max(e);
            }
        }
        if self.ranges.len() >= RANGES_MAX {
            self.ranges.pop_first();
        }
        self.ranges.insert(start, end);
    }
}

/// The latest-CF keys a batch writes, copied before the batch goes to the engine.
pub(crate) enum Fresh {
    None,
    Keys(Vec<Vec<u8>>),
    /// The lowest and highest of many.
    Span(Vec<u8>, Vec<u8>),
}

impl Fresh {
    pub(crate) fn of(batch: &WriteBatch) -> Fresh {
        let keys = || {
            batch.ops.iter().filter_map(|op| match op {
                BatchOp::Put(Cf::Latest, k, _) => Some(k.as_slice()),
                _ => None,
            })
        };
        match keys().count() {
            0 => Fresh::None,
            n if n <= KEYS_MAX => Fresh::Keys(keys().map(<[u8]>::to_vec).collect()),
            _ => {
                let lo = keys().min().unwrap_or_default().to_vec();
                let hi = keys().max().unwrap_or_default().to_vec();
                Fresh::Span(lo, hi)
            }
        }
    }
}

/// The empty ranges of one store (module docs).
#[derive(Default)]
pub(crate) struct EmptyRanges {
    inner: parking_lot::Mutex<Inner>,
}

/// A scan's registration: where it may seek to, and what it records when done.
pub(crate) struct Ticket<'a> {
    ranges: &'a EmptyRanges,
    id: u64,
    /// `finish` took the registration out already.
    done: bool,
    /// The end of the empty range the scan's start is in, if there is one.
    pub(crate) seek: Option<Vec<u8>>,
}

impl Drop for Ticket<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let mut inner = self.ranges.inner.lock();
        inner.pending.retain(|p| p.id != self.id);
    }
}

impl EmptyRanges {
    /// Registers a scan of `[start, end)` if its start is worth it (an empty range begins
    /// there or a seek from there was slow). Called before the scan's cursor is made.
    pub(crate) fn begin(&self, start: &[u8], end: &[u8]) -> Option<Ticket<'_>> {
        let mut inner = self.inner.lock();
        let seek = inner.holding(start).map(|(_, e)| e.clone());
        if seek.is_none() && !inner.slow.iter().any(|s| s.as_slice() == start) {
            return None;
        }
        let id = inner.next_id;
        inner.next_id += 1;
        inner.pending.push(Pending { id, start: start.to_vec(), end: end.to_vec(), low: None });
        Some(Ticket { ranges: self, id, done: false, seek })
    }

    /// Records that the scan of `t` from `start` found its first record at `first` (or
    /// none before the end of its span, `first` = that end).
    pub(crate) fn finish(&self, mut t: Ticket<'_>, start: &[u8], first: &[u8]) {
        t.done = true; // no second lock in its drop
        let mut inner = self.inner.lock();
        let Some(i) = inner.pending.iter().position(|p| p.id == t.id) else { return };
        let end = match inner.pending.swap_remove(i).low {
            Some(l) if l.as_slice() < first => l,
            _ => first.to_vec(),
        };
        inner.insert(start.to_vec(), end);
    }

    /// Notes that a seek from `start` was slow: the next scan from there records its range.
    pub(crate) fn note_slow(&self, start: &[u8]) {
        let mut inner = self.inner.lock();
        if inner.slow.iter().any(|s| s.as_slice() == start) {
            return;
        }
        if inner.slow.len() >= SLOW_STARTS_MAX {
            inner.slow.pop_front();
        }
        inner.slow.push_back(start.to_vec());
    }

    /// Called after a batch writing `fresh` landed and before its locks are released.
    pub(crate) fn written(&self, fresh: &Fresh) {
        let mut inner = self.inner.lock();
        if inner.ranges.is_empty() && inner.pending.is_empty() {
            return;
        }
        match fresh {
            Fresh::None => {}
            Fresh::Keys(keys) => keys.iter().for_each(|k| inner.cut(k)),
            Fresh::Span(lo, hi) => inner.cut_span(lo, hi),
        }
    }

    /// How many empty ranges are known (tests).
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().ranges.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn a_scan_records_its_range_only_after_a_slow_seek() {
        let r = EmptyRanges::default();
        assert!(r.begin(b"a", b"z").is_none());
        r.note_slow(b"a");
        let t = r.begin(b"a", b"z").expect("registered");
        assert_eq!(t.seek, None);
        r.finish(t, b"a", b"m");
        let t = r.begin(b"a", b"z").expect("registered");
        assert_eq!(t.seek, Some(k("m")));
        // A scan starting inside the range seeks to its end too.
        let t2 = r.begin(b"c", b"z").expect("inside a range");
        assert_eq!(t2.seek, Some(k("m")));
        drop((t, t2));
        assert!(r.inner.lock().pending.is_empty());
    }

    #[test]
    fn a_write_into_a_range_cuts_it() {
        let r = EmptyRanges::default();
        r.note_slow(b"a");
        let t = r.begin(b"a", b"z").expect("registered");
        r.finish(t, b"a", b"m");
        r.written(&Fresh::Keys(vec![k("f")]));
        assert_eq!(r.begin(b"a", b"z").expect("registered").seek, Some(k("f")));
        // Past the key, the range still holds nothing.
        assert_eq!(r.begin(b"g", b"z").expect("registered").seek, Some(k("m")));
        // A write at the range's start removes what starts there.
        r.written(&Fresh::Keys(vec![k("a")]));
        assert_eq!(r.begin(b"a", b"z").expect("registered").seek, None);
    }

    #[test]
    fn a_write_while_a_scan_runs_stops_its_range_short() {
        let r = EmptyRanges::default();
        r.note_slow(b"a");
        let t = r.begin(b"a", b"z").expect("registered");
        // Lands after the scan's snapshot: the scan found "m" first, not "d".
        r.written(&Fresh::Keys(vec![k("d")]));
        r.written(&Fresh::Keys(vec![k("q")])); // past what the scan found: no matter
        r.finish(t, b"a", b"m");
        assert_eq!(r.begin(b"a", b"z").expect("registered").seek, Some(k("d")));
    }

    #[test]
    fn a_large_batch_removes_the_ranges_over_its_span() {
        let r = EmptyRanges::default();
        for (s, e) in [("a", "c"), ("e", "g"), ("k", "m")] {
            r.note_slow(s.as_bytes());
            let t = r.begin(s.as_bytes(), b"z").expect("registered");
            r.finish(t, s.as_bytes(), e.as_bytes());
        }
        assert_eq!(r.len(), 3);
        r.written(&Fresh::Span(k("b"), k("f")));
        assert_eq!(r.len(), 1);
        assert_eq!(r.begin(b"k", b"z").expect("registered").seek, Some(k("m")));
        let t = r.begin(b"a", b"z").expect("registered");
        assert_eq!(t.seek, None);
    }

    #[test]
    fn ranges_that_meet_merge() {
        let r = EmptyRanges::default();
        r.note_slow(b"a");
        r.note_slow(b"d");
        let t = r.begin(b"d", b"z").expect("registered");
        r.finish(t, b"d", b"h");
        let t = r.begin(b"a", b"z").expect("registered");
        r.finish(t, b"a", b"e");
        assert_eq!(r.len(), 1);
        assert_eq!(r.begin(b"a", b"z").expect("registered").seek, Some(k("h")));
    }

    #[test]
    fn fresh_keys_are_the_latest_cf_puts() {
        let mut b = WriteBatch::default();
        b.put(Cf::Write, k("w"), vec![]);
        b.put(Cf::Latest, k("x"), vec![]);
        b.delete(Cf::Latest, k("y"));
        assert!(matches!(Fresh::of(&b), Fresh::Keys(v) if v == vec![k("x")]));
        let mut big = WriteBatch::default();
        for i in 0..(KEYS_MAX as u32 + 1) {
            big.put(Cf::Latest, format!("k{i:03}").into_bytes(), vec![]);
        }
        assert!(
            matches!(Fresh::of(&big), Fresh::Span(lo, hi) if lo == k("k000") && hi == format!("k{KEYS_MAX:03}").into_bytes())
        );
        assert!(matches!(Fresh::of(&WriteBatch::default()), Fresh::None));
    }
}
