//! Resident tables: every latest-CF record of an often-scanned table held in memory, in
//! key order, so that its range scans never go through RocksDB's iterators.
//!
//! Why. A key updated again and again has one record in the latest CF, but RocksDB keeps
//! each overwrite as its own entry — in the memtable until it is flushed, then one per
//! level-0 file and per level until compactions merge them. A scan steps over all of them:
//! under sysbench's `oltp_read_write`, whose updates go mostly to 1% of the rows, a scan's
//! `Next` cost 2,600 instructions a row against 1,360 on a freshly loaded table, and the
//! range scans were three quarters of a transaction (BENCHMARKS.md, session 48). InnoDB
//! updates a row in place, and so does this layer: one entry per key, replaced by a write.
//! (TiKV's in-memory engine caches hot regions' versions for the same reason.)
//!
//! What. A *unit* is a key range made resident whole — a table: the engine's owner says
//! which range a scan's bounds fall in (`UnitOf`). Scans of a unit are counted; a unit
//! scanned `SCANS_TO_LOAD` times within `SCAN_WINDOW` is loaded by a background thread,
//! if it fits the memory budget. From then on a cursor whose bounds lie in a ready unit
//! reads the unit's map (`ResidentCursor`); RocksDB still holds everything and serves
//! point reads, other column families and every other range.
//!
//! Consistency. Writes reach the map after RocksDB has them (`apply`, called by the
//! engine's write once the batch is in), so a reader that finds a new record in the map
//! finds what the same batch wrote to other column families (the old version moved to the
//! write CF) in RocksDB. Two writes of one key never run at once (the MVCC latches and
//! locks order them). A resident cursor is live, not a snapshot: it sees each key's record
//! as of its creation or later. That is all an MVCC reader needs — a record committed at
//! or below its timestamp is in place before its read starts (the lock it checks first),
//! and a newer one sends it to the write CF for the version it wants — provided the reader
//! opens its write-CF cursor after it saw the newer record (`Cursor::live`: a cursor opened
//! earlier may predate the batch that moved the old version there), and except where a
//! record leaves: see `MvccStore::walk_keys` for the prune floor re-checked after a walk
//! (and `Engine::snapshot_cursor`, which a walk below the floor uses instead).
//!
//! Loading. A unit is registered (writes start to reach its map) before the loader opens
//! its RocksDB iterator, whose snapshot therefore holds every write that reached no map.
//! The loader keeps what it reads aside, in key order, while writes go to the map; a
//! deletion leaves a marker (`None`) there so that the loaded record it supersedes does not
//! come back. When the loader is done the map is built from its records in one pass (they
//! are sorted), what was written meanwhile goes over them (markers removing theirs), and
//! the unit is marked ready.
//!
//! Bounds. Bytes are counted per entry; when the units together pass the budget the
//! least-scanned one is dropped, and a unit a load could not fit waits (doubling, up to
//! `MAX_BACKOFF`) before it is tried again. A unit nobody scanned for `IDLE_SWEEPS` sweeps
//! is dropped too, with the same back-off: keeping it costs every write to it a map update,
//! and a unit scanned in bursts would be loaded again at every burst.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Mutex, RwLock};
use strata_common::storage_metrics::{RESIDENT_BYTES, RESIDENT_SCANS, RESIDENT_UNITS};
use strata_common::Result;
use strata_storage::Cursor;

/// The unit a cursor's bounds `[lower, upper)` fall in, as `[start, end)`, if any.
pub type UnitOf = fn(&[u8], &[u8]) -> Option<(Vec<u8>, Vec<u8>)>;

/// Scans of a unit within `SCAN_WINDOW` that have it loaded.
pub(crate) const SCANS_TO_LOAD: u32 = 16;
/// The window over which scans of a unit not yet resident are counted.
const SCAN_WINDOW: Duration = Duration::from_secs(10);
/// How often the loader thread looks for idle units.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(10);
/// Sweeps without a scan after which a unit is dropped.
const IDLE_SWEEPS: u32 = 6;
/// The first wait before a unit that did not fit is tried again, and the longest.
const FIRST_BACKOFF: Duration = Duration::from_secs(60);
const MAX_BACKOFF: Duration = Duration::from_secs(3600);
/// Bytes an entry costs besides its key and record (tree node share, two boxes' headers).
const ENTRY_OVERHEAD: usize = 64;
/// Records the loader copies out of RocksDB between two takes of the unit's lock.
pub(crate) const LOAD_CHUNK: usize = 256;
/// Entries a cursor copies out of the map at its first fill after a seek, and at most.
const FIRST_FILL: usize = 16;
const MAX_FILL: usize = 256;
/// Units (tables) whose scans are counted before they are resident; beyond this, the
/// counts start over.
const MAX_CANDIDATES: usize = 4096;

/// A key and its latest record, as the loader copies them.
pub(crate) type Record = (Box<[u8]>, Box<[u8]>);

fn entry_cost(key: &[u8], record: Option<&[u8]>) -> usize {
    key.len() + record.map_or(0, <[u8]>::len) + ENTRY_OVERHEAD
}

/// One resident (or loading) unit.
pub(crate) struct Unit {
    pub(crate) start: Box<[u8]>,
    pub(crate) end: Box<[u8]>,
    map: RwLock<Entries>,
    /// Set (under the map's write lock) when the load finished.
    ready: AtomicBool,
    /// Set when the unit is dropped: a load in progress stops.
    dropped: AtomicBool,
    /// Scans served since the last sweep.
    scans: AtomicU64,
    /// Sweeps in a row that found no scan.
    idle: AtomicU64,
}

/// A unit's records: `None` marks a key deleted while the unit loads.
struct Entries {
    map: BTreeMap<Box<[u8]>, Option<Box<[u8]>>>,
    /// What the loader read so far, in key order: the map is built from it in one pass when
    /// the load ends (inserting each record as it came searched the map for every key, more
    /// than half of a load's instructions).
    loaded: Vec<Record>,
    /// Of the map and `loaded`.
    bytes: usize,
}

impl Unit {
    fn new(start: Vec<u8>, end: Vec<u8>) -> Unit {
        Unit {
            start: start.into(),
            end: end.into(),
            map: RwLock::new(Entries { map: BTreeMap::new(), loaded: Vec::new(), bytes: 0 }),
            ready: AtomicBool::new(false),
            dropped: AtomicBool::new(false),
            scans: AtomicU64::new(0),
            idle: AtomicU64::new(0),
        }
    }

    fn holds(&self, key: &[u8]) -> bool {
        key >= &*self.start && key < &*self.end
    }

    pub(crate) fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Acquire)
    }

    /// Bytes its entries cost.
    pub(crate) fn bytes(&self) -> usize {
        self.map.read().bytes
    }
}

/// Scans of a unit that is not resident, counted toward loading it.
struct Candidate {
    end: Vec<u8>,
    window_start: Instant,
    scans: u32,
    /// Not loaded again before this (it did not fit, or was dropped for room).
    not_before: Option<Instant>,
    backoff: Duration,
}

/// The resident units of the latest CF and their budget.
pub(crate) struct Resident {
    unit_of: Option<UnitOf>,
    budget: usize,
    /// Registered units (loading or ready), sorted by start, disjoint.
    units: RwLock<Vec<Arc<Unit>>>,
    /// `units.len()`, read without the lock by every write.
    count: AtomicUsize,
    /// Bytes of every registered unit.
    bytes: AtomicUsize,
    candidates: Mutex<HashMap<Vec<u8>, Candidate>>,
    /// Units to load, taken by the loader thread.
    queue: Mutex<Vec<Arc<Unit>>>,
    wake: parking_lot::Condvar,
    pub(crate) closed: AtomicBool,
}

impl Resident {
    /// Resident units within `budget` bytes; none at all without `unit_of` or budget.
    pub(crate) fn new(unit_of: Option<UnitOf>, budget: usize) -> Resident {
        Resident {
            unit_of: unit_of.filter(|_| budget > 0),
            budget,
            units: RwLock::new(Vec::new()),
            count: AtomicUsize::new(0),
            bytes: AtomicUsize::new(0),
            candidates: Mutex::new(HashMap::new()),
            queue: Mutex::new(Vec::new()),
            wake: parking_lot::Condvar::new(),
            closed: AtomicBool::new(false),
        }
    }

    pub(crate) fn enabled(&self) -> bool {
        self.unit_of.is_some()
    }

    /// `key`'s record if a ready unit holds the key's range: `Some(None)` when the key has
    /// none (what RocksDB would answer, without looking in every level); None when no ready
    /// unit covers it.
    pub(crate) fn get(&self, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let units = self.units.read();
        let unit = find(&units, key).filter(|u| u.holds(key) && u.is_ready())?;
        let e = unit.map.read();
        Some(e.map.get(key).and_then(|r| r.as_deref()).map(<[u8]>::to_vec))
    }

    /// The ready unit `[lower, upper)` lies in, counting the scan; or, when there is none,
    /// counts the scan toward loading the unit it falls in.
    pub(crate) fn unit_for_scan(&self, lower: &[u8], upper: &[u8]) -> Option<Arc<Unit>> {
        let unit_of = self.unit_of?;
        match self.unit_holding(lower, upper) {
            Some(Some(u)) => {
                u.scans.fetch_add(1, Ordering::Relaxed);
                RESIDENT_SCANS.fetch_add(1, Ordering::Relaxed);
                return Some(u);
            }
            Some(None) => return None, // loading
            None => {}
        }
        let (start, end) = unit_of(lower, upper)?;
        self.note_scan(start, end);
        None
    }

    /// The ready unit `[lower, upper)` lies in, if there is one, for a scan that is not
    /// counted (`Engine::cursor_once`: it neither keeps a unit resident nor loads one).
    pub(crate) fn ready_unit(&self, lower: &[u8], upper: &[u8]) -> Option<Arc<Unit>> {
        self.unit_holding(lower, upper).flatten()
    }

    /// The unit holding `[lower, upper)`: `Some(Some(unit))` when it is ready, `Some(None)`
    /// while it loads, None when no unit holds the range.
    fn unit_holding(&self, lower: &[u8], upper: &[u8]) -> Option<Option<Arc<Unit>>> {
        if self.count.load(Ordering::Acquire) == 0 {
            return None;
        }
        let units = self.units.read();
        let u = find(&units, lower).filter(|u| upper <= &*u.end)?;
        Some(u.is_ready().then(|| u.clone()))
    }

    fn note_scan(&self, start: Vec<u8>, end: Vec<u8>) {
        let now = Instant::now();
        let mut cands = self.candidates.lock();
        if cands.len() >= MAX_CANDIDATES && !cands.contains_key(&start) {
            cands.retain(|_, c| c.not_before.is_some_and(|t| t > now));
            if cands.len() >= MAX_CANDIDATES {
                return;
            }
        }
        let c = cands.entry(start.clone()).or_insert_with(|| Candidate {
            end: end.clone(),
            window_start: now,
            scans: 0,
            not_before: None,
            backoff: FIRST_BACKOFF,
        });
        if c.not_before.is_some_and(|t| t > now) {
            return;
        }
        if now.duration_since(c.window_start) > SCAN_WINDOW {
            c.window_start = now;
            c.scans = 0;
        }
        c.scans += 1;
        if c.scans < SCANS_TO_LOAD {
            return;
        }
        c.scans = 0;
        // Registered before the loader's snapshot: see the module docs.
        let unit = Arc::new(Unit::new(start, c.end.clone()));
        drop(cands);
        {
            let mut units = self.units.write();
            let at = units.partition_point(|u| u.start < unit.start);
            let overlaps = units.get(at).is_some_and(|u| u.start < unit.end)
                || at.checked_sub(1).is_some_and(|p| units[p].end > unit.start);
            if overlaps {
                return;
            }
            units.insert(at, unit.clone());
            self.count.store(units.len(), Ordering::Release);
            RESIDENT_UNITS.store(units.len() as u64, Ordering::Relaxed);
        }
        std::sync::atomic::fence(Ordering::SeqCst);
        self.queue.lock().push(unit);
        self.wake.notify_one();
    }

    /// Stops the loader: it sees `closed` before it waits again, or is woken.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let _queue = self.queue.lock();
        self.wake.notify_all();
    }

    /// The next unit to load, waiting up to `wait`.
    pub(crate) fn next_to_load(&self, wait: Duration) -> Option<Arc<Unit>> {
        let mut q = self.queue.lock();
        if q.is_empty() && !self.closed.load(Ordering::Acquire) {
            self.wake.wait_for(&mut q, wait);
        }
        q.pop()
    }

    /// Keeps a chunk the loader read (after the chunks before it in key order). False if
    /// the unit was dropped meanwhile or the budget is used up (the unit is then dropped).
    pub(crate) fn load_chunk(&self, unit: &Arc<Unit>, chunk: Vec<Record>) -> bool {
        let total = {
            let mut e = unit.map.write();
            // Checked under the map's lock, which `drop_unit` takes to count what it frees.
            if unit.dropped.load(Ordering::Acquire) || self.closed.load(Ordering::Acquire) {
                return false;
            }
            let added: usize = chunk.iter().map(|(k, v)| entry_cost(k, Some(v))).sum();
            e.loaded.extend(chunk);
            e.bytes += added;
            self.bytes.fetch_add(added, Ordering::AcqRel) + added
        };
        RESIDENT_BYTES.store(total as u64, Ordering::Relaxed);
        if total > self.budget {
            self.drop_unit(unit, true);
            return false;
        }
        true
    }

    /// Ends a load: the map becomes the loaded records with what was written meanwhile
    /// over them (the deletion markers remove theirs and go), and the unit serves scans.
    pub(crate) fn finish_load(&self, unit: &Arc<Unit>) {
        let loaded = {
            let mut e = unit.map.write();
            if unit.dropped.load(Ordering::Acquire) {
                return;
            }
            std::mem::take(&mut e.loaded)
        };
        // One RocksDB iterator's keys, sorted and distinct: built in one pass, outside the
        // lock (writes meanwhile go to the map, applied over it below).
        let mut built: BTreeMap<Box<[u8]>, Option<Box<[u8]>>> = loaded.into_iter().map(|(k, v)| (k, Some(v))).collect();
        let mut e = unit.map.write();
        if unit.dropped.load(Ordering::Acquire) {
            return;
        }
        // One search per written key: it replaces or removes the loaded record, whose bytes
        // go (and a marker's with it).
        let mut freed = 0;
        for (k, written) in std::mem::take(&mut e.map) {
            match (built.entry(k), written) {
                (Entry::Occupied(mut slot), Some(v)) => {
                    freed += entry_cost(slot.key(), slot.get().as_deref());
                    slot.insert(Some(v));
                }
                (Entry::Occupied(slot), None) => {
                    freed += entry_cost(slot.key(), slot.get().as_deref()) + entry_cost(slot.key(), None);
                    slot.remove();
                }
                (Entry::Vacant(slot), Some(v)) => {
                    slot.insert(Some(v));
                }
                (Entry::Vacant(slot), None) => freed += entry_cost(slot.key(), None),
            }
        }
        e.map = built;
        e.bytes -= freed;
        self.bytes.fetch_sub(freed, Ordering::AcqRel);
        unit.ready.store(true, Ordering::Release);
        RESIDENT_UNITS.store(self.count.load(Ordering::Relaxed) as u64, Ordering::Relaxed);
    }

    /// Drops a unit that failed to load (an I/O error): tried again after a wait.
    pub(crate) fn abandon(&self, unit: &Arc<Unit>) {
        self.drop_unit(unit, true);
    }

    /// Unregisters `unit`; with `wait`, its table is not loaded again for a while.
    fn drop_unit(&self, unit: &Arc<Unit>, wait: bool) {
        {
            let mut units = self.units.write();
            let Some(at) = units.iter().position(|u| Arc::ptr_eq(u, unit)) else { return };
            units.remove(at);
            self.count.store(units.len(), Ordering::Release);
        }
        // The map stays as it is for the cursors still reading it (each key as of their
        // creation or later); it goes with the last of them.
        unit.dropped.store(true, Ordering::Release);
        let bytes = unit.bytes();
        let total = self.bytes.fetch_sub(bytes, Ordering::AcqRel).saturating_sub(bytes);
        RESIDENT_BYTES.store(total as u64, Ordering::Relaxed);
        RESIDENT_UNITS.store(self.count.load(Ordering::Relaxed) as u64, Ordering::Relaxed);
        if wait {
            let now = Instant::now();
            let mut cands = self.candidates.lock();
            if let Some(c) = cands.get_mut(&*unit.start) {
                c.not_before = Some(now + c.backoff);
                c.backoff = (c.backoff * 2).min(MAX_BACKOFF);
            } else {
                cands.insert(
                    unit.start.to_vec(),
                    Candidate {
                        end: unit.end.to_vec(),
                        window_start: now,
                        scans: 0,
                        not_before: Some(now + FIRST_BACKOFF),
                        backoff: FIRST_BACKOFF * 2,
                    },
                );
            }
        }
    }

    /// Drops every unit overlapping `[start, end)` (its keys changed without `apply`).
    pub(crate) fn drop_overlapping(&self, start: &[u8], end: &[u8]) {
        let hit: Vec<Arc<Unit>> =
            self.units.read().iter().filter(|u| &*u.start < end && &*u.end > start).cloned().collect();
        for u in hit {
            self.drop_unit(&u, false);
        }
    }

    /// Brings the registered units up to date with latest-CF writes RocksDB has applied:
    /// `(key, Some(record))` for a put, `(key, None)` for a deletion, in batch order.
    pub(crate) fn apply<'a>(&self, ops: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>) {
        if !self.enabled() {
            return;
        }
        // Against the registration's fence: a write RocksDB applied after the loader's
        // snapshot sees the unit registered.
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.count.load(Ordering::Acquire) == 0 {
            return;
        }
        let units = self.units.read();
        let mut total = self.bytes.load(Ordering::Acquire);
        let mut held: Option<(&Arc<Unit>, parking_lot::RwLockWriteGuard<'_, Entries>)> = None;
        for (key, record) in ops {
            let Some(unit) = find(&units, key).filter(|u| u.holds(key)) else { continue };
            let entries = match &mut held {
                Some((u, e)) if Arc::ptr_eq(u, unit) => e,
                _ => {
                    held = None;
                    &mut held.insert((unit, unit.map.write())).1
                }
            };
            // A deletion removes the entry of a ready unit and leaves a marker in a
            // loading one.
            let new: Option<Option<Box<[u8]>>> = match record {
                Some(r) => Some(Some(Box::from(r))),
                None if unit.is_ready() => None,
                None => Some(None),
            };
            let mut delta = 0isize;
            let old = match new {
                Some(value) => {
                    delta += entry_cost(key, value.as_deref()) as isize;
                    match entries.map.get_mut(key) {
                        Some(slot) => Some(std::mem::replace(slot, value)),
                        None => {
                            entries.map.insert(Box::from(key), value);
                            None
                        }
                    }
                }
                None => entries.map.remove(key),
            };
            if let Some(old) = old {
                delta -= entry_cost(key, old.as_deref()) as isize;
            }
            entries.bytes = entries.bytes.saturating_add_signed(delta);
            // Counted under the unit's lock, which `drop_unit` takes to count what it frees.
            total = self.add_bytes(delta);
        }
        drop(held);
        drop(units);
        RESIDENT_BYTES.store(total as u64, Ordering::Relaxed);
        if total > self.budget {
            self.make_room();
        }
    }

    /// Adds `delta` to the bytes of all units; returns the new total.
    fn add_bytes(&self, delta: isize) -> usize {
        if delta >= 0 {
            self.bytes.fetch_add(delta as usize, Ordering::AcqRel) + delta as usize
        } else {
            self.bytes.fetch_sub(delta.unsigned_abs(), Ordering::AcqRel).saturating_sub(delta.unsigned_abs())
        }
    }

    /// Drops the least-scanned units until the rest fit the budget.
    fn make_room(&self) {
        while self.bytes.load(Ordering::Acquire) > self.budget {
            let victim = self.units.read().iter().min_by_key(|u| u.scans.load(Ordering::Relaxed)).cloned();
            match victim {
                Some(u) => self.drop_unit(&u, true),
                None => return,
            }
        }
    }

    /// Drops the units nobody scanned for `IDLE_SWEEPS` sweeps; the loader thread calls
    /// this every `SWEEP_EVERY`.
    pub(crate) fn sweep(&self) {
        let units: Vec<Arc<Unit>> = self.units.read().clone();
        for u in units {
            if !u.is_ready() {
                continue;
            }
            if u.scans.swap(0, Ordering::Relaxed) > 0 {
                u.idle.store(0, Ordering::Relaxed);
            } else if u.idle.fetch_add(1, Ordering::Relaxed) + 1 >= u64::from(IDLE_SWEEPS) {
                // With the back-off: a table scanned in bursts (a background ANALYZE reads
                // dozens of sampled pieces) would otherwise be loaded again at each burst.
                self.drop_unit(&u, true);
            }
        }
    }

    /// Whether a cursor over `[lower, upper)` would read a ready unit (not counted as a scan).
    #[cfg(test)]
    pub(crate) fn serves(&self, lower: &[u8], upper: &[u8]) -> bool {
        let units = self.units.read();
        find(&units, lower).is_some_and(|u| upper <= &*u.end && u.is_ready())
    }

    /// Bytes all units hold and how many are registered.
    pub(crate) fn stats(&self) -> (usize, usize) {
        (self.bytes.load(Ordering::Acquire), self.count.load(Ordering::Acquire))
    }
}

/// The unit whose start is the greatest at or below `key`.
fn find<'u>(units: &'u [Arc<Unit>], key: &[u8]) -> Option<&'u Arc<Unit>> {
    let at = units.partition_point(|u| &*u.start <= key);
    at.checked_sub(1).map(|i| &units[i])
}

/// A cursor over a ready unit's map, between bounds within the unit. It copies entries out
/// a batch at a time (16 after a seek, growing to 256), so the map's lock is held only
/// while copying; it sees each key as of its creation or later (module docs).
pub(crate) struct ResidentCursor {
    unit: Arc<Unit>,
    lower: Box<[u8]>,
    upper: Box<[u8]>,
    /// Keys and records of the current batch, back to back; `ends` holds each entry's key
    /// end and record end in `buf`.
    buf: Vec<u8>,
    ends: Vec<(usize, usize)>,
    pos: usize,
    /// Whether the map may hold entries after the batch.
    more: bool,
    fill: usize,
    last: Vec<u8>,
}

impl ResidentCursor {
    pub(crate) fn new(unit: Arc<Unit>, lower: &[u8], upper: &[u8]) -> ResidentCursor {
        ResidentCursor {
            unit,
            lower: lower.into(),
            upper: upper.into(),
            buf: Vec::new(),
            ends: Vec::new(),
            pos: 0,
            more: false,
            fill: FIRST_FILL,
            last: Vec::new(),
        }
    }

    /// Copies the next batch, starting at `from` (inclusive) or after `self.last`.
    fn fill_from(&mut self, from: Option<&[u8]>) {
        self.buf.clear();
        self.ends.clear();
        self.pos = 0;
        self.more = false;
        let start = match from {
            Some(k) => Bound::Included(k),
            None => Bound::Excluded(self.last.as_slice()),
        };
        let empty = match start {
            Bound::Included(k) => k >= &*self.upper,
            Bound::Excluded(k) => k >= &*self.upper,
            Bound::Unbounded => false,
        };
        if !empty {
            let e = self.unit.map.read();
            let range = e.map.range::<[u8], _>((start, Bound::Excluded(&*self.upper)));
            for (k, v) in range {
                let Some(v) = v else { continue };
                if self.ends.len() == self.fill {
                    self.more = true;
                    break;
                }
                self.buf.extend_from_slice(k);
                let key_end = self.buf.len();
                self.buf.extend_from_slice(v);
                self.ends.push((key_end, self.buf.len()));
            }
        }
        if let Some(&(key_end, _)) = self.ends.last() {
            let key_start = self.ends.len().checked_sub(2).map_or(0, |i| self.ends[i].1);
            self.last.clear();
            self.last.extend_from_slice(&self.buf[key_start..key_end]);
        }
        self.fill = (self.fill * 4).min(MAX_FILL);
    }

    fn start_of(&self, i: usize) -> usize {
        i.checked_sub(1).map_or(0, |p| self.ends[p].1)
    }
}

impl Cursor for ResidentCursor {
    fn seek(&mut self, key: &[u8]) {
        self.fill = FIRST_FILL;
        let from = if key < &*self.lower { self.lower.clone() } else { key.into() };
        self.fill_from(Some(&from));
    }

    fn next(&mut self) {
        if self.pos < self.ends.len() {
            self.pos += 1;
        }
        if self.pos == self.ends.len() && self.more {
            self.fill_from(None);
        }
    }

    fn valid(&self) -> Result<bool> {
        Ok(self.pos < self.ends.len())
    }

    fn live(&self) -> bool {
        true
    }

    fn key(&self) -> &[u8] {
        match self.ends.get(self.pos) {
            Some(&(key_end, _)) => &self.buf[self.start_of(self.pos)..key_end],
            None => &[],
        }
    }

    fn value(&self) -> &[u8] {
        match self.ends.get(self.pos) {
            Some(&(key_end, end)) => &self.buf[key_end..end],
            None => &[],
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use strata_storage::{Cf, Cursor, Engine, WriteBatch};

    use crate::RocksEngine;

    /// Units of the tests: the keys sharing their first byte.
    fn first_byte(lower: &[u8], upper: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
        let &b = lower.first()?;
        let end = vec![b.checked_add(1)?];
        (upper <= end.as_slice()).then(|| (vec![b], end))
    }

    fn engine(dir: &std::path::Path, budget: usize) -> RocksEngine {
        RocksEngine::open(dir).expect("open").with_resident_budget(first_byte, budget).expect("resident")
    }

    fn key(i: u32) -> Vec<u8> {
        format!("a{i:06}").into_bytes()
    }

    /// The loader runs at the lowest CPU priority: its thread's nice value (field 19 of
    /// /proc/self/task/TID/stat, after the parenthesised name) is 19.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_loader_thread_runs_at_the_lowest_cpu_priority() {
        let dir = tempfile::tempdir().expect("tempdir");
        let _e = engine(dir.path(), 1 << 20);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut nices = Vec::new();
            for t in std::fs::read_dir("/proc/self/task").expect("tasks").flatten() {
                let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
                if comm.trim() != "resident-load" {
                    continue;
                }
                let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
                let after_name = &stat[stat.rfind(')').map_or(0, |i| i + 2)..];
                // Fields from the state (3rd) on; nice is the 19th field.
                nices.push(after_name.split(' ').nth(19 - 3).and_then(|f| f.parse::<i32>().ok()));
            }
            if nices.contains(&Some(19)) {
                break;
            }
            assert!(Instant::now() < deadline, "no resident-load thread at nice 19: {nices:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    type Pair = (Vec<u8>, Vec<u8>);

    /// Every entry of `[lower, upper)` through `c`.
    fn drain(mut c: Box<dyn Cursor + '_>, lower: &[u8]) -> Vec<Pair> {
        let mut out = Vec::new();
        c.seek(lower);
        while c.valid().expect("valid") {
            out.push((c.key().to_vec(), c.value().to_vec()));
            c.next();
        }
        out
    }

    /// The range through the resident map (asserted) and through RocksDB.
    fn both(e: &RocksEngine, lower: &[u8], upper: &[u8]) -> (Vec<Pair>, Vec<Pair>) {
        assert!(e.resident.serves(lower, upper), "the unit is resident");
        let resident = drain(e.cursor(Cf::Latest, lower, upper).expect("cursor"), lower);
        // A limited cursor always reads RocksDB.
        let rocks = drain(e.cursor_limited(Cf::Latest, lower, upper, u64::MAX).expect("cursor"), lower);
        (resident, rocks)
    }

    /// Scans the unit until it is loaded.
    fn load(e: &RocksEngine, lower: &[u8], upper: &[u8]) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !e.resident.serves(lower, upper) {
            assert!(Instant::now() < deadline, "the unit was not loaded");
            drop(e.cursor(Cf::Latest, lower, upper).expect("cursor"));
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A tiny xorshift for repeatable random writes.
    fn rng(state: &mut u64) -> u64 {
        *state ^= *state << 13;
        *state ^= *state >> 7;
        *state ^= *state << 17;
        *state
    }

    fn random_batch(state: &mut u64, n: usize, keys: u32) -> WriteBatch {
        let mut b = WriteBatch::default();
        for _ in 0..n {
            let k = key((rng(state) % u64::from(keys)) as u32);
            if rng(state).is_multiple_of(4) {
                b.delete(Cf::Latest, k);
            } else {
                let len = (rng(state) % 300) as usize;
                b.put(Cf::Latest, k, vec![(rng(state) % 251) as u8; len]);
            }
        }
        b
    }

    #[test]
    fn a_resident_unit_reads_what_rocksdb_holds_through_writes_during_and_after_its_load() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = engine(dir.path(), 1 << 30);
        let mut state = 0x2545_f491_4f6c_dd1d;
        for _ in 0..40 {
            e.write(random_batch(&mut state, 500, 20_000), false).expect("write");
        }
        // Another unit and a key outside any scanned unit, which must stay out of the map.
        let mut b = WriteBatch::default();
        b.put(Cf::Latest, b"b1".to_vec(), b"other".to_vec());
        b.put(Cf::Write, key(7), b"write cf".to_vec());
        e.write(b, false).expect("write");
        let (lower, upper) = (b"a".as_slice(), b"b".as_slice());
        // Writers keep going while the unit loads.
        std::thread::scope(|s| {
            let writer = s.spawn(|| {
                let mut state = 0x9e37_79b9_7f4a_7c15;
                let deadline = Instant::now() + Duration::from_secs(30);
                while !e.resident.serves(lower, upper) && Instant::now() < deadline {
                    e.write(random_batch(&mut state, 50, 20_000), false).expect("write");
                }
                for _ in 0..20 {
                    e.write(random_batch(&mut state, 50, 20_000), false).expect("write");
                }
            });
            load(&e, lower, upper);
            writer.join().expect("writer");
        });
        let (resident, rocks) = both(&e, lower, upper);
        assert!(rocks.len() > 10_000, "{} keys", rocks.len());
        assert_eq!(resident.len(), rocks.len());
        assert!(resident == rocks, "the resident map differs from RocksDB");
        // Sub-ranges and seeks inside, and the bytes counted.
        let (r, k) = both(&e, &key(5_000), &key(5_100));
        assert_eq!(r, k);
        let (bytes, units) = e.resident_stats();
        assert_eq!(units, 1);
        let held: usize = rocks.iter().map(|(k, v)| k.len() + v.len() + super::ENTRY_OVERHEAD).sum();
        assert_eq!(bytes, held, "bytes counted per entry");
        // After more writes (deletes included), still the same.
        for _ in 0..20 {
            e.write(random_batch(&mut state, 200, 20_000), false).expect("write");
        }
        let (resident, rocks) = both(&e, lower, upper);
        assert!(resident == rocks, "the resident map differs from RocksDB after writes");
        // Point reads (present and absent keys) answer what RocksDB holds.
        let h = e.db.cf_handle(Cf::Latest.name()).expect("latest");
        let keys: Vec<Vec<u8>> = (0..3_000).map(|i| key(i * 7)).collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let many = e.multi_get(Cf::Latest, &refs).expect("multi_get");
        for (k, got) in keys.iter().zip(many) {
            let want = e.db.get_cf(h, k).expect("rocksdb get");
            assert_eq!(got, want, "multi_get of {k:?}");
            assert_eq!(e.get(Cf::Latest, k).expect("get"), want, "get of {k:?}");
        }
    }

    #[test]
    fn a_cursor_steps_across_fills_and_seeks_anywhere() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = engine(dir.path(), 1 << 30);
        let mut b = WriteBatch::default();
        for i in (0..2_000).step_by(2) {
            b.put(Cf::Latest, key(i), i.to_string().into_bytes());
        }
        e.write(b, false).expect("write");
        load(&e, b"a", b"b");
        let snapshot = e.snapshot_cursor(Cf::Latest, &key(100), &key(1_501)).expect("cursor");
        assert!(!snapshot.live(), "a snapshot cursor reads RocksDB");
        let mut c = e.cursor(Cf::Latest, &key(100), &key(1_501)).expect("cursor");
        assert!(c.live());
        c.seek(&key(0)); // before the lower bound: starts there
        assert_eq!(c.key(), key(100).as_slice());
        c.seek(&key(101)); // between keys
        assert_eq!(c.key(), key(102).as_slice());
        assert_eq!(c.value(), b"102");
        let mut n = 0;
        while c.valid().expect("valid") {
            n += 1;
            c.next();
        }
        assert_eq!(n, (1_500 - 102) / 2 + 1, "every key up to the bound, across fills");
        c.next(); // past the end stays there
        assert!(!c.valid().expect("valid"));
        c.seek(&key(1_501));
        assert!(!c.valid().expect("valid"));
        c.seek(&key(1_500));
        assert_eq!(c.key(), key(1_500).as_slice());
    }

    #[test]
    fn scans_made_once_neither_load_a_unit_nor_keep_it_but_read_it_when_resident() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = engine(dir.path(), 1 << 30);
        let mut b = WriteBatch::default();
        for i in 0..1_000 {
            b.put(Cf::Latest, key(i), i.to_string().into_bytes());
        }
        e.write(b, false).expect("write");
        // Many more once-scans than load a unit through `cursor`, each read whole.
        for _ in 0..super::SCANS_TO_LOAD * 4 {
            let c = e.cursor_once(Cf::Latest, b"a", b"b").expect("cursor");
            assert!(!c.live(), "a once-scan of a unit not resident reads RocksDB");
            assert_eq!(drain(c, b"a").len(), 1_000);
        }
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(e.resident_stats().1, 0, "once-scans loaded a unit");
        assert!(!e.resident.serves(b"a", b"b"));
        // Once the workload's scans made it resident, a once-scan reads the map (live)
        // without counting as one of its scans.
        load(&e, b"a", b"b");
        let unit = e.resident.ready_unit(b"a", b"b").expect("ready");
        let before = unit.scans.load(std::sync::atomic::Ordering::Relaxed);
        let c = e.cursor_once(Cf::Latest, &key(10), &key(20)).expect("cursor");
        assert!(c.live(), "a once-scan of a resident unit reads its map");
        assert_eq!(drain(c, &key(10)).len(), 10);
        assert_eq!(unit.scans.load(std::sync::atomic::Ordering::Relaxed), before, "a once-scan was counted");
    }

    #[test]
    fn a_unit_over_the_budget_is_not_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = engine(dir.path(), 64 << 10);
        let mut b = WriteBatch::default();
        for i in 0..5_000 {
            b.put(Cf::Latest, key(i), vec![7; 100]);
        }
        e.write(b, false).expect("write");
        for _ in 0..super::SCANS_TO_LOAD * 2 {
            drop(e.cursor(Cf::Latest, b"a", b"b").expect("cursor"));
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        // The load starts, runs past the budget and gives up.
        while e.resident_stats().1 > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(e.resident_stats(), (0, 0));
        assert!(!e.resident.serves(b"a", b"b"));
        // Scans keep working, from RocksDB.
        assert_eq!(drain(e.cursor(Cf::Latest, b"a", b"b").expect("cursor"), b"a").len(), 5_000);
    }

    #[test]
    fn clearing_a_range_or_ingesting_into_it_keeps_scans_right() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = engine(dir.path(), 1 << 30);
        let mut b = WriteBatch::default();
        for i in 0..100 {
            b.put(Cf::Latest, key(i), b"v".to_vec());
        }
        e.write(b, false).expect("write");
        load(&e, b"a", b"b");
        // An ingested file's puts reach the map.
        let mut b = WriteBatch::default();
        for i in 1_000..3_000 {
            b.put(Cf::Latest, key(i), b"ingested".to_vec());
        }
        assert_eq!(e.ingest(b).expect("ingest"), None, "taken as a file");
        let (r, k) = both(&e, b"a", b"b");
        assert_eq!(k.len(), 2_100);
        assert!(r == k);
        // A cleared range drops the unit; scans read RocksDB, which has nothing left.
        e.clear_range(Cf::Latest, b"a", b"b").expect("clear");
        assert!(!e.resident.serves(b"a", b"b"));
        assert!(drain(e.cursor(Cf::Latest, b"a", b"b").expect("cursor"), b"a").is_empty());
    }

    #[test]
    fn writes_made_while_a_unit_loads_win_over_the_loaders_older_snapshot() {
        use std::sync::Arc;

        use super::{Resident, ResidentCursor};
        let r = Resident::new(Some(first_byte), 1 << 20);
        for _ in 0..super::SCANS_TO_LOAD {
            assert!(r.unit_for_scan(b"a", b"b").is_none());
        }
        let unit = r.next_to_load(Duration::ZERO).expect("queued for loading");
        assert!(!unit.is_ready());
        // Written after the loader's snapshot: x deleted, y replaced (and one outside).
        let ops: [(&[u8], Option<&[u8]>); 3] = [(b"ax", None), (b"ay", Some(b"new")), (b"b0", Some(b"out"))];
        r.apply(ops);
        // The snapshot still has the old x and y, and z.
        let old = |k: &[u8], v: &[u8]| (Box::from(k), Box::from(v));
        assert!(r.load_chunk(&unit, vec![old(b"ax", b"old"), old(b"ay", b"old"), old(b"az", b"z")]));
        assert!(!r.serves(b"a", b"b"), "not before the load ends");
        r.finish_load(&unit);
        assert!(r.serves(b"a", b"b"));
        let mut c = ResidentCursor::new(Arc::clone(&unit), b"a", b"b");
        c.seek(b"a");
        let mut got = Vec::new();
        while c.valid().expect("valid") {
            got.push((c.key().to_vec(), c.value().to_vec()));
            c.next();
        }
        assert_eq!(got, vec![(b"ay".to_vec(), b"new".to_vec()), (b"az".to_vec(), b"z".to_vec())]);
        // The marker went with the load; the bytes are the two entries'.
        assert_eq!(r.stats(), (2 * 2 + 3 + 1 + 2 * super::ENTRY_OVERHEAD, 1));
        // Once ready, a deletion removes the entry.
        r.apply([(b"ay".as_slice(), None)]);
        assert_eq!(r.stats().0, 2 + 1 + super::ENTRY_OVERHEAD);
    }
}
