//! `Transaction`: one SQL transaction's view of the store.
//!
//! Writes go to a statement buffer first and move into the transaction buffer when the
//! statement succeeds, so a failed statement leaves no trace (statement atomicity). Reads
//! overlay both buffers on the snapshot.
//!
//! Pessimistic mode locks before it reads: `lock_and_get` takes the keys' pessimistic locks
//! at a fresh `for_update_ts` (retrying with a newer one on a write conflict, which cannot
//! loop for long because the locks are taken all at once) and then reads the latest
//! committed values, which nobody else can now change. This is MySQL's "current read" for
//! UPDATE, DELETE and SELECT ... FOR UPDATE. Plain SELECTs read the snapshot: `start_ts`
//! under REPEATABLE READ, a fresh timestamp per statement under READ COMMITTED.
//!
//! READ COMMITTED with `rc_check_ts` (TiDB's `tidb_rc_read_check_ts`, asked for per
//! statement by the SQL layer) skips that timestamp: the statement reads at the newest
//! timestamp the transaction already holds, with checked reads that fail with a write
//! conflict on any key committed after it. What such a statement reads is the snapshot at
//! that timestamp *and* nothing it read has changed since, so it is what a fresh timestamp
//! would have shown. On a conflict the statement is run again (by the SQL layer, unless
//! rows already went to the client), and its next start takes a fresh timestamp.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use strata_common::{Error, Result, Timestamp};
use strata_kv::{Client, LockMode, Mutation, Oracle, PessimisticLockRequest, PrewriteRequest, Seen};

use crate::resolver::resolve_lock;

/// Maps and sets of keys on the statement path, hashed with foldhash (std's SipHash cost
/// ~860 instructions per insert of a TPC-C key).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
type HashSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// Transaction isolation levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isolation {
    /// Snapshot isolation: every read sees the snapshot at the start timestamp.
    RepeatableRead,
    /// Each statement reads the latest committed data when it starts.
    ReadCommitted,
}

/// How a transaction behaves.
#[derive(Clone, Copy, Debug)]
pub struct TxnOptions {
    /// Optimistic or pessimistic.
    pub mode: LockMode,
    /// The isolation level.
    pub isolation: Isolation,
    /// `innodb_lock_wait_timeout`, in milliseconds.
    pub lock_wait_timeout_ms: u64,
    /// Commit in one phase where the store can (`tidb_enable_1pc`).
    pub one_pc: bool,
}

impl Default for TxnOptions {
    fn default() -> TxnOptions {
        TxnOptions {
            mode: LockMode::Pessimistic,
            isolation: Isolation::RepeatableRead,
            lock_wait_timeout_ms: 50_000,
            one_pc: true,
        }
    }
}

/// A lock's time to live beyond the transaction's age when it is written: a lock whose
/// transaction is older than its TTL is judged dead by whoever runs into it. Prewrite locks
/// live through the commit, pessimistic ones through the whole transaction, and a
/// heartbeat renews the primary's every half TTL while the transaction lives (TiDB's
/// ManagedLockTTL), so only a transaction that stopped beating is ever rolled back.
const PREWRITE_TTL_MS: u64 = 3_000;
const PESSIMISTIC_TTL_MS: u64 = 20_000;
const MAX_RESOLVE_ATTEMPTS: u32 = 2_000;
/// At most this many bytes of locked keys' values are kept for later locking reads (past
/// it, those reads go to the store as before).
const LOCKED_VALUES_MAX: usize = 1 << 20;
/// Only lock commands of at most this many keys keep their values (`keep_locked_value`).
const KEEP_LOCKED_VALUES_KEYS: usize = 64;

/// A locking scan batch of at most this many entries keeps what the store read of them
/// for their lock request (`Transaction::seen`); a larger one's locks read again (scan
/// batches start at 256 entries and double: a statement locking thousands of rows keeps
/// its first few batches).
const SEEN_MAX: usize = 4096;
/// ... and of at most this many bytes of keys and records (wide rows keep fewer).
const SEEN_BYTES_MAX: usize = 1 << 20;

/// How a scan reads the store (`Transaction::scan_at`).
#[derive(Clone, Copy)]
enum ScanRead {
    /// `Client::scan`.
    Plain,
    /// `Client::scan_checked` (a READ COMMITTED statement at a timestamp it did not fetch).
    Checked,
    /// `Client::scan_once`.
    Once,
}

/// One transaction.
pub struct Transaction {
    client: Arc<dyn Client>,
    oracle: Arc<dyn Oracle>,
    opts: TxnOptions,
    start_ts: Timestamp,
    read_ts: Timestamp,
    /// Committed statements' writes: `Some` = put, `None` = delete.
    buffer: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// The running statement's writes.
    stmt: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// Keys this transaction holds pessimistic locks on (or, optimistic, wants Lock records).
    locked: BTreeSet<Vec<u8>>,
    /// The latest committed values the pessimistic lock commands returned, by key. While
    /// the lock is held nobody else can commit the key, so a later locking read of it (an
    /// UPDATE after its SELECT ... FOR UPDATE) is answered here instead of by the store,
    /// as TiDB keeps the values its lock requests return. Bounded by `LOCKED_VALUES_MAX`.
    locked_values: HashMap<Vec<u8>, Option<Vec<u8>>>,
    /// Bytes of keys and values in `locked_values`.
    locked_values_bytes: usize,
    /// Keys whose writes the prewrite checks have no value (`Mutation::Insert`), written
    /// by a transaction of one statement instead of locking and reading them first
    /// (`presume_absent`).
    presumed: HashSet<Vec<u8>>,
    /// Whether the transaction is one statement, committed as soon as it ends (autocommit).
    single_statement: bool,
    primary: Option<Vec<u8>>,
    /// The running statement's current-read timestamp (pessimistic locking scans), taken
    /// at its first locking scan.
    current_ts: Option<Timestamp>,
    /// When it began: lock TTLs count from `start_ts`, so they add the age.
    began: Instant,
    /// Base TTL of pessimistic locks and of the heartbeat's renewals.
    lock_ttl_ms: u64,
    /// Renews the primary lock's TTL while the transaction lives; stops when dropped.
    heartbeat: Option<Heartbeat>,
    /// Time spent in pessimistic lock requests so far (waits for others' locks included).
    lock_time: Duration,
    /// The newest timestamp this transaction has fetched (what an RC check-ts read uses).
    last_ts: Timestamp,
    /// Whether the next READ COMMITTED statement may read at `last_ts` with checks.
    rc_check_ts: bool,
    /// Whether the running statement reads at a reused timestamp, with checked reads.
    checking: bool,
    /// What the last locking scan's store read of each row it returned (`Client::
    /// scan_for_lock`), at `current_ts`, handed back with the rows' lock request so the
    /// store need not read them again. One scan batch's worth (`SEEN_MAX`): each locking
    /// scan replaces it, and a lock request takes what it uses.
    seen: HashMap<Vec<u8>, Vec<u8>>,
    /// A checked read found a newer version: the next statement start fetches a timestamp.
    stale_conflict: AtomicBool,
}

/// The keys a prewrite request writes.
fn keys_of(req: &PrewriteRequest) -> Vec<Vec<u8>> {
    req.mutations.iter().map(|m| m.key().to_vec()).collect()
}

/// Milliseconds since `began`, plus `base`.
fn age_plus(began: Instant, base: u64) -> u64 {
    u64::try_from(began.elapsed().as_millis()).unwrap_or(u64::MAX).saturating_add(base)
}

/// The task renewing a transaction's primary lock; aborted when the transaction ends.
struct Heartbeat(tokio::task::AbortHandle);

impl Drop for Heartbeat {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A point a transaction can roll back to (SAVEPOINT): the writes of its statements so
/// far. Locks taken after it are kept, as InnoDB keeps them.
#[derive(Clone, Debug)]
pub struct Savepoint(BTreeMap<Vec<u8>, Option<Vec<u8>>>);

impl Transaction {
    /// The writes so far, to roll back to later.
    pub fn savepoint(&self) -> Savepoint {
        Savepoint(self.buffer.clone())
    }

    /// Drops every write made after `sp`.
    pub fn rollback_to(&mut self, sp: &Savepoint) {
        self.buffer = sp.0.clone();
        self.stmt.clear();
    }

    /// Begins a transaction at a fresh timestamp.
    pub async fn begin(client: Arc<dyn Client>, oracle: Arc<dyn Oracle>, opts: TxnOptions) -> Result<Transaction> {
        let start_ts = crate::metrics::timestamp(oracle.as_ref()).await?;
        Ok(Transaction {
            client,
            oracle,
            opts,
            start_ts,
            read_ts: start_ts,
            buffer: BTreeMap::new(),
            stmt: BTreeMap::new(),
            locked: BTreeSet::new(),
            locked_values: HashMap::default(),
            locked_values_bytes: 0,
            presumed: HashSet::default(),
            single_statement: false,
            primary: None,
            current_ts: None,
            began: Instant::now(),
            lock_ttl_ms: PESSIMISTIC_TTL_MS,
            heartbeat: None,
            lock_time: Duration::ZERO,
            last_ts: start_ts,
            rc_check_ts: false,
            checking: false,
            seen: HashMap::default(),
            stale_conflict: AtomicBool::new(false),
        })
    }

    /// Sets the base TTL of this transaction's pessimistic locks and heartbeat renewals
    /// (20 s by default; renewals every half TTL).
    pub fn with_lock_ttl(mut self, ms: u64) -> Transaction {
        self.lock_ttl_ms = ms.max(1);
        self
    }

    /// A TTL for a lock written now: the transaction's age plus `base`.
    fn ttl(&self, base: u64) -> u64 {
        age_plus(self.began, base)
    }

    /// Starts renewing `primary`'s lock, once per transaction.
    fn start_heartbeat(&mut self, primary: &[u8]) {
        if self.heartbeat.is_some() {
            return;
        }
        let (client, primary, start_ts) = (self.client.clone(), primary.to_vec(), self.start_ts);
        let (began, base) = (self.began, self.lock_ttl_ms);
        let every = Duration::from_millis((base / 2).max(1));
        let task = tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                let ttl = age_plus(began, base);
                match client.txn_heart_beat(&primary, start_ts, ttl).await {
                    Ok(true) => {}
                    // Gone (finished, or rolled back by someone else) or the store failed:
                    // commit will find out.
                    Ok(false) | Err(_) => return,
                }
            }
        });
        self.heartbeat = Some(Heartbeat(task.abort_handle()));
    }

    /// Time this transaction has spent in pessimistic lock requests, waits for other
    /// transactions' locks included (the slow log's Lock_time).
    pub fn lock_time(&self) -> Duration {
        self.lock_time
    }

    /// The start timestamp (the transaction's identity).
    pub fn start_ts(&self) -> Timestamp {
        self.start_ts
    }

    /// The timestamp plain reads see (per statement under READ COMMITTED).
    pub fn read_ts(&self) -> Timestamp {
        self.read_ts
    }

    /// Waits out (resolving as a read would) every lock in `[start, end)` that blocks a read
    /// at the snapshot. After it returns, every change committed at or below the read
    /// timestamp has reached the store's change feed (`kv::ChangeSink`), so a copy fed by
    /// it can answer for the snapshot.
    pub async fn check_locks(&self, start: &[u8], end: &[u8]) -> Result<()> {
        self.resolving(|| self.client.check_locks(start, end, self.read_ts)).await
    }

    /// Runs a read until it meets no lock: each lock it fails on is resolved (or waited
    /// out) and the read runs again.
    async fn resolving<T, F, Fut>(&self, mut read: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut attempt = 0;
        loop {
            match read().await {
                Err(Error::KeyLocked(lock)) if attempt < MAX_RESOLVE_ATTEMPTS => {
                    let started = std::time::Instant::now();
                    let resolved = resolve_lock(self.client.as_ref(), self.oracle.as_ref(), &lock, attempt).await;
                    crate::metrics::METRICS.read_lock_wait.observe(started.elapsed());
                    resolved?;
                    attempt += 1;
                }
                other => return other,
            }
        }
    }

    /// The keys of `[start, end)` whose value at this snapshot was committed after `after`
    /// (at most `limit`, in key order), with that value (`None`: deleted) — resolving the
    /// locks in its way as a scan does. Committed changes only: the transaction's own
    /// writes are not among them.
    pub async fn scan_changes(
        &self,
        start: &[u8],
        end: &[u8],
        after: Timestamp,
        limit: usize,
    ) -> Result<Vec<strata_kv::CommittedChange>> {
        self.resolving(|| self.client.scan_changes(start, end, after, self.read_ts, limit)).await
    }

    /// This transaction's own writes in `[start, end)` not committed yet, in key order
    /// (`None` = deleted): what a read of a copy of the store overlays.
    pub fn own_writes(&self, start: &[u8], end: &[u8]) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        if self.buffer.is_empty() && self.stmt.is_empty() {
            return Vec::new();
        }
        let range = (Bound::Included(start.to_vec()), Bound::Excluded(end.to_vec()));
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> =
            self.buffer.range(range.clone()).map(|(k, v)| (k.clone(), v.clone())).collect();
        for (k, v) in self.stmt.range(range) {
            merged.insert(k.clone(), v.clone());
        }
        merged.into_iter().collect()
    }

    /// The options it runs with.
    pub fn options(&self) -> TxnOptions {
        self.opts
    }

    /// Whether the transaction has written or locked anything.
    pub fn is_dirty(&self) -> bool {
        !self.buffer.is_empty() || !self.stmt.is_empty() || !self.locked.is_empty()
    }

    /// Keys written so far (committed statements and the running one).
    pub fn written_keys(&self) -> impl Iterator<Item = &[u8]> {
        self.buffer.keys().chain(self.stmt.keys()).map(|k| k.as_slice())
    }

    /// Marks the start of a statement (READ COMMITTED takes a new read timestamp, unless
    /// [`set_rc_check_ts`](Self::set_rc_check_ts) allowed the statement to read at the
    /// newest one the transaction holds, with checks).
    pub async fn start_statement(&mut self) -> Result<()> {
        self.stmt.clear();
        self.current_ts = None;
        self.seen.clear();
        self.checking = false;
        if self.opts.isolation == Isolation::ReadCommitted {
            let conflicted = self.stale_conflict.swap(false, Ordering::Relaxed);
            if self.rc_check_ts && !conflicted {
                self.read_ts = self.last_ts;
                self.checking = true;
            } else {
                self.read_ts = crate::metrics::timestamp(self.oracle.as_ref()).await?;
                self.last_ts = self.last_ts.max(self.read_ts);
            }
        }
        Ok(())
    }

    /// Whether the next statement (a SELECT) may read at the newest timestamp this
    /// transaction holds instead of a fresh one, under READ COMMITTED (see the module
    /// docs).
    pub fn set_rc_check_ts(&mut self, on: bool) {
        self.rc_check_ts = on;
    }

    /// Whether the running statement failed on a checked read's newer version: running it
    /// again reads at a fresh timestamp.
    pub fn stale_read_conflicted(&self) -> bool {
        self.stale_conflict.load(Ordering::Relaxed)
    }

    /// The timestamp a reader outside this transaction's own reads (a columnar replica)
    /// must read at, or, when the statement reads at a reused timestamp with checks that
    /// reader cannot make, the write conflict that makes the statement run again at a
    /// fresh one.
    pub fn snapshot_ts(&self) -> Result<Timestamp> {
        if self.checking {
            self.stale_conflict.store(true, Ordering::Relaxed);
            return Err(Error::WriteConflict { start_ts: self.read_ts, conflict_ts: self.read_ts, key: Vec::new() });
        }
        Ok(self.read_ts)
    }

    /// Notes a checked read's write conflict (see `stale_read_conflicted`).
    fn note_checked<T>(&self, r: Result<T>) -> Result<T> {
        if matches!(r, Err(Error::WriteConflict { .. })) {
            self.stale_conflict.store(true, Ordering::Relaxed);
        }
        r
    }

    /// Ends a statement: keeps its writes if it succeeded, drops them otherwise.
    pub fn end_statement(&mut self, ok: bool) {
        let stmt = std::mem::take(&mut self.stmt);
        if ok {
            if self.buffer.is_empty() {
                self.buffer = stmt; // the first statement's writes: no merge needed
            } else {
                self.buffer.extend(stmt);
            }
        }
    }

    fn buffered(&self, key: &[u8]) -> Option<&Option<Vec<u8>>> {
        self.stmt.get(key).or_else(|| self.buffer.get(key))
    }

    /// Marks the transaction as one statement, committed as soon as it ends (autocommit).
    pub fn set_single_statement(&mut self, single: bool) {
        self.single_statement = single;
    }

    /// Presumes that `keys` have no value if the transaction is one pessimistic statement
    /// (`may_presume_absent`; otherwise nothing is done): instead of locking and reading them
    /// now, the commit, which follows the statement at once, writes them as
    /// `Mutation::Insert`, and its prewrite fails with `Error::AlreadyExists` if one has a
    /// value (or waits for the lock another transaction holds on it, as a lock command
    /// would). An INSERT's new keys.
    pub fn presume_absent(&mut self, keys: impl IntoIterator<Item = Vec<u8>>) {
        if self.may_presume_absent() {
            self.presumed.extend(keys);
        }
    }

    /// Whether `presume_absent` would take keys: the transaction is one pessimistic
    /// statement.
    pub fn may_presume_absent(&self) -> bool {
        self.single_statement && self.opts.mode == LockMode::Pessimistic
    }

    /// This transaction's own write of `key`, if it wrote it (`Some(None)`: deleted).
    pub fn own_write(&self, key: &[u8]) -> Option<Option<&[u8]>> {
        self.buffered(key).map(|v| v.as_deref())
    }

    async fn get_at(&self, keys: &[Vec<u8>], ts: Timestamp, checked: bool) -> Result<Vec<Option<Vec<u8>>>> {
        if checked {
            let r = self.resolving(|| self.client.batch_get_checked(keys, ts)).await;
            return self.note_checked(r);
        }
        self.resolving(|| self.client.batch_get(keys, ts)).await
    }

    /// Reads keys at the snapshot, seeing this transaction's own writes.
    pub async fn batch_get(&self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        self.get_overlaid(keys, self.read_ts, HashMap::default(), self.checking).await
    }

    /// Reads keys at `ts`, with this transaction's own writes taking precedence; keys in
    /// `known` (committed values already read at `ts`) are not read again; `checked`
    /// reads fail on a version committed after `ts`.
    async fn get_overlaid(
        &self,
        keys: &[Vec<u8>],
        ts: Timestamp,
        known: HashMap<Vec<u8>, Option<Vec<u8>>>,
        checked: bool,
    ) -> Result<Vec<Option<Vec<u8>>>> {
        let mut out = Vec::with_capacity(keys.len());
        // Keys to read, and where their values go.
        let (mut missing, mut slots) = (Vec::new(), Vec::new());
        for k in keys {
            match self.buffered(k) {
                Some(v) => out.push(v.clone()),
                None => match known.get(k) {
                    Some(v) => out.push(v.clone()),
                    None => {
                        missing.push(k.clone());
                        slots.push(out.len());
                        out.push(None);
                    }
                },
            }
        }
        if !missing.is_empty() {
            for (slot, v) in slots.into_iter().zip(self.get_at(&missing, ts, checked).await?) {
                out[slot] = v;
            }
        }
        Ok(out)
    }

    /// Reads one key at the snapshot.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.buffered(key) {
            return Ok(v.clone());
        }
        let keys = [key.to_vec()];
        Ok(self.get_at(&keys, self.read_ts, self.checking).await?.pop().flatten())
    }

    /// Reads `[start, end)` at the snapshot with this transaction's writes applied, up to
    /// `limit` entries.
    pub async fn scan(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let read = if self.checking { ScanRead::Checked } else { ScanRead::Plain };
        self.scan_at(start, end, limit, self.read_ts, read).await
    }

    /// [`scan`](Self::scan) of a range the server's own work reads once, end to end (an
    /// index backfill, ANALYZE, a table check or copy; `Client::scan_once`): a table it
    /// reads does not become resident in memory for it.
    pub async fn scan_once(&self, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let read = if self.checking { ScanRead::Checked } else { ScanRead::Once };
        self.scan_at(start, end, limit, self.read_ts, read).await
    }

    /// The candidates of a locking scan (UPDATE, DELETE, SELECT ... FOR UPDATE). Pessimistic
    /// transactions read what they write as InnoDB does: the latest committed rows (at a
    /// fresh timestamp, one per statement), so a matching row committed after the
    /// transaction began is found, locked and changed rather than skipped. Optimistic ones
    /// read their snapshot (commit fails if a row read changed).
    pub async fn scan_for_update(&mut self, start: &[u8], end: &[u8], limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        if self.opts.mode == LockMode::Optimistic {
            return self.scan(start, end, limit).await;
        }
        let ts = match self.current_ts {
            Some(ts) => ts,
            None => {
                let ts = crate::metrics::timestamp(self.oracle.as_ref()).await?;
                self.current_ts = Some(ts);
                self.last_ts = self.last_ts.max(ts);
                ts
            }
        };
        self.scan_for_lock(start, end, limit, ts).await
    }

    async fn scan_at(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        read_ts: Timestamp,
        read: ScanRead,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let want = self.scan_want(start, end, limit);
        let stored = match read {
            ScanRead::Checked => {
                let r = self.resolving(|| self.client.scan_checked(start, end, read_ts, want)).await;
                self.note_checked(r)?
            }
            ScanRead::Plain => self.resolving(|| self.client.scan(start, end, read_ts, want)).await?,
            ScanRead::Once => self.resolving(|| self.client.scan_once(start, end, read_ts, want)).await?,
        };
        Ok(self.overlay(start, end, limit, want, stored))
    }

    /// `scan_at` for a pessimistic locking scan at `ts`: keeps what the store read of each
    /// entry (`seen`) for the lock request that follows.
    async fn scan_for_lock(
        &mut self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        ts: Timestamp,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let want = self.scan_want(start, end, limit);
        let entries = self.resolving(|| self.client.scan_for_lock(start, end, ts, want)).await?;
        self.seen.clear();
        let mut room = if entries.len() <= SEEN_MAX { SEEN_BYTES_MAX } else { 0 };
        let stored = entries
            .into_iter()
            .map(|(k, v, record)| {
                if let Some(r) = record.filter(|r| k.len() + r.len() <= room) {
                    room -= k.len() + r.len();
                    self.seen.insert(k.clone(), r);
                }
                (k, v)
            })
            .collect();
        Ok(self.overlay(start, end, limit, want, stored))
    }

    /// How many stored entries a scan of `[start, end)` for `limit` rows reads: each
    /// buffered write in the range hides at most one stored row, so `limit` plus their
    /// number is enough to fill `limit` after the overlay.
    fn scan_want(&self, start: &[u8], end: &[u8], limit: usize) -> usize {
        if self.buffer.is_empty() && self.stmt.is_empty() {
            return limit;
        }
        let range = (Bound::Included(start), Bound::Excluded(end));
        let pending = self.buffer.range::<[u8], _>(range).count() + self.stmt.range::<[u8], _>(range).count();
        limit.saturating_add(pending)
    }

    /// The stored entries of `[start, end)` (`want` were asked for) with this transaction's
    /// writes applied, up to `limit`.
    fn overlay(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        want: usize,
        stored: Vec<(Vec<u8>, Vec<u8>)>,
    ) -> Vec<(Vec<u8>, Vec<u8>)> {
        let range = (Bound::Included(start.to_vec()), Bound::Excluded(end.to_vec()));
        if self.buffer.is_empty() && self.stmt.is_empty() {
            let mut stored = stored;
            stored.truncate(limit);
            return stored;
        }
        // When the store cut the scan short, buffered writes past its last key would jump
        // over stored rows not read: overlay only up to that key.
        let range = match stored.last() {
            Some((last, _)) if stored.len() >= want => (Bound::Included(start.to_vec()), Bound::Included(last.clone())),
            _ => range,
        };
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = stored.into_iter().map(|(k, v)| (k, Some(v))).collect();
        for (k, v) in self.buffer.range(range.clone()).chain(self.stmt.range(range)) {
            merged.insert(k.clone(), v.clone());
        }
        merged.into_iter().filter_map(|(k, v)| v.map(|v| (k, v))).take(limit).collect()
    }

    /// Locks `keys` (pessimistic mode) and returns their latest committed values, overlaid
    /// with this transaction's writes. In optimistic mode it reads the snapshot and records
    /// the keys so that commit checks nobody changed them.
    pub async fn lock_and_get(&mut self, keys: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        if self.opts.mode == LockMode::Optimistic {
            self.locked.extend(keys.iter().cloned());
            return self.batch_get(keys).await;
        }
        // One pass over the keys: those to lock now, and the committed values known
        // without reading — keys locked earlier whose lock command's values are kept
        // (nothing can have committed them since) — or whether some must be read.
        let mut to_lock: Vec<Vec<u8>> = Vec::new();
        let mut read: HashMap<Vec<u8>, Option<Vec<u8>>> = HashMap::default();
        let mut unknown = false;
        for k in keys {
            if !self.locked.contains(k) {
                to_lock.push(k.clone());
            } else if self.buffered(k).is_none() {
                match self.locked_values.get(k) {
                    Some(v) => {
                        read.insert(k.clone(), v.clone());
                    }
                    None => unknown = true,
                }
            }
        }
        let mut read_ts = self.read_ts;
        if !to_lock.is_empty() {
            let mut seen = self.take_seen(&to_lock);
            let primary = self.primary.get_or_insert_with(|| to_lock[0].clone()).clone();
            loop {
                let for_update_ts = crate::metrics::timestamp(self.oracle.as_ref()).await?;
                self.last_ts = self.last_ts.max(for_update_ts);
                let req = PessimisticLockRequest {
                    keys: to_lock.clone(),
                    primary: primary.clone(),
                    start_ts: self.start_ts,
                    for_update_ts,
                    ttl_ms: self.ttl(self.lock_ttl_ms),
                    wait_timeout_ms: Some(self.opts.lock_wait_timeout_ms),
                    // A retry (a commit after `for_update_ts`) reads every key again.
                    seen: seen.take(),
                };
                let requested = Instant::now();
                let locked = self.client.pessimistic_lock(req).await;
                let took = requested.elapsed();
                crate::metrics::lock_request(took);
                self.lock_time += took;
                match locked {
                    Ok(values) => {
                        read_ts = for_update_ts;
                        let keep = to_lock.len() <= KEEP_LOCKED_VALUES_KEYS;
                        for (k, v) in to_lock.iter().zip(values) {
                            if keep {
                                self.keep_locked_value(k, &v);
                            }
                            read.insert(k.clone(), v);
                        }
                        break;
                    }
                    Err(Error::WriteConflict { .. }) => continue,
                    Err(e) => return Err(e),
                }
            }
            self.locked.extend(to_lock);
            self.start_heartbeat(&primary);
        } else if unknown {
            let ts = crate::metrics::timestamp(self.oracle.as_ref()).await?;
            self.last_ts = self.last_ts.max(ts);
            read_ts = read_ts.max(ts);
        }
        // Keys locked earlier whose values were not kept (nor written since) are read now,
        // at the same timestamp.
        self.get_overlaid(keys, read_ts, read, false).await
    }

    /// What the last locking scan's store read of `keys` (`seen`), for their lock request;
    /// None if it read none of them.
    fn take_seen(&mut self, keys: &[Vec<u8>]) -> Option<Seen> {
        let ts = self.current_ts.filter(|_| !self.seen.is_empty())?;
        let records: Vec<Option<Vec<u8>>> = keys.iter().map(|k| self.seen.remove(k)).collect();
        records.iter().any(Option::is_some).then_some(Seen { ts, records })
    }

    /// Keeps `key`'s latest committed value, just returned by its lock command, for later
    /// locking reads, while the budget lasts. Only a command of a few keys keeps them: a
    /// statement that locks many (a bulk INSERT's new keys) seldom reads them again.
    fn keep_locked_value(&mut self, key: &[u8], value: &Option<Vec<u8>>) {
        let size = key.len() + value.as_ref().map_or(0, Vec::len);
        if self.locked_values_bytes + size <= LOCKED_VALUES_MAX {
            self.locked_values_bytes += size;
            self.locked_values.insert(key.to_vec(), value.clone());
        }
    }

    /// Whether this transaction has written (or is writing, in the running statement) a key
    /// of `[start, end)`.
    pub fn writes_in(&self, start: &[u8], end: &[u8]) -> bool {
        if start >= end {
            return false;
        }
        let range = (Bound::Included(start), Bound::Excluded(end));
        self.buffer.range::<[u8], _>(range).next().is_some() || self.stmt.range::<[u8], _>(range).next().is_some()
    }

    /// Buffers a write of `key`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.stmt.insert(key, Some(value));
    }

    /// Buffers writes of distinct keys (the caller knows them distinct), in any order. The
    /// running statement's first writes are sorted and built into its buffer in one pass
    /// instead of a search per key: a bulk INSERT's thousand rows and their index entries.
    pub fn put_all(&mut self, mut puts: Vec<(Vec<u8>, Vec<u8>)>) {
        if !self.stmt.is_empty() {
            for (k, v) in puts {
                self.stmt.insert(k, Some(v));
            }
            return;
        }
        strata_common::keysort::sort_by_key_bytes(&mut puts, |p| &p.0);
        debug_assert!(puts.windows(2).all(|w| w[0].0 != w[1].0), "put_all of a key twice");
        self.stmt = puts.into_iter().map(|(k, v)| (k, Some(v))).collect();
    }

    /// Buffers a deletion of `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        self.stmt.insert(key, None);
    }

    /// Commits with two-phase commit. Durable when it returns.
    pub async fn commit(self) -> Result<Option<Timestamp>> {
        let started = Instant::now();
        let r = self.commit_inner().await;
        if let Ok(Some(_)) = r {
            crate::metrics::METRICS.commit.observe(started.elapsed());
        }
        r
    }

    async fn commit_inner(mut self) -> Result<Option<Timestamp>> {
        self.end_statement(true);
        // One merge walk over the (sorted) writes and locked keys: each write, whether its key
        // is pessimistically locked, and the locked keys not written (lock-only mutations).
        let buffer = std::mem::take(&mut self.buffer);
        let mut mutations: Vec<Mutation> = Vec::with_capacity(buffer.len() + self.locked.len());
        let mut locked: Vec<bool> = Vec::with_capacity(buffer.len() + self.locked.len());
        let mut lock_only: Vec<Vec<u8>> = Vec::new();
        let mut held = self.locked.iter().peekable();
        for (k, v) in buffer {
            while let Some(h) = held.next_if(|h| h.as_slice() < k.as_slice()) {
                lock_only.push(h.clone());
            }
            locked.push(held.next_if(|h| h.as_slice() == k.as_slice()).is_some());
            mutations.push(match v {
                Some(v) if !self.presumed.is_empty() && self.presumed.contains(&k) => Mutation::Insert(k, v),
                Some(v) => Mutation::Put(k, v),
                None => Mutation::Delete(k),
            });
        }
        lock_only.extend(held.cloned());
        if mutations.is_empty() && (self.opts.mode == LockMode::Optimistic || lock_only.is_empty()) {
            return Ok(None);
        }
        if mutations.is_empty() {
            // Only SELECT ... FOR UPDATE locks: nothing to commit, just release them.
            self.client.rollback(&lock_only, self.start_ts).await?;
            return Ok(None);
        }
        locked.extend(std::iter::repeat_n(true, lock_only.len()));
        mutations.extend(lock_only.into_iter().map(Mutation::Lock));
        let primary = match &self.primary {
            Some(p) => p.clone(),
            None => mutations[0].key().to_vec(),
        };
        // The primary goes first so a remote store can commit it before the secondaries.
        if let Some(pos) = mutations.iter().position(|m| m.key() == primary.as_slice()) {
            mutations.swap(0, pos);
            locked.swap(0, pos);
        }
        let req = Arc::new(PrewriteRequest {
            mutations,
            primary,
            start_ts: self.start_ts,
            ttl_ms: self.ttl(PREWRITE_TTL_MS),
            mode: self.opts.mode,
            locked,
        });
        let mut attempt = 0;
        // Keys presumed absent were not locked: waiting here for another transaction's
        // lock on one is the lock wait their lock command would have had, and ends the
        // same way (1205) after innodb_lock_wait_timeout.
        let wait_until =
            (!self.presumed.is_empty()).then(|| Instant::now() + Duration::from_millis(self.opts.lock_wait_timeout_ms));
        // One phase when the store offers it (`Client::one_pc`) and the session allows it
        // (`tidb_enable_1pc`); it fails as the prewrite fails, so the same resolving and
        // retrying follow.
        let mut one_pc = self.opts.one_pc;
        loop {
            let done = if one_pc {
                match self.client.one_pc(req.clone()).await {
                    Ok(Some(commit_ts)) => {
                        crate::metrics::METRICS.one_pc.inc();
                        return Ok(Some(commit_ts));
                    }
                    Ok(None) => {
                        one_pc = false;
                        continue;
                    }
                    Err(e) => Err(e),
                }
            } else {
                let done = self.client.prewrite(req.clone()).await;
                if done.is_ok() {
                    // A commit that takes long (many keys) keeps its locks alive too.
                    self.start_heartbeat(&req.primary);
                }
                done
            };
            match done {
                Ok(()) => break,
                Err(Error::KeyLocked(_)) if wait_until.is_some_and(|t| Instant::now() >= t) => {
                    let _ = self.client.rollback(&keys_of(&req), self.start_ts).await;
                    return Err(Error::LockWaitTimeout);
                }
                Err(Error::KeyLocked(lock)) if attempt < MAX_RESOLVE_ATTEMPTS || wait_until.is_some() => {
                    resolve_lock(self.client.as_ref(), self.oracle.as_ref(), &lock, attempt).await?;
                    attempt = attempt.saturating_add(1);
                }
                Err(e) => {
                    let _ = self.client.rollback(&keys_of(&req), self.start_ts).await;
                    return Err(e);
                }
            }
        }
        // The store's locks hold the values now: keep only the keys (a large transaction's
        // values are freed before its commit builds the write batch).
        let keys: Vec<Vec<u8>> = match Arc::try_unwrap(req) {
            Ok(req) => req.mutations.into_iter().map(Mutation::into_key).collect(),
            Err(req) => keys_of(&req),
        };
        let commit_ts = crate::metrics::timestamp(self.oracle.as_ref()).await?;
        if let Err(e) = self.client.commit(&keys, self.start_ts, commit_ts).await {
            let _ = self.client.rollback(&keys, self.start_ts).await;
            return Err(e);
        }
        Ok(Some(commit_ts))
    }

    /// Rolls back: releases every lock this transaction took.
    pub async fn rollback(mut self) -> Result<()> {
        self.buffer.clear();
        self.stmt.clear();
        if self.opts.mode == LockMode::Pessimistic && !self.locked.is_empty() {
            let keys: Vec<Vec<u8>> = std::mem::take(&mut self.locked).into_iter().collect();
            self.client.rollback(&keys, self.start_ts).await?;
        }
        Ok(())
    }
}
