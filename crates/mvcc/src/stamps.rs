//! Commit stamps: for each stripe of keys, the newest commit timestamp written to it.
//!
//! A locking scan (`UPDATE ... WHERE` over a range, `SELECT ... FOR UPDATE`) reads each row's
//! latest record, and its pessimistic lock read that record again with a point get, to check
//! for a newer commit and to keep it for the commit (`Prior`): TPC-C's Delivery spent a
//! tenth of its time in those second reads. The stamps settle whether the second read could
//! find anything new: a key hashes to one of `STRIPES` stripes, and every batch that writes
//! latest-CF records raises its keys' stripes to their commit timestamps before it is
//! written (`note`). A lock handed the record a scan read at `ts` may use it instead of
//! reading when its key's stripe is at most `ts` (`newest`): no commit after `ts` has
//! touched any key of the stripe, so the record is still the key's latest.
//!
//! Why that is enough: the scan read at `ts` saw every commit at or below `ts` (Percolator's
//! read rule, the locks it checks), and a commit above `ts` raised the stripe before its
//! write; the lock runs under its keys' latches, as every other writer of those keys does,
//! so it sees either the raised stripe or no write — or, while a commit (which holds only
//! its primary's latch) is writing, that commit's lock, and waits for it. Stripes start at
//! the oracle's high-water mark when the store opened, above every commit made before.
//! Records that leave the latest CF (pruned Deletes, dropped tables) are never handed back:
//! a scan hands back live rows. A stripe shared by a busy key only costs the read the lock
//! would have made anyway.

use std::sync::atomic::{AtomicU64, Ordering};

use strata_common::Timestamp;
use strata_storage::engine::BatchOp;
use strata_storage::{Cf, WriteBatch};

use crate::records::split_latest;

/// Stripes of the key space (a power of two): 128 KiB of counters, so that a stripe raised
/// within one statement's lifetime by an unrelated key is rare at tens of thousands of
/// committed keys a second.
const STRIPES: usize = 1 << 14;

/// The newest commit timestamp per stripe of encoded keys (module docs).
pub(crate) struct CommitStamps {
    stripes: Box<[AtomicU64]>,
}

impl CommitStamps {
    /// Stamps that all start at `floor`, a timestamp above every commit already on disk.
    pub(crate) fn new(floor: Timestamp) -> CommitStamps {
        CommitStamps { stripes: (0..STRIPES).map(|_| AtomicU64::new(floor.0)).collect() }
    }

    fn stripe(&self, enc: &[u8]) -> &AtomicU64 {
        &self.stripes[stripe_of(enc)]
    }

    /// Raises the stripes of the latest-CF records `batch` writes to their commit
    /// timestamps. Called before the batch is written.
    ///
    /// A batch with at least `STRIPES` latest-CF records (a bulk load, an index backfill)
    /// would touch most stripes anyway: it raises every stripe to its newest timestamp
    /// instead, one pass over the counters in place of a hash and an atomic per key.
    /// Raising a stripe higher than its keys' commits is always safe: a lock only reads
    /// when it need not have.
    pub(crate) fn note(&self, batch: &WriteBatch) {
        if batch.ops.len() >= STRIPES {
            let (count, newest) =
                batch.ops.iter().filter_map(latest).fold((0usize, 0u64), |(n, top), (_, ts)| (n + 1, top.max(ts)));
            if count >= STRIPES {
                for stripe in self.stripes.iter() {
                    stripe.fetch_max(newest, Ordering::SeqCst);
                }
                return;
            }
        }
        for (enc, ts) in batch.ops.iter().filter_map(latest) {
            self.stripe(enc).fetch_max(ts, Ordering::SeqCst);
        }
    }

    /// The newest commit timestamp any key of `enc`'s stripe was written with (at least the
    /// floor).
    pub(crate) fn newest(&self, enc: &[u8]) -> Timestamp {
        Timestamp(self.stripe(enc).load(Ordering::SeqCst))
    }
}

/// A latest-CF put's key and commit timestamp. An undecodable record stamps as high as it
/// can go: the lock that meets it then reads (and reports the corruption).
fn latest(op: &BatchOp) -> Option<(&[u8], u64)> {
    match op {
        BatchOp::Put(Cf::Latest, enc, raw) => Some((enc, split_latest(raw).map_or(u64::MAX, |(ts, _)| ts.0))),
        _ => None,
    }
}

/// The key's stripe: foldhash, 16 bytes a step (with a byte-at-a-time FNV-1a, `note` was
/// 0.7% of a TPC-C load's server samples, 0.13% now: every commit hashes each latest-CF key
/// it writes). The stamps live in memory only, so the hash may change between versions.
fn stripe_of(enc: &[u8]) -> usize {
    use std::hash::BuildHasher;
    (foldhash::fast::FixedState::with_seed(0x57A4_95EE_D5EE_D000).hash_one(enc) as usize) & (STRIPES - 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::{latest_record, Kind};

    fn put(batch: &mut WriteBatch, key: &[u8], commit_ts: u64) {
        batch.put(Cf::Latest, key.to_vec(), latest_record(Timestamp(commit_ts), Kind::Put, Timestamp(1), Some(b"v")));
    }

    #[test]
    fn a_batch_raises_the_stripes_of_its_latest_records_only() {
        let s = CommitStamps::new(Timestamp(10));
        assert_eq!(s.newest(b"a"), Timestamp(10), "starts at the floor");
        let mut b = WriteBatch::default();
        put(&mut b, b"a", 50);
        b.put(Cf::Write, b"w".to_vec(), vec![]);
        b.delete(Cf::Latest, b"d".to_vec());
        s.note(&b);
        assert_eq!(s.newest(b"a"), Timestamp(50));
        // Keys of other stripes stay where they were (find two that differ from "a").
        let other = (0u32..).map(|i| i.to_be_bytes()).find(|k| stripe_of(k) != stripe_of(b"a")).expect("a key");
        assert_eq!(s.newest(&other), Timestamp(10));
        if stripe_of(b"w") != stripe_of(b"a") {
            assert_eq!(s.newest(b"w"), Timestamp(10), "write CF records stamp nothing");
        }
    }

    #[test]
    fn a_stripe_never_goes_down() {
        let s = CommitStamps::new(Timestamp(0));
        let mut b = WriteBatch::default();
        put(&mut b, b"k", 70);
        s.note(&b);
        let mut older = WriteBatch::default();
        put(&mut older, b"k", 60);
        s.note(&older);
        assert_eq!(s.newest(b"k"), Timestamp(70));
    }

    #[test]
    fn an_undecodable_record_raises_its_stripe_to_the_top() {
        let s = CommitStamps::new(Timestamp(5));
        let mut b = WriteBatch::default();
        b.put(Cf::Latest, b"k".to_vec(), vec![0xFF]);
        s.note(&b);
        assert_eq!(s.newest(b"k"), Timestamp(u64::MAX));
    }

    #[test]
    fn a_bulk_batch_raises_every_stripe_to_its_newest_commit() {
        let s = CommitStamps::new(Timestamp(10));
        let mut b = WriteBatch::default();
        for i in 0..STRIPES as u32 {
            put(&mut b, &i.to_be_bytes(), if i == 7 { 90 } else { 40 });
        }
        s.note(&b);
        assert_eq!(s.newest(&7u32.to_be_bytes()), Timestamp(90));
        assert_eq!(s.newest(&3u32.to_be_bytes()), Timestamp(90), "raised to the batch's newest");
        assert_eq!(s.newest(b"a key the batch never wrote"), Timestamp(90));
        // A stripe already above the batch keeps its stamp.
        let mut later = WriteBatch::default();
        put(&mut later, b"hot", 500);
        s.note(&later);
        s.note(&b);
        assert_eq!(s.newest(b"hot"), Timestamp(500));
    }

    #[test]
    fn a_large_batch_of_few_latest_records_stamps_per_key() {
        let s = CommitStamps::new(Timestamp(10));
        let mut b = WriteBatch::default();
        for i in 0..STRIPES as u32 {
            b.put(Cf::Write, i.to_be_bytes().to_vec(), vec![]);
        }
        put(&mut b, b"a", 60);
        s.note(&b);
        assert_eq!(s.newest(b"a"), Timestamp(60));
        let other = (0u32..).map(|i| i.to_be_bytes()).find(|k| stripe_of(k) != stripe_of(b"a")).expect("a key");
        assert_eq!(s.newest(&other), Timestamp(10));
    }

    #[test]
    fn keys_spread_over_the_stripes() {
        let used: std::collections::HashSet<usize> =
            (0u32..4096).map(|i| stripe_of(format!("t1_r{i:08}").as_bytes())).collect();
        assert!(used.len() > 3500, "4,096 keys fell in {} stripes", used.len());
    }
}
