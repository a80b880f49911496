//! The latest CF's records in memory: a bounded cache in front of RocksDB's point reads of
//! that column family, which every statement makes (a row by its key, the record a lock
//! or a prewrite checks).
//!
//! RocksDB's own row cache is keyed by table file, so every flush and compaction of the
//! often-written latest CF orphans its entries, and the blocks of the new files are cold
//! too: a 4-warehouse TPC-C run made 20 point reads of it per transaction at 11,500
//! instructions each (a callgrind profile in BENCHMARKS.md, session 47), a tenth of the
//! server's work; a hit here costs a hash, an uncontended lock and a copy. Writes keep it
//! current: a record written is cached as written (TPC-C reads most rows shortly before
//! or after it writes them), except that a large batch (a load) only drops what it writes.
//!
//! Consistency with RocksDB. A reader that misses reads RocksDB and fills the entry only
//! if no write of the key's stripe (a slice of the key space sharing a generation
//! counter) started or was running since the reader looked: a writer marks its keys'
//! stripes as being written and drops their entries before the batch goes to RocksDB,
//! and stores the new records (or leaves the entries empty) after it. So an entry never
//! holds a record older than what RocksDB had when a read of it returned. Two writes of
//! one key never run at once: the MVCC latches and locks order them (the cache would keep
//! whichever record was stored last).
//!
//! Eviction is CLOCK: entries queue in insertion order; a read marks its entry, and the
//! hand gives a marked entry a second round and evicts an unmarked one.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;
use strata_common::storage_metrics::{RECORD_CACHE_BYTES, RECORD_CACHE_HITS, RECORD_CACHE_MISSES};

/// Shards, each under its own lock and with its share of the budget.
const SHARDS: usize = 256;
/// Generation counters per shard: a write refuses the racing fills of its stripe only.
const STRIPES: usize = 16;
/// Bytes an entry costs besides its key and record (map slot, queue slot, headers).
const ENTRY_OVERHEAD: usize = 96;
/// A write batch of more latest-CF records than this only drops the cached ones: a bulk
/// load's commits would push out what readers use.
pub(crate) const WRITE_ALLOCATE_MAX: usize = 256;

/// Seeds of the two hashes: the shard and stripe come from one, the map inside a shard
/// uses the other (the shard's keys share the low bits of the first).
const PLACE_SEED: u64 = 0x05EE_D0FC_AC4E;
const MAP_SEED: u64 = 0x00DD_5EED_43A9;

/// The cached records of one column family.
pub(crate) struct RecordCache {
    shards: Box<[Mutex<Shard>]>,
    place: foldhash::fast::FixedState,
    shard_budget: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// One cached key: its record (None: the key has none) if `valid`.
struct Slot {
    record: Option<Box<[u8]>>,
    valid: bool,
    /// Read since the clock hand last passed.
    referenced: bool,
}

impl Slot {
    fn cost(key: &[u8], record: Option<&[u8]>) -> usize {
        key.len() + record.map_or(0, <[u8]>::len) + ENTRY_OVERHEAD
    }
}

struct Shard {
    map: HashMap<Arc<[u8]>, Slot, foldhash::fast::FixedState>,
    /// Every key of `map`, once, in the order the clock hand visits them.
    clock: VecDeque<Arc<[u8]>>,
    bytes: usize,
    /// Per stripe: bumped when a write starts and when it ends.
    gens: [u64; STRIPES],
    /// Per stripe: writes started and not yet ended.
    writing: [u32; STRIPES],
}

/// What a read that missed needs to fill the entry afterwards (`RecordCache::fill`).
#[derive(Clone, Copy)]
pub(crate) struct Ticket {
    shard: usize,
    stripe: usize,
    gen: u64,
}

/// The stripes one `RecordCache::writing` marked as being written: a bit per stripe, per
/// shard. `written` takes them to end exactly those marks.
#[must_use = "hand the marks to `written`"]
pub(crate) struct Marks {
    stripes: [u16; SHARDS],
}

impl Marks {
    /// Marks the stripe; true if it was not marked yet.
    fn mark(&mut self, shard: usize, stripe: usize) -> bool {
        let bit = 1u16 << stripe;
        let fresh = self.stripes[shard] & bit == 0;
        self.stripes[shard] |= bit;
        fresh
    }

    /// Clears the stripe's mark; true if it was marked.
    fn unmark(&mut self, shard: usize, stripe: usize) -> bool {
        let bit = 1u16 << stripe;
        let was = self.stripes[shard] & bit != 0;
        self.stripes[shard] &= !bit;
        was
    }
}

/// The stripes whose bits `mask` sets.
fn bits(mask: u16) -> impl Iterator<Item = usize> {
    (0..STRIPES).filter(move |i| mask & (1 << i) != 0)
}

/// What `RecordCache::lookup` found.
pub(crate) enum Lookup {
    /// The key's record (None: it has none).
    Hit(Option<Vec<u8>>),
    /// Not cached; the ticket (if a fill may follow) is for `fill`.
    Miss(Option<Ticket>),
}

impl RecordCache {
    /// A cache holding about `budget` bytes.
    pub fn new(budget: usize) -> RecordCache {
        let shards = (0..SHARDS)
            .map(|_| {
                Mutex::new(Shard {
                    map: HashMap::with_hasher(foldhash::fast::FixedState::with_seed(MAP_SEED)),
                    clock: VecDeque::new(),
                    bytes: 0,
                    gens: [0; STRIPES],
                    writing: [0; STRIPES],
                })
            })
            .collect();
        RecordCache {
            shards,
            place: foldhash::fast::FixedState::with_seed(PLACE_SEED),
            shard_budget: budget / SHARDS,
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    fn locate(&self, key: &[u8]) -> (usize, usize) {
        let h = self.place.hash_one(key);
        ((h % SHARDS as u64) as usize, ((h >> 32) % STRIPES as u64) as usize)
    }

    /// The cached record of `key`, or a ticket to fill it with what RocksDB reads.
    pub fn lookup(&self, key: &[u8]) -> Lookup {
        let (shard, stripe) = self.locate(key);
        let mut s = self.shards[shard].lock();
        if let Some(slot) = s.map.get_mut(key) {
            if slot.valid {
                slot.referenced = true;
                let record = slot.record.as_deref().map(<[u8]>::to_vec);
                drop(s);
                self.hits.fetch_add(1, Ordering::Relaxed);
                RECORD_CACHE_HITS.fetch_add(1, Ordering::Relaxed);
                return Lookup::Hit(record);
            }
        }
        let ticket = (s.writing[stripe] == 0).then(|| Ticket { shard, stripe, gen: s.gens[stripe] });
        drop(s);
        self.misses.fetch_add(1, Ordering::Relaxed);
        RECORD_CACHE_MISSES.fetch_add(1, Ordering::Relaxed);
        Lookup::Miss(ticket)
    }

    /// Caches `record`, read from RocksDB after `lookup` gave `ticket`, unless a write of
    /// the stripe started since.
    pub fn fill(&self, key: &[u8], ticket: Option<Ticket>, record: Option<&[u8]>) {
        let Some(t) = ticket else { return };
        let mut s = self.shards[t.shard].lock();
        if s.gens[t.stripe] != t.gen {
            return;
        }
        s.set(key, record, true, self.shard_budget);
    }

    /// Before `keys` are written: their entries are emptied and their stripes marked as
    /// being written (each stripe once per call). Every call is followed by `written` of
    /// the same keys with the marks it returns.
    pub fn writing(&self, keys: &[&[u8]]) -> Marks {
        let mut marks = Marks { stripes: [0; SHARDS] };
        if keys.len() <= WRITE_ALLOCATE_MAX {
            for key in keys {
                let (shard, stripe) = self.locate(key);
                let mut s = self.shards[shard].lock();
                if marks.mark(shard, stripe) {
                    s.writing[stripe] += 1;
                    s.gens[stripe] += 1;
                }
                s.set(key, None, false, self.shard_budget);
            }
            return marks;
        }
        // A large batch takes each shard's lock once: its keys grouped by shard (a
        // counting sort of their indices).
        let places: Vec<(usize, usize)> = keys.iter().map(|k| self.locate(k)).collect();
        let mut starts = [0usize; SHARDS + 1];
        for &(shard, _) in &places {
            starts[shard + 1] += 1;
        }
        for i in 0..SHARDS {
            starts[i + 1] += starts[i];
        }
        let mut next = starts;
        let mut order = vec![0usize; keys.len()];
        for (i, &(shard, stripe)) in places.iter().enumerate() {
            order[next[shard]] = i;
            next[shard] += 1;
            marks.mark(shard, stripe);
        }
        for (shard, mask) in marks.stripes.iter().enumerate() {
            if *mask == 0 {
                continue;
            }
            let mut s = self.shards[shard].lock();
            for stripe in bits(*mask) {
                s.writing[stripe] += 1;
                s.gens[stripe] += 1;
            }
            if !s.map.is_empty() {
                for &i in &order[starts[shard]..starts[shard + 1]] {
                    s.set(keys[i], None, false, self.shard_budget);
                }
            }
        }
        marks
    }

    /// After the write `writing` announced (and marked with `marks`): each key's record as
    /// written (None: deleted), or, when `records` is None (a failed write, a large
    /// batch), nothing cached and only the marked stripes touched.
    pub fn written(&self, keys: &[&[u8]], records: Option<&[Option<&[u8]>]>, mut marks: Marks) {
        if let Some(records) = records {
            for (key, record) in keys.iter().zip(records) {
                let (shard, stripe) = self.locate(key);
                let mut s = self.shards[shard].lock();
                if marks.unmark(shard, stripe) {
                    s.writing[stripe] -= 1;
                    s.gens[stripe] += 1;
                }
                s.set(key, *record, true, self.shard_budget);
            }
        }
        for (shard, mask) in marks.stripes.iter().enumerate() {
            if *mask == 0 {
                continue;
            }
            let mut s = self.shards[shard].lock();
            for stripe in bits(*mask) {
                s.writing[stripe] -= 1;
                s.gens[stripe] += 1;
            }
        }
    }

    /// Drops every entry (keys were removed outside writes: table files dropped whole).
    /// Fills racing with it are refused.
    pub fn clear(&self) {
        for shard in self.shards.iter() {
            let mut s = shard.lock();
            s.map.clear();
            s.clock.clear();
            RECORD_CACHE_BYTES.fetch_sub(s.bytes as u64, Ordering::Relaxed);
            s.bytes = 0;
            for g in s.gens.iter_mut() {
                *g += 1;
            }
        }
    }

    /// Lookups that found the key, and that did not.
    pub fn counts(&self) -> (u64, u64) {
        (self.hits.load(Ordering::Relaxed), self.misses.load(Ordering::Relaxed))
    }

    /// Bytes held (as the budget counts them).
    pub fn bytes(&self) -> usize {
        self.shards.iter().map(|s| s.lock().bytes).sum()
    }
}

impl Drop for RecordCache {
    fn drop(&mut self) {
        RECORD_CACHE_BYTES.fetch_sub(self.bytes() as u64, Ordering::Relaxed);
    }
}

impl Shard {
    /// Sets `key`'s entry to `record` (valid or not), adding it if absent and `valid`.
    fn set(&mut self, key: &[u8], record: Option<&[u8]>, valid: bool, budget: usize) {
        let before = self.bytes;
        self.set_within(key, record, valid, budget);
        // The process-wide gauge moves by the difference (wrapping: it may shrink).
        RECORD_CACHE_BYTES.fetch_add((self.bytes as u64).wrapping_sub(before as u64), Ordering::Relaxed);
    }

    fn set_within(&mut self, key: &[u8], record: Option<&[u8]>, valid: bool, budget: usize) {
        let record = if valid { record } else { None };
        match self.map.get_mut(key) {
            Some(slot) => {
                self.bytes -= Slot::cost(key, slot.record.as_deref());
                self.bytes += Slot::cost(key, record);
                slot.record = record.map(Box::from);
                slot.valid = valid;
            }
            None if valid => {
                let key: Arc<[u8]> = Arc::from(key);
                self.bytes += Slot::cost(&key, record);
                self.clock.push_back(key.clone());
                self.map.insert(key, Slot { record: record.map(Box::from), valid, referenced: false });
            }
            None => return,
        }
        self.evict(budget);
    }

    /// Evicts until the shard is within `budget`.
    fn evict(&mut self, budget: usize) {
        // Each entry gets at most one second round per call: bounded work.
        let mut rounds = self.clock.len();
        while self.bytes > budget && rounds > 0 {
            rounds -= 1;
            let Some(key) = self.clock.pop_front() else { break };
            let Some(slot) = self.map.get_mut(&key) else { continue };
            if slot.referenced {
                slot.referenced = false;
                self.clock.push_back(key);
                continue;
            }
            let cost = Slot::cost(&key, slot.record.as_deref());
            self.map.remove(&key);
            self.bytes -= cost;
        }
        // Everything was referenced: evict from the front regardless.
        while self.bytes > budget {
            let Some(key) = self.clock.pop_front() else { break };
            if let Some(slot) = self.map.remove(&key) {
                self.bytes -= Slot::cost(&key, slot.record.as_deref());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(c: &RecordCache, key: &[u8]) -> Option<Option<Vec<u8>>> {
        match c.lookup(key) {
            Lookup::Hit(r) => Some(r),
            Lookup::Miss(_) => None,
        }
    }

    fn fill(c: &RecordCache, key: &[u8], record: Option<&[u8]>) {
        match c.lookup(key) {
            Lookup::Miss(t) => c.fill(key, t, record),
            Lookup::Hit(_) => panic!("already cached"),
        }
    }

    #[test]
    fn a_filled_record_is_served_and_a_write_replaces_it() {
        let c = RecordCache::new(1 << 20);
        assert!(hit(&c, b"k").is_none());
        fill(&c, b"k", Some(b"v1"));
        assert_eq!(hit(&c, b"k"), Some(Some(b"v1".to_vec())));
        fill(&c, b"absent", None);
        assert_eq!(hit(&c, b"absent"), Some(None));
        let m = c.writing(&[b"k", b"absent"]);
        assert!(hit(&c, b"k").is_none(), "a key being written is not served");
        c.written(&[b"k", b"absent"], Some(&[Some(b"v2"), Some(b"new")]), m);
        assert_eq!(hit(&c, b"k"), Some(Some(b"v2".to_vec())));
        assert_eq!(hit(&c, b"absent"), Some(Some(b"new".to_vec())));
        let m = c.writing(&[b"k"]);
        c.written(&[b"k"], None, m);
        assert!(hit(&c, b"k").is_none(), "a write that caches nothing leaves the key uncached");
    }

    #[test]
    fn a_fill_racing_with_a_write_is_refused() {
        let c = RecordCache::new(1 << 20);
        // The reader looked before the write started.
        let Lookup::Miss(t) = c.lookup(b"k") else { panic!("empty cache") };
        let m = c.writing(&[b"k"]);
        c.written(&[b"k"], None, m);
        c.fill(b"k", t, Some(b"old"));
        assert!(hit(&c, b"k").is_none());
        // The reader looked while the write ran: no ticket.
        let m = c.writing(&[b"k"]);
        let Lookup::Miss(t) = c.lookup(b"k") else { panic!("not cached") };
        assert!(t.is_none());
        c.written(&[b"k"], Some(&[Some(b"new")]), m);
        c.fill(b"k", t, Some(b"old"));
        assert_eq!(hit(&c, b"k"), Some(Some(b"new".to_vec())));
        // A clear refuses fills that looked before it.
        let m = c.writing(&[b"j"]);
        c.written(&[b"j"], None, m);
        let Lookup::Miss(t) = c.lookup(b"j") else { panic!("not cached") };
        c.clear();
        c.fill(b"j", t, Some(b"gone"));
        assert!(hit(&c, b"j").is_none());
        assert!(hit(&c, b"k").is_none());
    }

    #[test]
    fn a_large_write_empties_its_keys_and_ends_its_marks() {
        let c = RecordCache::new(64 << 20);
        let keys: Vec<Vec<u8>> = (0..5000u32).map(|i| format!("row{i:05}").into_bytes()).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        for k in &refs[..100] {
            fill(&c, k, Some(b"old"));
        }
        fill(&c, b"bystander", Some(b"kept"));
        let Lookup::Miss(before) = c.lookup(b"row04999") else { panic!("not cached") };
        // A small write overlapping the large one: the stripe counts of both balance.
        let small = c.writing(&[refs[0], refs[1]]);
        let large = c.writing(&refs);
        for k in &refs[..100] {
            assert!(hit(&c, k).is_none(), "{k:?} is being written");
        }
        assert!(refs.iter().all(|k| matches!(c.lookup(k), Lookup::Miss(None))), "no fill while written");
        c.written(&refs, None, large);
        c.written(&[refs[0], refs[1]], Some(&[Some(b"a"), Some(b"b")]), small);
        assert_eq!(hit(&c, refs[0]), Some(Some(b"a".to_vec())));
        assert_eq!(hit(&c, b"bystander"), Some(Some(b"kept".to_vec())));
        c.fill(b"row04999", before, Some(b"stale"));
        assert!(hit(&c, b"row04999").is_none(), "a fill that looked before the write is refused");
        // Every mark ended: reads may fill again.
        for k in &refs[2..] {
            fill(&c, k, Some(b"new"));
            assert_eq!(hit(&c, k), Some(Some(b"new".to_vec())));
        }
    }

    #[test]
    fn it_stays_within_its_budget_and_keeps_what_is_read() {
        let budget = SHARDS * 4096;
        let c = RecordCache::new(budget);
        let value = vec![7u8; 100];
        let hot: Vec<Vec<u8>> = (0..200u32).map(|i| format!("hot{i}").into_bytes()).collect();
        for k in &hot {
            fill(&c, k, Some(&value));
        }
        for round in 0..50u32 {
            for k in &hot {
                assert!(hit(&c, k).is_some(), "hot key {k:?} evicted in round {round}");
            }
            for i in 0..400u32 {
                let k = format!("cold{round}-{i}").into_bytes();
                fill(&c, &k, Some(&value));
            }
            assert!(c.bytes() <= budget, "{} bytes held", c.bytes());
        }
        let (hits, misses) = c.counts();
        assert_eq!(hits, 200 * 50);
        assert_eq!(misses, 200 + 400 * 50);
    }
}
