//! `MvccStore`: Percolator's reads and write commands over a `storage::Engine`.
//!
//! Reads look at the locks first, then the commit records: a transaction that committed
//! before the reader's timestamp was issued had its lock in place before that, so it is
//! either still locked (the reader must resolve it) or already has its commit record. Locks
//! are read from the in-memory lock table (`lock_table`), never from the lock CF. Commit
//! records are read from the latest CF (one per key), and from the write CF only for a key
//! committed again after the reader's timestamp (see `records`). A key's newest Put is
//! only in the latest CF; the commit that supersedes it moves it to the write CF.
//!
//! Each write command (prewrite, commit, rollback, pessimistic lock) runs under the latches
//! of its keys, checks every key first and then writes one atomic batch (and changes the
//! lock table after it), so a command either applies to all its keys or to none.

use std::sync::Arc;

use strata_common::{Error, LockInfo, Result, Timestamp};
use strata_kv::{ChangeSink, CommittedChange, LockMode, Mutation, PessimisticLockRequest, PrewriteRequest, TxnStatus};
use strata_storage::{Cf, Cursor, Engine};

use crate::group_sync::GroupSync;
use crate::latches::Latches;
use crate::lock_table::{Changes, Committing, Held, LockTable, Prior};
use crate::records::{
    apply_delta, decode_user_key, delta_of, encode_user_key, is_twinless, latest_record, latest_value, split_latest,
    split_versioned, versioned, Kind, Lock, Write, WriteRef,
};

/// How many times `undelta` looks again for a base version that left the latest CF while it
/// looked (each time yielding the thread to the commit moving it).
const UNDELTA_RETRIES: usize = 1000;

/// How many deleted entries a command's shared write-CF cursor may step over on one seek
/// before it gives up and the key is read with a cursor of its own.
const SHARED_CURSOR_SKIPS: u64 = 32;

/// A lock (pessimistic, or a prewrite that checked the key with a point read) keeps the
/// key's latest record for its commit (`Prior`) up to this size, and only in commands of at
/// most `PRIOR_KEYS_MAX` keys (a large UPDATE's locks would hold a copy of every row it
/// changes); the others are read again at commit. That the key had no record is kept in
/// every command (it costs nothing): a load's new keys are not read again.
const PRIOR_MAX: usize = 4096;
const PRIOR_KEYS_MAX: usize = 64;

/// What a lock keeps of the latest record `raw` its command read (`PRIOR_MAX`).
fn prior_of(raw: Option<&[u8]>, keep_prior: bool) -> Prior {
    match raw {
        None => Prior::Read(None),
        Some(r) if keep_prior && r.len() <= PRIOR_MAX => Prior::Read(Some(r.into())),
        Some(_) => Prior::Unknown,
    }
}

/// Commands of at least this many keys read their latest records with one MultiGet (a
/// bulk load's thousands of keys); smaller ones get key by key, which measured cheaper
/// for TPC-C's commands of a few to a few dozen keys (MultiGet sorts and batches).
const MULTI_GET_MIN: usize = 64;
/// Commands of at least this many keys first ask whether spans of them hold any latest
/// record before reading them (`MvccStore::latest_records_sparse`).
const EMPTY_PROBE_MIN: usize = MULTI_GET_MIN;

/// Percolator on one engine.
pub struct MvccStore {
    engine: Arc<dyn Engine>,
    pub(crate) latches: Latches,
    /// Every lock, in memory (the lock CF is its durable half: see `lock_table`).
    pub(crate) locks: LockTable,
    /// Who is told of committed changes (a columnar replica), if anyone.
    sink: parking_lot::RwLock<Option<Arc<dyn ChangeSink>>>,
    /// What GC needs to know to skip a pass that could remove nothing (`gc`).
    pub(crate) gc_state: crate::gc::GcState,
    /// Group commit: commits write unsynced, then wait here for a shared WAL fsync.
    group: GroupSync,
    /// Start timestamps of the transactions this process wrote a rollback record for, down
    /// to the GC safe point, so a lock command asks the write CF for its transaction's
    /// rollback only when there may be one (`rolled_back`).
    pub(crate) rolled_back_txns: parking_lot::RwLock<std::collections::BTreeSet<Timestamp>>,
    /// Transactions that started below this timestamp may have rollback records the set
    /// does not know (written before this process opened the store): the oracle's persisted
    /// high-water mark at open, above every timestamp issued before.
    rollback_boundary: Timestamp,
    /// Deletions whose latest records go once no reader is older (`prune`).
    pub(crate) prune: crate::prune::Prune,
    /// Ranges of the latest CF known to hold no record, which scans seek past.
    empty: crate::empty_ranges::EmptyRanges,
    /// The newest commit per stripe of keys, which tells a lock whether a record a scan
    /// read is still the key's latest (`stamps`).
    stamps: crate::stamps::CommitStamps,
}

/// A key past every version of `enc` and before the next encoded key (encoded keys are
/// prefix-free, so no other key starts with `enc`).
fn past_versions(enc: &[u8]) -> Vec<u8> {
    let mut k = versioned(enc, Timestamp::ZERO);
    k.push(0);
    k
}

/// The error of a checked read (`get_at`) that found `key` committed at `commit_ts`, after
/// the reader's `ts`: a write conflict, as TiKV reports it, which the reader answers by
/// reading again at a fresh timestamp.
fn newer_version(key: &[u8], ts: Timestamp, commit_ts: Timestamp) -> Error {
    Error::WriteConflict { start_ts: ts, conflict_ts: commit_ts, key: key.to_vec() }
}

/// What one walk over a key's write records found (`MvccStore::history`).
#[derive(Default)]
struct History {
    /// The newest record that is not a rollback (a conflict check's subject).
    newest: Option<(Timestamp, Write)>,
    /// The record the transaction itself left (commit or rollback).
    own: Option<(Timestamp, Write)>,
}

/// What blocked a pessimistic lock request: another transaction's lock.
#[derive(Clone, Debug)]
pub struct Blocked {
    /// The key it is on.
    pub key: Vec<u8>,
    /// The holder's start ts.
    pub holder: Timestamp,
}

/// Commit records at which a commit (or `commit_unread`) offers its batch to
/// `Engine::ingest`: a bulk INSERT's new keys (go-tpc loads 1,024 rows per statement,
/// sysbench ~2,700) or a backfill run's index entries, whose latest records are then one
/// sorted table file instead of log, memtable, flush and compactions. It costs the file's
/// and the log's fsyncs, which a smaller commit would not win back.
const INGEST_MIN_KEYS: usize = 1024;

/// The raw CF key recording the layout of the commit records.
const FORMAT_KEY: &[u8] = b"mvcc.format";

/// The layout with a latest CF beside the write CF, every latest record with its twin in
/// the write CF.
const FORMAT_LATEST_V1: &[u8] = b"latest-v1";

/// The layout where a Put's latest record may be its only copy (`records`). A v1 store is
/// a valid v2 store; a binary that knows only v1 refuses a v2 store.
const FORMAT_LATEST: &[u8] = b"latest-v2";

/// Fills the latest CF from the write CF (each key's newest Put or Delete) unless the store
/// has it already, then records the layout. Stores made by this version have the record
/// from their first open; stores made by an earlier one are rebuilt once, here.
fn build_latest(engine: &dyn Engine) -> Result<()> {
    match engine.get(Cf::Raw, FORMAT_KEY)? {
        Some(f) if f == FORMAT_LATEST => return Ok(()),
        Some(f) if f == FORMAT_LATEST_V1 => {
            let mut batch = strata_storage::WriteBatch::default();
            batch.put(Cf::Raw, FORMAT_KEY.to_vec(), FORMAT_LATEST.to_vec());
            return engine.write(batch, true);
        }
        Some(f) => {
            return Err(Error::internal(format!(
                "unknown MVCC layout {:?}: written by a newer version of Strata?",
                String::from_utf8_lossy(&f)
            )))
        }
        None => {}
    }
    let mut c = engine.cursor(Cf::Write, &[], &[0xFF; 16])?;
    c.seek(&[]);
    let mut batch = strata_storage::WriteBatch::default();
    let mut last: Vec<u8> = Vec::new();
    while c.valid()? {
        let (enc, commit_ts) = split_versioned(c.key())?;
        if enc != last.as_slice() {
            let w = WriteRef::decode(c.value())?;
            if matches!(w.kind, Kind::Put | Kind::Delete) {
                last = enc.to_vec();
                batch.put(Cf::Latest, last.clone(), latest_value(commit_ts, c.value()));
                if batch.ops.len() >= 4096 {
                    engine.write(std::mem::take(&mut batch), false)?;
                }
            }
        }
        c.next();
    }
    batch.put(Cf::Raw, FORMAT_KEY.to_vec(), FORMAT_LATEST.to_vec());
    engine.write(batch, true)
}

/// How `MvccStore::walk_keys` reads.
#[derive(Clone, Copy, Default)]
struct Walk {
    /// Fail with a write conflict at the first key committed after the read timestamp.
    check: bool,
    /// A range read once by the server's own work (`storage::Engine::cursor_once`).
    once: bool,
}

fn lock_info(key: &[u8], l: &Lock) -> Error {
    Error::KeyLocked(Box::new(LockInfo {
        key: key.to_vec(),
        primary: l.primary.to_vec(),
        start_ts: l.start_ts,
        ttl_ms: l.ttl_ms,
    }))
}

/// A mutation a prewrite's checks passed (`MvccStore::prewrite_checks`).
struct Staged {
    /// Its index in the request.
    index: usize,
    /// Its encoded key.
    enc: Vec<u8>,
    /// What the checks read of its latest record.
    prior: Prior,
    /// The transaction's own pessimistic lock on the key, replaced by this one: whether it
    /// is in the lock CF too.
    replaces: Option<bool>,
}

/// The kind of lock a prewrite of `m` makes.
fn staged_lock_kind(m: &Mutation) -> Kind {
    match m {
        Mutation::Put(..) | Mutation::Insert(..) => Kind::Put,
        Mutation::Delete(_) => Kind::Delete,
        Mutation::Lock(_) => Kind::Lock,
    }
}

/// The lock a prewrite of `m` (in `req`, whose primary is `primary`) makes.
fn staged_lock(m: &Mutation, primary: &Arc<[u8]>, req: &PrewriteRequest) -> Lock {
    let value = match m {
        Mutation::Put(_, v) | Mutation::Insert(_, v) => Some(v),
        Mutation::Delete(_) | Mutation::Lock(_) => None,
    };
    Lock {
        kind: staged_lock_kind(m),
        primary: primary.clone(),
        start_ts: req.start_ts,
        ttl_ms: req.ttl_ms,
        for_update_ts: Timestamp::ZERO,
        short_value: value.cloned(),
    }
}

impl MvccStore {
    /// A store on `engine`, with the locks its lock CF holds. A store written before the
    /// latest CF existed gets it built from its write CF first.
    pub fn open(engine: Arc<dyn Engine>) -> Result<MvccStore> {
        build_latest(engine.as_ref())?;
        let locks = LockTable::load(engine.as_ref())?;
        let group = GroupSync::start(&engine)?;
        // The oracle's high-water mark (`tso`), if it ever ran on this engine.
        let limit = match engine.get(Cf::Raw, crate::tso::LIMIT_KEY)? {
            Some(b) => u64::from_le_bytes(b.as_slice().try_into().map_err(|_| Error::internal("corrupt tso limit"))?),
            None => 0,
        };
        Ok(MvccStore {
            gc_state: crate::gc::GcState::new(engine.as_ref()),
            group,
            rolled_back_txns: parking_lot::RwLock::default(),
            rollback_boundary: Timestamp::compose(limit, 0),
            prune: crate::prune::Prune::new(Timestamp::compose(limit, 0)),
            empty: Default::default(),
            stamps: crate::stamps::CommitStamps::new(Timestamp::compose(limit, 0)),
            engine,
            latches: Latches::default(),
            locks,
            sink: parking_lot::RwLock::new(None),
        })
    }

    /// The engine underneath (for local metadata such as the TSO window).
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    fn load_lock(&self, key: &[u8]) -> Option<Held> {
        self.locks.get(key)
    }

    /// Writes a command's batch, tells the sink what it committed, then changes the lock
    /// table (the order `ChangeSink` promises).
    fn apply(&self, changes: Changes, sync: bool) -> Result<()> {
        let sink = if changes.committed.is_empty() { None } else { self.sink.read().clone() };
        let oldest = crate::gc::GcState::oldest_put(&changes.batch);
        let fresh = crate::empty_ranges::Fresh::of(&changes.batch);
        self.stamps.note(&changes.batch);
        let done =
            changes.apply(self.engine.as_ref(), &self.locks, sink.as_deref(), sync, || self.empty.written(&fresh));
        self.gc_state.note(oldest);
        done
    }

    /// `apply` (unsynced) for a commit's changes, whose batch goes to `Engine::ingest` first
    /// when it is large enough to be worth a table file (`INGEST_MIN_KEYS`).
    fn apply_commit(&self, mut changes: Changes) -> Result<()> {
        static MIN: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        let min = *MIN.get_or_init(|| strata_common::env_number("STRATA_INGEST_MIN_KEYS", INGEST_MIN_KEYS));
        changes.ingest = changes.batch.ops.len() >= min;
        self.apply(changes, false)
    }

    /// Hands every change committed from now on to `sink` (replacing any earlier one).
    pub fn subscribe(&self, sink: Arc<dyn ChangeSink>) {
        *self.sink.write() = Some(sink);
    }

    /// `Client::sample_pieces`: sampled from the latest CF, where each key's current
    /// version (or its deletion, until pruned) is, a Put's value inline.
    pub fn sample_pieces(
        &self,
        start: &[u8],
        end: &[u8],
        n: usize,
        seed: u64,
    ) -> Result<Option<(Vec<strata_kv::KeyPiece>, u64)>> {
        let (lower, upper) = (encode_user_key(start), encode_user_key(end));
        let Some((pieces, total)) = self.engine.sample_pieces(Cf::Latest, &lower, &upper, n, seed)? else {
            return Ok(None);
        };
        let pieces = pieces
            .into_iter()
            .map(|p| {
                Ok(strata_kv::KeyPiece {
                    start: decode_user_key(&p.start)?,
                    end: decode_user_key(&p.end)?,
                    bytes: p.bytes,
                    hits: p.hits,
                })
            })
            .collect::<Result<_>>()?;
        Ok(Some((pieces, total)))
    }

    /// Fails with the first lock in `[start, end)` that blocks a read at `ts`.
    pub fn check_locks(&self, start: &[u8], end: &[u8], ts: Timestamp) -> Result<()> {
        match self.locks.find_in_range(start, end, |l| Self::blocks_read(l, ts)) {
            Some((key, l)) => Err(lock_info(&key, &l)),
            None => Ok(()),
        }
    }

    /// How many locks are held now.
    pub fn lock_count(&self) -> usize {
        self.locks.len()
    }

    /// A lock blocks a reader at `ts` if it may commit below `ts`.
    fn blocks_read(lock: &Lock, ts: Timestamp) -> bool {
        lock.kind != Kind::Pessimistic && lock.kind != Kind::Lock && lock.start_ts <= ts
    }

    /// The value a data record stands for: a Put's value (inline, or from the data CF), or
    /// None for a Delete.
    fn value_of(&self, enc: &[u8], w: WriteRef<'_>) -> Result<Option<Vec<u8>>> {
        match (w.kind, w.short_value) {
            (Kind::Put, Some(d)) if w.delta_base.is_some() => self.undelta(enc, d, w).map(Some),
            (Kind::Put, Some(v)) => Ok(Some(v.to_vec())),
            (Kind::Put, None) => self
                .engine
                .get(Cf::Data, &versioned(enc, w.start_ts))?
                .ok_or_else(|| Error::internal("committed value missing from the data CF"))
                .map(Some),
            _ => Ok(None),
        }
    }

    /// The value of a superseded Put kept as a delta (`w`, `delta`): its base version is
    /// found by its commit timestamp, in the write CF once superseded itself (maybe as a
    /// delta too, whose base is then found the same way) or else as the key's latest record,
    /// and the deltas are applied from there back down. A base is never collected before the
    /// versions that need it: GC only removes versions below a newer one at or below the
    /// safe point, and a base is newer than every reader that reads through it.
    fn undelta(&self, enc: &[u8], delta: &[u8], w: WriteRef<'_>) -> Result<Vec<u8>> {
        let missing = || Error::internal("the base version of an MVCC delta is missing");
        let mut deltas = vec![delta.to_vec()];
        let mut base = w.delta_base.ok_or_else(missing)?;
        // A base that is the latest record when looked for in the write CF may move there
        // (superseded) before the latest CF is read; then it is looked for again.
        let mut moves = 0;
        let whole = loop {
            if let Some(raw) = self.engine.get(Cf::Write, &versioned(enc, base))? {
                let b = WriteRef::decode(&raw)?;
                match (b.kind, b.short_value, b.delta_base) {
                    (Kind::Put, Some(d), Some(next)) => {
                        deltas.push(d.to_vec());
                        base = next;
                        continue;
                    }
                    (Kind::Put, _, None) => break self.value_of(enc, b)?.ok_or_else(missing)?,
                    _ => return Err(missing()),
                }
            }
            let raw = self.engine.get(Cf::Latest, enc)?.ok_or_else(missing)?;
            let (commit_ts, b) = split_latest(&raw)?;
            if commit_ts == base && b.kind == Kind::Put {
                break self.value_of(enc, b)?.ok_or_else(missing)?;
            }
            moves += 1;
            if moves > UNDELTA_RETRIES {
                return Err(missing());
            }
            std::thread::yield_now();
        };
        deltas.iter().rev().try_fold(whole, |v, d| apply_delta(&v, d))
    }

    /// Reads `key` at `ts`: the latest CF's record if it was committed at or below `ts`,
    /// else the newest data record at or below `ts` in the write CF.
    pub fn get(&self, key: &[u8], ts: Timestamp) -> Result<Option<Vec<u8>>> {
        self.get_at(key, ts, false)
    }

    /// A read at `ts` that fails with a write conflict if `key` has a version committed
    /// after `ts` (`check`; TiKV's RC check-ts read: a READ COMMITTED statement reading at
    /// an older timestamp learns that it must read again at a fresh one).
    fn get_at(&self, key: &[u8], ts: Timestamp, check: bool) -> Result<Option<Vec<u8>>> {
        self.check_lock(key, ts)?;
        let enc = encode_user_key(key);
        let raw = self.engine.get(Cf::Latest, &enc)?;
        self.value_at(key, &enc, raw, ts, check)
    }

    /// Fails with the lock on `key` if it blocks a read at `ts`.
    fn check_lock(&self, key: &[u8], ts: Timestamp) -> Result<()> {
        match self.locks.get_if(key, |l| Self::blocks_read(l, ts)) {
            Some(l) => Err(lock_info(key, &l)),
            None => Ok(()),
        }
    }

    /// `get_at`'s answer for `key` (encoded `enc`) from its latest record `raw`, read after
    /// its lock was checked.
    fn value_at(
        &self,
        key: &[u8],
        enc: &[u8],
        raw: Option<Vec<u8>>,
        ts: Timestamp,
        check: bool,
    ) -> Result<Option<Vec<u8>>> {
        // No latest record: the key never had a value, or its deletion was collected or
        // pruned (`prune`: below the floor, the deletion may be newer than `ts`).
        let Some(raw) = raw else {
            if self.prune.below_floor(ts) {
                return self.get_pruned(enc, ts, check);
            }
            return Ok(None);
        };
        let (commit_ts, w) = split_latest(&raw)?;
        if commit_ts <= ts {
            return self.value_of(enc, w);
        }
        if check {
            return Err(newer_version(key, ts, commit_ts));
        }
        let mut c = self.engine.versions_cursor(Cf::Write, enc)?;
        c.seek(&versioned(enc, ts));
        match Self::data_record(&mut *c, enc)? {
            Some((_, w)) => self.value_of(enc, w),
            None => Ok(None),
        }
    }

    /// `get_at` of a key without a latest record, for a reader below the prune floor: the
    /// write CF alone, where a pruned Delete keeps its twin.
    fn get_pruned(&self, enc: &[u8], ts: Timestamp, check: bool) -> Result<Option<Vec<u8>>> {
        let mut c = self.engine.versions_cursor(Cf::Write, enc)?;
        c.seek(enc);
        match Self::pruned_record(&mut *c, enc, ts, check)? {
            Some((_, w)) => self.value_of(enc, w),
            None => Ok(None),
        }
    }

    /// The newest Put or Delete of `enc` in the write CF: for a write command below the
    /// prune floor, what a pruned latest record said.
    fn newest_pruned(&self, enc: &[u8]) -> Result<Option<(Timestamp, Write)>> {
        let mut c = self.engine.versions_cursor(Cf::Write, enc)?;
        c.seek(enc);
        Ok(Self::data_record(&mut *c, enc)?.map(|(ts, w)| (ts, w.to_owned())))
    }

    /// From the cursor's position (on one of `enc`'s versions, newest first), the first
    /// data record (Put or Delete) of `enc` and its commit timestamp, skipping lock and
    /// rollback records.
    fn data_record<'c>(c: &'c mut dyn Cursor, enc: &[u8]) -> Result<Option<(Timestamp, WriteRef<'c>)>> {
        loop {
            if !c.valid()? || split_versioned(c.key())?.0 != enc {
                return Ok(None);
            }
            if matches!(WriteRef::decode(c.value())?.kind, Kind::Put | Kind::Delete) {
                break;
            }
            c.next();
        }
        let (_, commit_ts) = split_versioned(c.key())?;
        Ok(Some((commit_ts, WriteRef::decode(c.value())?)))
    }

    /// Reads `keys` at `ts`: point reads of the latest CF, whose filters rule out most
    /// table files; from `MULTI_GET_MIN` keys on, one RocksDB MultiGet for all of them
    /// (TPC-C's Stock-Level reads ~200 stock rows this way).
    pub fn batch_get(&self, keys: &[Vec<u8>], ts: Timestamp) -> Result<Vec<Option<Vec<u8>>>> {
        self.batch_get_at(keys, ts, false)
    }

    /// [`batch_get`](Self::batch_get) that fails with a write conflict if any key has a
    /// version committed after `ts` (see `get_at`).
    pub fn batch_get_checked(&self, keys: &[Vec<u8>], ts: Timestamp) -> Result<Vec<Option<Vec<u8>>>> {
        self.batch_get_at(keys, ts, true)
    }

    fn batch_get_at(&self, keys: &[Vec<u8>], ts: Timestamp, check: bool) -> Result<Vec<Option<Vec<u8>>>> {
        if keys.len() < MULTI_GET_MIN {
            return keys.iter().map(|k| self.get_at(k, ts, check)).collect();
        }
        // Every key's lock is checked before any record is read, as `get_at` does per key.
        for key in keys {
            self.check_lock(key, ts)?;
        }
        let encs: Vec<Vec<u8>> = keys.iter().map(|k| encode_user_key(k)).collect();
        let refs: Vec<&[u8]> = encs.iter().map(Vec::as_slice).collect();
        let raws = self.latest_records(&refs)?;
        keys.iter().zip(&encs).zip(raws).map(|((key, enc), raw)| self.value_at(key, enc, raw, ts, check)).collect()
    }

    /// Reads up to `limit` live entries of `[start, end)` at `ts`.
    pub fn scan(&self, start: &[u8], end: &[u8], ts: Timestamp, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_at(start, end, ts, limit, Walk::default())
    }

    /// [`scan`](Self::scan) of a range read once by the server's own work
    /// (`storage::Engine::cursor_once`: it does not count toward keeping the range in memory).
    pub fn scan_once(&self, start: &[u8], end: &[u8], ts: Timestamp, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_at(start, end, ts, limit, Walk { once: true, ..Walk::default() })
    }

    /// [`scan`](Self::scan) that fails with a write conflict at the first key (up to the
    /// last one returned) with a version committed after `ts`.
    pub fn scan_checked(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan_at(start, end, ts, limit, Walk { check: true, ..Walk::default() })
    }

    fn scan_at(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Timestamp,
        limit: usize,
        walk: Walk,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.walk_keys(
            start,
            end,
            ts,
            ts,
            limit,
            walk,
            |(k, _)| k,
            |enc, _, w, _| {
                Ok(match self.value_of(enc, w)? {
                    Some(v) => Some((decode_user_key(enc)?, v)),
                    None => None,
                })
            },
        )
    }

    /// [`scan`](Self::scan) whose entries come with the latest record they were read from,
    /// when they were (a key committed again after `ts` was read from the write CF): what a
    /// pessimistic lock of the key may use instead of reading it again (`stamps`).
    pub fn scan_for_lock(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<strata_kv::ScannedEntry>> {
        self.walk_keys(
            start,
            end,
            ts,
            ts,
            limit,
            Walk::default(),
            |(k, _, _)| k,
            |enc, _, w, raw| {
                Ok(match self.value_of(enc, w)? {
                    Some(v) => Some((decode_user_key(enc)?, v, raw.map(<[u8]>::to_vec))),
                    None => None,
                })
            },
        )
    }

    /// The keys of `[start, end)` whose newest version at or below `ts` was committed after
    /// `after`, up to `limit` of them, in key order: that version, a Put with its value or a
    /// Delete. Fails like `scan` on a lock that blocks a read at `ts`. What a copy of the
    /// range taken at `after` needs to be the range at `ts` — as long as GC has not passed
    /// `after` (it may have dropped a deletion the copy still has).
    pub fn scan_changes(
        &self,
        start: &[u8],
        end: &[u8],
        after: Timestamp,
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<CommittedChange>> {
        self.walk_keys(
            start,
            end,
            after,
            ts,
            limit,
            Walk::default(),
            |ch| &ch.key,
            |enc, commit_ts, w, _| {
                if commit_ts <= after {
                    return Ok(None);
                }
                Ok(Some(CommittedChange { key: decode_user_key(enc)?, commit_ts, value: self.value_of(enc, w)? }))
            },
        )
    }

    /// Walks the keys of `[start, end)` that have a value or a deletion at or below `ts`, in
    /// order: `visit` gets each one's encoded key and newest data record at or below `ts`
    /// (with its commit timestamp) and may produce an entry; the walk stops at `limit`
    /// entries. The walk is over the latest CF, one entry per key; only a key committed
    /// again after `ts` is looked up in the write CF, with one cursor for the whole walk.
    /// `since` (at most `ts`) is the oldest timestamp whose view the caller needs: below the
    /// prune floor, the walk also visits the keys whose latest Delete record was pruned,
    /// from the write CF (`prune`). Fails with the first lock that blocks a read at `ts`, up
    /// to the last key returned when the limit cut it short; with `walk.check`, with a write
    /// conflict at the first key committed after `ts`.
    #[allow(clippy::too_many_arguments)]
    fn walk_keys<T>(
        &self,
        start: &[u8],
        end: &[u8],
        since: Timestamp,
        ts: Timestamp,
        limit: usize,
        walk: Walk,
        key_of: fn(&T) -> &[u8],
        mut visit: impl FnMut(&[u8], Timestamp, WriteRef<'_>, Option<&[u8]>) -> Result<Option<T>>,
    ) -> Result<Vec<T>> {
        // The first lock in the range that blocks this read, taken before the versions are
        // read (see the module docs); a lock that appears later belongs to a transaction
        // that will commit above `ts`.
        let Walk { check, once } = walk;
        let blocking = self.locks.find_in_range(start, end, |l| Self::blocks_read(l, ts));
        let (enc_start, enc_end) = (encode_user_key(start), encode_user_key(end));
        // A resident table's cursor (`storage_rocks::resident`) is live, not a snapshot: a
        // pruned Delete can leave it during the walk, and a Delete committed and pruned
        // during the walk would be in neither it nor the write-CF cursor opened at the
        // start. So a walk below the floor reads a snapshot of the latest CF, and the floor
        // is asked again after a walk on a live cursor: if it has passed `since` meanwhile,
        // the walk is made again below the floor (rare: the floor stays below every known
        // reader).
        let mut below_floor = false;
        let out = loop {
            // Registered before the cursor pins its snapshot (`empty_ranges`).
            let mut ticket = if limit > 0 { self.empty.begin(&enc_start, &enc_end) } else { None };
            let mut latest = match (below_floor, once) {
                (true, _) => self.engine.snapshot_cursor(Cf::Latest, &enc_start, &enc_end)?,
                (false, true) => self.engine.cursor_once(Cf::Latest, &enc_start, &enc_end)?,
                (false, false) => self.engine.cursor(Cf::Latest, &enc_start, &enc_end)?,
            };
            // Asked once the cursor has pinned its snapshot (`prune`).
            let mut pruned = match below_floor || self.prune.below_floor(since) {
                true => Some(self.engine.cursor(Cf::Write, &enc_start, &enc_end)?),
                false => None,
            };
            if pruned.is_some() && latest.live() {
                below_floor = true;
                continue;
            }
            let mut older: Option<Box<dyn Cursor + '_>> = None;
            let mut out = Vec::new();
            if limit > 0 {
                if let Some(p) = &mut pruned {
                    ticket = None; // a pruned Delete's key has no record, yet is not empty here
                    p.seek(&enc_start);
                }
                match ticket {
                    Some(t) => {
                        latest.seek(t.seek.as_deref().filter(|s| *s > enc_start.as_slice()).unwrap_or(&enc_start));
                        let first = if latest.valid()? { latest.key() } else { &enc_end };
                        self.empty.finish(t, &enc_start, first);
                    }
                    None => {
                        let skipped = latest.seek_counting(&enc_start);
                        if pruned.is_none() && skipped > crate::empty_ranges::SLOW_SEEK_SKIPS {
                            self.empty.note_slow(&enc_start);
                        }
                    }
                }
            }
            while out.len() < limit {
                let next = if latest.valid()? { Some(latest.key()) } else { None };
                if let Some(p) = &mut pruned {
                    if p.valid()? {
                        let k = split_versioned(p.key())?.0.to_vec();
                        if next.is_none_or(|l| k.as_slice() < l) {
                            // Versions without a latest record: a pruned Delete is the newest.
                            if let Some((commit_ts, w)) = Self::pruned_record(&mut **p, &k, ts, check)? {
                                if let Some(t) = visit(&k, commit_ts, w, None)? {
                                    out.push(t);
                                }
                            }
                            p.seek(&past_versions(&k));
                            continue;
                        }
                        if next == Some(k.as_slice()) {
                            p.seek(&past_versions(&k)); // read through its latest record below
                        }
                    }
                }
                let Some(enc) = next else { break };
                let raw = latest.value();
                let (commit_ts, w) = split_latest(raw)?;
                let entry = if commit_ts <= ts {
                    visit(enc, commit_ts, w, Some(raw))?
                } else if check {
                    return Err(newer_version(&decode_user_key(enc)?, ts, commit_ts));
                } else {
                    if latest.live() {
                        // The version this newer record replaced moved into the write CF
                        // with it, maybe after a write-CF cursor opened earlier in the walk.
                        older = None;
                    }
                    let c = match &mut older {
                        Some(c) => c,
                        None => older.insert(self.engine.cursor(Cf::Write, &enc_start, &enc_end)?),
                    };
                    c.seek(&versioned(enc, ts));
                    match Self::data_record(&mut **c, enc)? {
                        Some((commit_ts, w)) => visit(enc, commit_ts, w, None)?,
                        None => None,
                    }
                };
                if let Some(t) = entry {
                    out.push(t);
                }
                latest.next();
            }
            if pruned.is_none() && self.prune.below_floor(since) {
                below_floor = true;
                continue;
            }
            break out;
        };
        // Locks only matter up to the last key returned when the limit cut the scan short.
        let bound = if out.len() >= limit { out.last().map(|t| key_of(t).to_vec()) } else { None };
        match blocking {
            Some((key, l)) if bound.as_ref().is_none_or(|b| key <= *b) => Err(lock_info(&key, &l)),
            _ => Ok(out),
        }
    }

    /// For a read below the prune floor (`get_pruned`, `walk_keys`), the data record at or
    /// below `ts` of `enc`, a key with versions in the write CF but no latest record, from
    /// `c` positioned on its newest version; with `check`, a write conflict if its newest is
    /// after `ts`.
    fn pruned_record<'c>(
        c: &'c mut dyn Cursor,
        enc: &[u8],
        ts: Timestamp,
        check: bool,
    ) -> Result<Option<(Timestamp, WriteRef<'c>)>> {
        if check {
            if let Some((commit_ts, _)) = Self::data_record(c, enc)? {
                if commit_ts > ts {
                    return Err(newer_version(&decode_user_key(enc)?, ts, commit_ts));
                }
            }
        }
        c.seek(&versioned(enc, ts));
        Self::data_record(c, enc)
    }

    /// Finds the write record `start_ts` left on `key` (commit or rollback), if any: in the
    /// latest CF for a Put that has no twin yet, else in the write CF.
    fn find_own_write(&self, enc: &[u8], start_ts: Timestamp) -> Result<Option<(Timestamp, Write)>> {
        if let Some(raw) = self.engine.get(Cf::Latest, enc)? {
            let (commit_ts, w) = split_latest(&raw)?;
            if is_twinless(&raw) && w.start_ts == start_ts {
                return Ok(Some((commit_ts, w.to_owned())));
            }
        }
        let mut c = self.engine.versions_cursor(Cf::Write, enc)?;
        c.seek(enc);
        while c.valid()? {
            let (k, commit_ts) = split_versioned(c.key())?;
            if k != enc || commit_ts < start_ts {
                break;
            }
            let w = Write::decode(c.value())?;
            if w.start_ts == start_ts {
                return Ok(Some((commit_ts, w)));
            }
            c.next();
        }
        Ok(None)
    }

    /// Walks `enc`'s write records once (newest first) with one cursor bounded to the key's
    /// versions, collecting what the lock and prewrite checks need.
    fn history(&self, enc: &[u8], start_ts: Timestamp) -> Result<History> {
        let mut c = self.engine.versions_cursor(Cf::Write, enc)?;
        let h = Self::walk_history(&mut *c, enc, start_ts)?;
        self.with_latest(enc, start_ts, h)
    }

    /// `h` with `enc`'s latest record counted in, when the write CF has no twin of it: it is
    /// then the key's newest Put.
    fn with_latest(&self, enc: &[u8], start_ts: Timestamp, mut h: History) -> Result<History> {
        let Some(raw) = self.engine.get(Cf::Latest, enc)? else { return Ok(h) };
        if !is_twinless(&raw) {
            return Ok(h);
        }
        let (commit_ts, w) = split_latest(&raw)?;
        if h.own.is_none() && commit_ts >= start_ts && w.start_ts == start_ts {
            h.own = Some((commit_ts, w.to_owned()));
        }
        if h.newest.as_ref().is_none_or(|(ts, _)| commit_ts > *ts) {
            h.newest = Some((commit_ts, w.to_owned()));
        }
        Ok(h)
    }

    /// `history` through `shared`, a cursor serving all the keys of one command (a new
    /// iterator per key cost more than the walk). The cursor is limited (`cursor_limited`):
    /// where reaching the key would mean stepping over a run of deleted entries, it gives up
    /// and the key gets a cursor of its own, bounded to its versions, which never walks
    /// past them (see `batch_get` for what an unlimited shared cursor did).
    fn history_in<'s>(
        &'s self,
        shared: &mut Option<Box<dyn Cursor + 's>>,
        bounds: &(Vec<u8>, Vec<u8>),
        enc: &[u8],
        start_ts: Timestamp,
    ) -> Result<History> {
        let c = match shared {
            Some(c) => c,
            None => shared.insert(self.engine.cursor_limited(Cf::Write, &bounds.0, &bounds.1, SHARED_CURSOR_SKIPS)?),
        };
        let h = Self::walk_history(&mut **c, enc, start_ts)?;
        if c.gave_up() {
            return self.history(enc, start_ts);
        }
        self.with_latest(enc, start_ts, h)
    }

    /// The encoded-key bounds of a shared write-CF cursor for `keys`.
    fn bounds<'k>(keys: impl Iterator<Item = &'k [u8]>) -> (Vec<u8>, Vec<u8>) {
        let (mut lo, mut hi): (Option<&[u8]>, Option<&[u8]>) = (None, None);
        for k in keys {
            lo = Some(lo.map_or(k, |l| l.min(k)));
            hi = Some(hi.map_or(k, |h| h.max(k)));
        }
        let lower = encode_user_key(lo.unwrap_or_default());
        let mut upper = encode_user_key(hi.unwrap_or_default());
        upper.extend_from_slice(&[0xFF; 9]);
        (lower, upper)
    }

    fn walk_history(c: &mut dyn Cursor, enc: &[u8], start_ts: Timestamp) -> Result<History> {
        let mut h = History::default();
        c.seek(enc);
        while c.valid()? {
            let (k, commit_ts) = split_versioned(c.key())?;
            if k != enc {
                break;
            }
            if h.newest.is_some() && commit_ts < start_ts {
                break; // nothing left to find: the own record is never below start_ts
            }
            let w = Write::decode(c.value())?;
            if h.own.is_none() && commit_ts >= start_ts && w.start_ts == start_ts {
                h.own = Some((commit_ts, w.clone()));
            }
            if h.newest.is_none() && w.kind != Kind::Rollback {
                h.newest = Some((commit_ts, w));
            }
            c.next();
        }
        Ok(h)
    }

    /// Takes pessimistic locks on all keys, or on none. Returns the keys' latest committed
    /// values (in `req.keys` order; with every key locked nothing can commit past them),
    /// or `Err(blocked)` inside if another transaction holds one of them (the caller waits
    /// and retries). The locks live in the lock table only (see `lock_table`).
    #[allow(clippy::type_complexity)]
    pub fn pessimistic_lock(
        &self,
        req: &PessimisticLockRequest,
        sync: bool,
    ) -> Result<std::result::Result<Vec<Option<Vec<u8>>>, Blocked>> {
        let _g = self.latches.acquire(req.keys.iter());
        self.pessimistic_lock_latched(req, sync)
    }

    /// `pessimistic_lock` if its latches are free now; None (nothing done) if one is held.
    #[allow(clippy::type_complexity)]
    pub fn try_pessimistic_lock(
        &self,
        req: &PessimisticLockRequest,
        sync: bool,
    ) -> Option<Result<std::result::Result<Vec<Option<Vec<u8>>>, Blocked>>> {
        let _g = self.latches.try_acquire(req.keys.iter())?;
        Some(self.pessimistic_lock_latched(req, sync))
    }

    #[allow(clippy::type_complexity)]
    fn pessimistic_lock_latched(
        &self,
        req: &PessimisticLockRequest,
        sync: bool,
    ) -> Result<std::result::Result<Vec<Option<Vec<u8>>>, Blocked>> {
        let mut changes = Changes::with_capacity(req.keys.len(), 0);
        let primary: Arc<[u8]> = req.primary.as_slice().into();
        let mut values = Vec::with_capacity(req.keys.len());
        let keep_prior = req.keys.len() <= PRIOR_KEYS_MAX;
        let mut ours = Vec::with_capacity(req.keys.len());
        for key in &req.keys {
            match self.locks.get_if(key, |_| true) {
                Some(l) if l.start_ts != req.start_ts => {
                    return Ok(Err(Blocked { key: key.clone(), holder: l.start_ts }));
                }
                held => ours.push(held.is_some()),
            }
        }
        // Point reads only (no walk over the key's versions): the latest CF has the value
        // and the newest Put or Delete; lock and rollback records are not conflicts here,
        // as they change no value (TiKV reports a newer Lock record as a conflict, which
        // only makes the statement retry for nothing).
        let encs: Vec<Vec<u8>> = req.keys.iter().map(|k| encode_user_key(k)).collect();
        let raws = self.locked_records(req, &encs)?;
        for (((key, enc), raw), held) in req.keys.iter().zip(&encs).zip(raws).zip(ours) {
            let latest = raw.as_deref().map(split_latest).transpose()?;
            values.push(match latest {
                Some((_, w)) => self.value_of(enc, w)?,
                None => None,
            });
            if held {
                continue; // ours already
            }
            // A pruned Delete may be newer than the transaction (`prune`).
            let pruned = match latest {
                None if self.prune.below_floor(req.start_ts) => self.newest_pruned(enc)?,
                _ => None,
            };
            if let Some((commit_ts, w)) = latest.or(pruned.as_ref().map(|(ts, w)| (*ts, w.as_ref()))) {
                if commit_ts > req.for_update_ts {
                    return Err(Error::WriteConflict {
                        start_ts: req.start_ts,
                        conflict_ts: commit_ts,
                        key: key.clone(),
                    });
                }
                if w.start_ts == req.start_ts {
                    return Err(Error::TxnRolledBack(req.start_ts)); // committed already
                }
            }
            // A rollback of ours (its primary was found dead and rolled back): taking the
            // lock again could let a transaction others have given up on commit.
            if self.rolled_back(enc, req.start_ts)? {
                return Err(Error::TxnRolledBack(req.start_ts));
            }
            let lock = Lock {
                kind: Kind::Pessimistic,
                primary: primary.clone(),
                start_ts: req.start_ts,
                ttl_ms: req.ttl_ms,
                for_update_ts: req.for_update_ts,
                short_value: None,
            };
            let prior = prior_of(raw.as_deref(), keep_prior);
            changes.put_lock(key, lock, false, prior);
        }
        self.apply(changes, sync)?;
        Ok(Ok(values))
    }

    /// The latest records of a lock request's keys (encoded as `encs`), in order: a record
    /// a scan handed back (`seen`) as it is if nothing committed to its stripe since the scan
    /// (`stamps`), the others read.
    fn locked_records(&self, req: &PessimisticLockRequest, encs: &[Vec<u8>]) -> Result<Vec<Option<Vec<u8>>>> {
        let seen = req.seen.as_ref().filter(|s| s.records.len() == encs.len());
        let Some(seen) = seen else {
            return self.latest_records(&encs.iter().map(Vec::as_slice).collect::<Vec<_>>());
        };
        let given: Vec<Option<&Vec<u8>>> = encs
            .iter()
            .zip(&seen.records)
            .map(|(enc, r)| r.as_ref().filter(|_| self.stamps.newest(enc) <= seen.ts))
            .collect();
        let to_read: Vec<&[u8]> =
            encs.iter().zip(&given).filter(|(_, g)| g.is_none()).map(|(e, _)| e.as_slice()).collect();
        let mut read = self.latest_records(&to_read)?.into_iter();
        given
            .into_iter()
            .map(|g| match g {
                Some(r) => Ok(Some(r.clone())),
                None => read.next().ok_or_else(|| Error::internal("lock read fewer records than keys")),
            })
            .collect()
    }

    /// `latest_records` for a command of many keys, most of them often new (a bulk
    /// INSERT's rows, appended where the table has no key yet, beside its index entries,
    /// spread among the existing ones): the keys in order, a span of them that holds no
    /// latest record (one seek, `no_latest_in`) is read as all absent, and a span that
    /// holds some is halved until its halves are empty or small enough to read. Under the
    /// keys' latches no record of theirs can appear meanwhile (records of other keys in a
    /// span may, and do not matter). A load's statement of 1,024 new rows is then one seek
    /// instead of a 1,024-key MultiGet (6% of the server's time in a TPC-C load), and so is
    /// an index backfilled into an empty range (sysbench's CREATE INDEX after its load,
    /// whose absence reads by MultiGet were 15% of the backfill's samples).
    fn latest_records_sparse(&self, encs: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        if encs.len() < EMPTY_PROBE_MIN {
            return self.latest_records(encs);
        }
        let mut order: Vec<usize> = (0..encs.len()).collect();
        order.sort_unstable_by(|a, b| encs[*a].cmp(encs[*b]));
        let mut out = vec![None; encs.len()];
        let mut spans = vec![(0, order.len())];
        while let Some((lo, hi)) = spans.pop() {
            let (first, last) = (encs[order[lo]], encs[order[hi - 1]]);
            if self.no_latest_in(first, last)? {
                continue;
            }
            if hi - lo <= EMPTY_PROBE_MIN {
                let span: Vec<&[u8]> = order[lo..hi].iter().map(|i| encs[*i]).collect();
                for (i, raw) in order[lo..hi].iter().zip(self.latest_records(&span)?) {
                    out[*i] = raw;
                }
                continue;
            }
            let mid = lo + (hi - lo) / 2;
            spans.push((mid, hi));
            spans.push((lo, mid));
        }
        Ok(out)
    }

    /// Whether the latest CF holds no key from `first` to `last` (both included).
    fn no_latest_in(&self, first: &[u8], last: &[u8]) -> Result<bool> {
        let mut upper = last.to_vec();
        upper.push(0);
        let mut c = self.engine.cursor_once(Cf::Latest, first, &upper)?;
        c.seek(first);
        Ok(!c.valid()?)
    }

    /// The latest CF records of encoded keys, in order: one MultiGet for a command's keys
    /// when there are more than a few.
    fn latest_records(&self, encs: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        if encs.len() < MULTI_GET_MIN {
            return encs.iter().map(|e| self.engine.get(Cf::Latest, e)).collect();
        }
        self.engine.multi_get(Cf::Latest, encs)
    }

    /// Whether `enc` has no record of `start_ts` and none committed after it: its newest
    /// Put or Delete is older and there is no rollback at `start_ts`. If so, what the key's
    /// lock keeps of the latest record read (`Prior`); None means "look closer"
    /// (`history`), not that a record of `start_ts` exists.
    /// `raw` is the key's latest CF record, read by the caller.
    fn untouched_since(
        &self,
        enc: &[u8],
        raw: Option<Vec<u8>>,
        start_ts: Timestamp,
        keep_prior: bool,
    ) -> Result<Option<Prior>> {
        let newest = raw.as_deref().map(|raw| split_latest(raw).map(|(ts, _)| ts)).transpose()?;
        if newest.is_some_and(|commit_ts| commit_ts >= start_ts) {
            return Ok(None);
        }
        // A pruned Delete may be newer than `start_ts` (`prune`): its twin is in the write CF.
        if newest.is_none()
            && self.prune.below_floor(start_ts)
            && self.newest_pruned(enc)?.is_some_and(|(commit_ts, _)| commit_ts >= start_ts)
        {
            return Ok(None);
        }
        if self.rolled_back(enc, start_ts)? {
            return Ok(None);
        }
        Ok(Some(prior_of(raw.as_deref(), keep_prior)))
    }

    /// Whether `start_ts` left a rollback record on `enc` (a point read: rollbacks are
    /// written at the transaction's own start ts, where no commit record can be, as
    /// timestamps are unique).
    fn rolled_back(&self, enc: &[u8], start_ts: Timestamp) -> Result<bool> {
        if start_ts >= self.rollback_boundary && !self.rolled_back_txns.read().contains(&start_ts) {
            return Ok(false); // never rolled back: no record to look for
        }
        match self.engine.get(Cf::Write, &versioned(enc, start_ts))? {
            Some(v) => {
                let w = WriteRef::decode(&v)?;
                Ok(w.kind == Kind::Rollback && w.start_ts == start_ts)
            }
            None => Ok(false),
        }
    }

    /// Prewrite: checks conflicts on every key, then stages all values under locks.
    pub fn prewrite(&self, req: &PrewriteRequest, sync: bool) -> Result<()> {
        let _g = self.latches.acquire(req.mutations.iter().map(|m| m.key()));
        self.prewrite_latched(req, sync)
    }

    /// `prewrite` if its latches are free now; None (nothing done) if one is held.
    pub fn try_prewrite(&self, req: &PrewriteRequest, sync: bool) -> Option<Result<()>> {
        let _g = self.latches.try_acquire(req.mutations.iter().map(|m| m.key()))?;
        Some(self.prewrite_latched(req, sync))
    }

    /// Prewrites and commits `req` in one command (one-phase commit), unsynced (the caller
    /// waits with `sync_commits`): the prewrite's checks under the latches of every key,
    /// then the keys stand locked (`lock_table::Committing`) while `next_ts` gives the
    /// commit timestamp and the commit records are written, as a two-phase commit takes its
    /// timestamp after its prewrite locks are in place; only the primary's latch is held
    /// past the checks, as `commit_unsynced` holds it. Nothing is done, and None returned,
    /// when the request wants the two phases: its primary is not one of its keys, or a key
    /// was prewritten (or committed) by this transaction already, or it replaces a lock of
    /// the lock CF.
    pub fn one_pc(&self, req: &PrewriteRequest, next_ts: &dyn Fn() -> Result<Timestamp>) -> Result<Option<Timestamp>> {
        let g = self.latches.acquire(req.mutations.iter().map(|m| m.key()));
        self.one_pc_latched(g, req, next_ts)
    }

    /// `one_pc` if its latches are free now; None (nothing done) if one is held.
    pub fn try_one_pc(
        &self,
        req: &PrewriteRequest,
        next_ts: &dyn Fn() -> Result<Timestamp>,
    ) -> Option<Result<Option<Timestamp>>> {
        let g = self.latches.try_acquire(req.mutations.iter().map(|m| m.key()))?;
        Some(self.one_pc_latched(g, req, next_ts))
    }

    fn one_pc_latched(
        &self,
        mut latches: crate::latches::Guard<'_>,
        req: &PrewriteRequest,
        next_ts: &dyn Fn() -> Result<Timestamp>,
    ) -> Result<Option<Timestamp>> {
        if !req.mutations.iter().any(|m| m.key() == req.primary.as_slice()) {
            return Ok(None);
        }
        let staged = self.prewrite_checks(req)?;
        if staged.len() != req.mutations.len() || staged.iter().any(|s| s.replaces == Some(true)) {
            return Ok(None);
        }
        let primary: Arc<[u8]> = req.primary.as_slice().into();
        let keys = staged.iter().map(|s| {
            let m = &req.mutations[s.index];
            (m.key().to_vec(), staged_lock_kind(m))
        });
        let entry = Arc::new(Committing::new(keys.collect(), primary.clone(), req.start_ts, req.ttl_ms));
        self.locks.begin_commit(entry.clone());
        // Other commands on the other keys meet the entry as a lock, and whoever would end
        // the transaction from outside goes through the primary's latch, held to the end.
        latches.keep_only(&req.primary);
        let done = (|| {
            let commit_ts = next_ts()?;
            let own = staged.iter().filter(|s| s.replaces.is_some()).count();
            let mut changes = Changes::with_capacity(own, 2 * staged.len());
            let sink = self.sink.read().clone();
            for s in staged {
                let m = &req.mutations[s.index];
                if s.replaces.is_some() {
                    changes.locks.push((m.key().to_vec(), None)); // its pessimistic lock
                }
                let lock = staged_lock(m, &primary, req);
                self.commit_record(&mut changes, sink.as_deref(), m.key(), &s.enc, lock, s.prior, commit_ts)?;
            }
            self.apply_commit(changes)?;
            Ok(commit_ts)
        })();
        self.locks.end_commit(&entry);
        drop(latches);
        done.map(Some)
    }

    fn prewrite_latched(&self, req: &PrewriteRequest, sync: bool) -> Result<()> {
        let staged = self.prewrite_checks(req)?;
        let mut changes = Changes::with_capacity(staged.len(), 0);
        let primary: Arc<[u8]> = req.primary.as_slice().into();
        for s in staged {
            let m = &req.mutations[s.index];
            // The lock holds the staged value, whatever its size, until commit writes it.
            changes.put_lock(m.key(), staged_lock(m, &primary, req), false, s.prior);
        }
        self.apply(changes, sync)
    }

    /// A prewrite's checks of `req` (under its latches): the mutations to lock, in order,
    /// leaving out those this transaction has prewritten or committed already (a retried
    /// command).
    fn prewrite_checks(&self, req: &PrewriteRequest) -> Result<Vec<Staged>> {
        let mut staged = Vec::with_capacity(req.mutations.len());
        let bounds = Self::bounds(req.mutations.iter().map(|m| m.key()));
        let mut shared = None;
        let keep_prior = req.mutations.len() <= PRIOR_KEYS_MAX;
        let must_hold = |i: usize| req.mode == LockMode::Pessimistic && req.locked.get(i).copied().unwrap_or(false);
        let helds: Vec<Option<Held>> = req.mutations.iter().map(|m| self.load_lock(m.key())).collect();
        let mut encs: Vec<Vec<u8>> = req.mutations.iter().map(|m| encode_user_key(m.key())).collect();
        // A key a pessimistic transaction writes without locking it (a non-unique index
        // entry) is not checked for conflicts, only for a record of the transaction's own:
        // point reads settle the usual case where there is none. An optimistic Put or
        // Delete conflicts with a newer Put or Delete only (a newer Lock record changed no
        // value), so the same point reads settle it when there is none; a Lock mutation (a
        // row read FOR UPDATE) conflicts with a newer Lock record too and walks the key's
        // history. The point reads are one MultiGet.
        let point_read: Vec<bool> = req
            .mutations
            .iter()
            .enumerate()
            .map(|(i, m)| {
                helds[i].is_none()
                    && !must_hold(i)
                    && (req.mode == LockMode::Pessimistic || !matches!(m, Mutation::Lock(_)))
            })
            .collect();
        let to_read: Vec<&[u8]> =
            encs.iter().zip(&point_read).filter(|(_, r)| **r).map(|(e, _)| e.as_slice()).collect();
        let mut raws = self.latest_records_sparse(&to_read)?.into_iter();
        for (i, (m, held)) in req.mutations.iter().zip(helds).enumerate() {
            let key = m.key();
            let enc = &encs[i];
            // What a lock of ours or this command's point reads read, for commit.
            let mut prior = Prior::Unknown;
            let mut replaces = None;
            let untouched = match point_read[i] {
                true => {
                    let raw = raws.next().ok_or_else(|| Error::internal("prewrite read fewer records than keys"))?;
                    // The latest CF holds the newest Put or Delete: a Put is a value.
                    if matches!(m, Mutation::Insert(..))
                        && raw.as_deref().map(split_latest).transpose()?.is_some_and(|(_, w)| w.kind == Kind::Put)
                    {
                        return Err(Error::AlreadyExists { key: key.to_vec() });
                    }
                    self.untouched_since(enc, raw, req.start_ts, keep_prior)?
                }
                false => None,
            };
            match (held, untouched) {
                (Some(h), _) if h.lock.start_ts == req.start_ts => {
                    if h.lock.kind != Kind::Pessimistic {
                        continue; // already prewritten: the command is idempotent
                    }
                    replaces = Some(h.on_disk);
                    prior = h.prior;
                }
                (Some(h), _) => return Err(lock_info(key, &h.lock)),
                (None, _) if must_hold(i) => return Err(Error::TxnRolledBack(req.start_ts)),
                (None, Some(read)) => prior = read,
                (None, None) => {
                    let h = self.history_in(&mut shared, &bounds, enc, req.start_ts)?;
                    if let Some((commit_ts, w)) = h.newest {
                        if req.mode == LockMode::Optimistic && commit_ts > req.start_ts {
                            return Err(Error::WriteConflict {
                                start_ts: req.start_ts,
                                conflict_ts: commit_ts,
                                key: key.to_vec(),
                            });
                        }
                        if w.start_ts == req.start_ts {
                            return Err(Error::TxnRolledBack(req.start_ts));
                        }
                    }
                    if let Some((_, w)) = h.own {
                        if w.kind == Kind::Rollback {
                            return Err(Error::TxnRolledBack(req.start_ts));
                        }
                        continue;
                    }
                }
            }
            staged.push(Staged { index: i, enc: std::mem::take(&mut encs[i]), prior, replaces });
        }
        Ok(staged)
    }

    /// Commits keys of `start_ts` at `commit_ts` (durable when it returns if `sync`). The
    /// change is visible and its locks are gone before the fsync starts, and the latches are
    /// not held across it: see `group_sync`.
    pub fn commit(&self, keys: &[Vec<u8>], start_ts: Timestamp, commit_ts: Timestamp, sync: bool) -> Result<()> {
        self.commit_unsynced(keys, start_ts, commit_ts)?;
        if sync {
            self.group.sync_blocking()?;
        }
        Ok(())
    }

    /// Returns once every commit that returned before the call is durable (group commit).
    pub async fn sync_commits(&self) -> Result<()> {
        self.group.sync().await
    }

    /// `commit` without waiting for durability: the caller waits with `sync_commits`
    /// before it tells anyone the transaction committed.
    pub fn commit_unsynced(&self, keys: &[Vec<u8>], start_ts: Timestamp, commit_ts: Timestamp) -> Result<()> {
        let _g = self.latches.acquire(self.commit_latched_keys(keys, start_ts));
        self.commit_latched(keys, start_ts, commit_ts)
    }

    /// The keys whose latches a commit of `keys` takes: the first alone when it is the
    /// transaction's primary and holds its lock (as `Transaction` sends them), else all of them, as
    /// any other command. `commit_latched` checks that lock again under the latch, so a primary
    /// rolled back in between fails the commit before anything is written. Every key a commit
    /// writes holds the transaction's lock until the write has landed, and nobody but the
    /// transaction changes a locked key: writers meet the lock and wait or back off, pruning passes
    /// locked keys by (`forget_deleted`), and whoever would end the transaction from outside — a
    /// resolver rolling back an expired lock (`check_txn_status` first, `resolve` only after it), a
    /// heartbeat — goes through the primary's latch, which the commit holds until its locks are
    /// gone. A bulk INSERT's commit, held across its table-file ingestion (fsyncs, manifest
    /// writes), then no longer keeps the other loaders of its table out of the slots its keys share
    /// with theirs (BENCHMARKS.md, session 39).
    fn commit_latched_keys<'k>(&self, keys: &'k [Vec<u8>], start_ts: Timestamp) -> &'k [Vec<u8>] {
        match keys.first() {
            Some(first) if self.locks.is_primary(first, start_ts) => &keys[..1],
            _ => keys,
        }
    }

    /// `commit_unsynced` if its latches are free now; None (nothing done) if one is held.
    pub fn try_commit_unsynced(
        &self,
        keys: &[Vec<u8>],
        start_ts: Timestamp,
        commit_ts: Timestamp,
    ) -> Option<Result<()>> {
        let _g = self.latches.try_acquire(self.commit_latched_keys(keys, start_ts))?;
        Some(self.commit_latched(keys, start_ts, commit_ts))
    }

    /// Whether `start_ts` holds a lock on `key` now.
    pub fn holds_lock(&self, key: &[u8], start_ts: Timestamp) -> bool {
        self.locks.get_if(key, |l| l.start_ts == start_ts).is_some()
    }

    fn commit_latched(&self, keys: &[Vec<u8>], start_ts: Timestamp, commit_ts: Timestamp) -> Result<()> {
        let mut changes = Changes::with_capacity(keys.len(), 2 * keys.len());
        // Read once per command: the feed's subscriber does not change under a commit.
        let sink = self.sink.read().clone();
        for key in keys {
            let enc = encode_user_key(key);
            match self.load_lock(key) {
                Some(h) if h.lock.start_ts == start_ts && h.lock.kind != Kind::Pessimistic => {
                    self.commit_key(&mut changes, sink.as_deref(), key, &enc, h, commit_ts)?;
                }
                Some(h) if h.lock.start_ts == start_ts => {
                    return Err(Error::internal("commit of a key that was locked but never prewritten"));
                }
                _ => match self.find_own_write(&enc, start_ts)? {
                    Some((_, w)) if w.kind != Kind::Rollback => {} // already committed
                    _ => return Err(Error::TxnRolledBack(start_ts)),
                },
            }
        }
        self.apply_commit(changes)
    }

    /// Commits Puts (of distinct keys) of the transaction `start_ts` at `commit_ts` in one
    /// step and without locks, if no key is locked and none has a version committed at or after `start_ts`
    /// (nor a rollback of `start_ts`): the checks a prewrite makes. Otherwise it writes
    /// nothing and returns false. No reader can meet a lock of it, so a reader at a
    /// timestamp past `commit_ts` could read a key before the write lands and again after:
    /// only for keys nobody reads until `commit_ts` is past (the entries of a non-unique
    /// index being built, which only its backfill and writers touch). A writer's prewrite
    /// after it sees its version, one before it its lock, and a writer's commit after a
    /// prewrite before it is newer, as `commit_ts` is taken before the call.
    pub fn commit_unread(
        &self,
        puts: Vec<(Vec<u8>, Vec<u8>)>,
        start_ts: Timestamp,
        commit_ts: Timestamp,
    ) -> Result<bool> {
        let _g = self.latches.acquire(puts.iter().map(|(k, _)| k));
        if puts.iter().any(|(key, _)| self.locks.contains(key)) {
            return Ok(false);
        }
        let encs: Vec<Vec<u8>> = puts.iter().map(|(key, _)| encode_user_key(key)).collect();
        let raws = self.latest_records_sparse(&encs.iter().map(Vec::as_slice).collect::<Vec<_>>())?;
        let mut checked = Vec::with_capacity(puts.len());
        for (enc, raw) in encs.into_iter().zip(raws) {
            // Each record read is kept for the write below (the command's own memory).
            match self.untouched_since(&enc, raw, start_ts, true)? {
                Some(prior) => checked.push((enc, prior)),
                None => return Ok(false),
            }
        }
        let mut changes = Changes::with_capacity(0, 2 * puts.len());
        let sink = self.sink.read().clone();
        let primary: Arc<[u8]> = Arc::from(&[][..]);
        for ((key, value), (enc, prior)) in puts.into_iter().zip(checked) {
            let lock = Lock {
                kind: Kind::Put,
                primary: primary.clone(),
                start_ts,
                ttl_ms: 0,
                for_update_ts: Timestamp::ZERO,
                short_value: Some(value),
            };
            self.commit_record(&mut changes, sink.as_deref(), &key, &enc, lock, prior, commit_ts)?;
        }
        self.apply_commit(changes)?;
        Ok(true)
    }

    /// Turns `key`'s prewrite lock `held` into a commit record at `commit_ts` (`commit_record`).
    fn commit_key(
        &self,
        changes: &mut Changes,
        sink: Option<&dyn ChangeSink>,
        key: &[u8],
        enc: &[u8],
        held: Held,
        commit_ts: Timestamp,
    ) -> Result<()> {
        changes.remove_lock(key, &held);
        self.commit_record(changes, sink, key, enc, held.lock, held.prior, commit_ts)
    }

    /// Writes the commit record at `commit_ts` of the prewritten mutation `l`, with its value
    /// (inside the record if short, in the data CF if not), moving the version it supersedes
    /// into the write CF (`prior`: the key's latest record, if known); and notes the change
    /// for the sink if it wants the key.
    #[allow(clippy::too_many_arguments)]
    fn commit_record(
        &self,
        changes: &mut Changes,
        sink: Option<&dyn ChangeSink>,
        key: &[u8],
        enc: &[u8],
        l: Lock,
        prior: Prior,
        commit_ts: Timestamp,
    ) -> Result<()> {
        if matches!(l.kind, Kind::Put | Kind::Delete) && sink.is_some_and(|s| s.wants(key)) {
            let value = match (l.kind, &l.short_value) {
                (Kind::Put, Some(v)) => Some(v.clone()),
                // A lock from disk whose long value is in the data CF already.
                (Kind::Put, None) => self.engine.get(Cf::Data, &versioned(enc, l.start_ts))?,
                _ => None,
            };
            changes.committed.push(CommittedChange { key: key.to_vec(), commit_ts, value });
        }
        if matches!(l.kind, Kind::Put | Kind::Delete) {
            // The version this one supersedes moves into the write CF if it has no twin
            // there (`records`). The latches keep its record as read until the batch lands;
            // a pessimistic lock read it already (`Prior`).
            let raw = match prior {
                Prior::Read(raw) => raw,
                Prior::Unknown => self.engine.get(Cf::Latest, enc)?.map(Arc::from),
            };
            if let Some(raw) = raw {
                if is_twinless(&raw) {
                    // Kept as a delta against the new value where that is much shorter
                    // (`records::delta_of`): an updated row's unchanged columns are not
                    // written a second time.
                    let (old_ts, old) = split_latest(&raw)?;
                    let delta = match (old.short_value, l.kind, l.short_value.as_deref()) {
                        (Some(o), Kind::Put, Some(n)) => delta_of(o, n),
                        _ => None,
                    };
                    let (value, base) = match delta {
                        Some(d) => (Some(d), Some(commit_ts)),
                        None => (old.short_value.map(<[u8]>::to_vec), None),
                    };
                    Self::put_version(changes, enc, old_ts, old.start_ts, Kind::Put, value, base);
                }
            }
            // The value inline whatever its length (a lock read from disk, written by an
            // older version, has its long value in the data CF already and no copy of it).
            let latest = latest_record(commit_ts, l.kind, l.start_ts, l.short_value.as_deref());
            changes.batch.put(Cf::Latest, enc.to_vec(), latest);
            if l.kind == Kind::Put {
                return Ok(()); // its latest record is its only copy until superseded
            }
        }
        if l.kind == Kind::Delete {
            self.prune.note_delete(enc, commit_ts);
        }
        Self::put_version(changes, enc, commit_ts, l.start_ts, l.kind, l.short_value, None);
        Ok(())
    }

    /// Writes a version's write-CF record, its value inline whatever its length (a Put
    /// without a value, written by an older version, has it in the data CF already), or
    /// its delta against the version committed at `delta_base`. A superseded row kept in
    /// its record costs one entry; in the data CF it cost two (record and value), and a
    /// third when GC deleted the value (`gc`).
    #[allow(clippy::too_many_arguments)]
    fn put_version(
        changes: &mut Changes,
        enc: &[u8],
        commit_ts: Timestamp,
        start_ts: Timestamp,
        kind: Kind,
        short_value: Option<Vec<u8>>,
        delta_base: Option<Timestamp>,
    ) {
        let w = Write { kind, start_ts, short_value, delta_base }.encode();
        changes.batch.put(Cf::Write, versioned(enc, commit_ts), w);
    }

    fn rollback_key(&self, changes: &mut Changes, key: &[u8], start_ts: Timestamp) -> Result<()> {
        let enc = encode_user_key(key);
        match self.load_lock(key) {
            Some(h) if h.lock.start_ts == start_ts => {
                changes.remove_lock(key, &h);
                if h.lock.kind == Kind::Pessimistic {
                    return Ok(()); // never prewritten: nothing can be committed later
                }
                if h.on_disk && h.lock.kind == Kind::Put && h.lock.short_value.is_none() {
                    changes.batch.delete(Cf::Data, versioned(&enc, start_ts));
                }
            }
            _ => {
                if let Some((_, w)) = self.find_own_write(&enc, start_ts)? {
                    if w.kind == Kind::Rollback {
                        return Ok(());
                    }
                    return Err(Error::internal("rollback of a committed transaction"));
                }
            }
        }
        let w = Write { kind: Kind::Rollback, start_ts, short_value: None, delta_base: None };
        changes.batch.put(Cf::Write, versioned(&enc, start_ts), w.encode());
        // Noted before the record is written: a lock command that misses the note cannot
        // run until the batch is applied, as the latches of the key are held.
        self.rolled_back_txns.write().insert(start_ts);
        Ok(())
    }

    /// Rolls back the locks of `start_ts` on `keys`.
    pub fn rollback(&self, keys: &[Vec<u8>], start_ts: Timestamp, sync: bool) -> Result<()> {
        let _g = self.latches.acquire(keys.iter());
        let mut changes = Changes::default();
        for key in keys {
            self.rollback_key(&mut changes, key, start_ts)?;
        }
        self.apply(changes, sync)
    }

    /// Keeps a live transaction's locks from expiring: the primary lock's TTL (counted from
    /// `start_ts`) becomes at least `ttl_ms`. False if the transaction holds no lock on
    /// `primary` any more (finished, or rolled back by someone who judged it dead).
    pub fn txn_heart_beat(&self, primary: &[u8], start_ts: Timestamp, ttl_ms: u64, sync: bool) -> Result<bool> {
        let _g = self.latches.acquire([primary]);
        match self.load_lock(primary) {
            Some(h) if h.lock.start_ts == start_ts => {
                if ttl_ms > h.lock.ttl_ms {
                    let mut changes = Changes::default();
                    let (on_disk, prior) = (h.on_disk, h.prior);
                    changes.put_lock(primary, Lock { ttl_ms, ..h.lock }, on_disk, prior);
                    self.apply(changes, sync)?;
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Percolator's status check on a primary key; rolls back an expired transaction.
    pub fn check_txn_status(
        &self,
        primary: &[u8],
        start_ts: Timestamp,
        current_ts: Timestamp,
        sync: bool,
    ) -> Result<TxnStatus> {
        let _g = self.latches.acquire([primary]);
        if let Some(h) = self.load_lock(primary) {
            if h.lock.start_ts == start_ts {
                let expires = start_ts.physical_ms() + h.lock.ttl_ms;
                let now = current_ts.physical_ms();
                if now < expires {
                    return Ok(TxnStatus::Locked { ttl_left_ms: expires - now });
                }
                let mut changes = Changes::default();
                self.rollback_key(&mut changes, primary, start_ts)?;
                self.apply(changes, sync)?;
                return Ok(TxnStatus::RolledBack);
            }
        }
        let enc = encode_user_key(primary);
        match self.find_own_write(&enc, start_ts)? {
            Some((_, w)) if w.kind == Kind::Rollback => Ok(TxnStatus::RolledBack),
            Some((commit_ts, _)) => Ok(TxnStatus::Committed(commit_ts)),
            None => {
                // Never saw the primary: make sure it can never commit.
                let mut changes = Changes::default();
                self.rollback_key(&mut changes, primary, start_ts)?;
                self.apply(changes, sync)?;
                Ok(TxnStatus::RolledBack)
            }
        }
    }

    /// Commits or rolls back the locks of `start_ts` on `keys` (lock resolution).
    pub fn resolve(
        &self,
        keys: &[Vec<u8>],
        start_ts: Timestamp,
        commit_ts: Option<Timestamp>,
        sync: bool,
    ) -> Result<()> {
        let _g = self.latches.acquire(keys.iter());
        let mut changes = Changes::default();
        let sink = self.sink.read().clone();
        for key in keys {
            let Some(h) = self.load_lock(key) else { continue };
            if h.lock.start_ts != start_ts {
                continue;
            }
            match commit_ts {
                Some(ts) if h.lock.kind != Kind::Pessimistic => {
                    self.commit_key(&mut changes, sink.as_deref(), key, &encode_user_key(key), h, ts)?;
                }
                _ => self.rollback_key(&mut changes, key, start_ts)?,
            }
        }
        self.apply(changes, sync)
    }

    /// Every lock in the store (for recovery at startup and for tests).
    pub fn all_locks(&self) -> Vec<(Vec<u8>, Lock)> {
        self.locks.all()
    }

    /// Forgets the locks in `[start, end)` (their range is being destroyed).
    pub(crate) fn forget_locks(&self, start: &[u8], end: &[u8]) {
        self.locks.remove_range(start, end);
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use strata_common::Timestamp;
    use strata_kv::{LockMode, Mutation, PrewriteRequest};
    use strata_storage::MemoryEngine;

    use super::MvccStore;

    fn store() -> MvccStore {
        MvccStore::open(Arc::new(MemoryEngine::new())).expect("open store")
    }

    /// Keys of three tables: three latch partitions, so no two share a latch.
    fn keys() -> Vec<Vec<u8>> {
        (1..4).map(|i| format!("t{i:08}_r0000").into_bytes()).collect()
    }

    fn prewrite(store: &MvccStore, mutations: Vec<Mutation>, start: u64) {
        let primary = mutations[0].key().to_vec();
        let n = mutations.len();
        let req = PrewriteRequest {
            mutations,
            primary,
            start_ts: Timestamp(start),
            ttl_ms: 3000,
            mode: LockMode::Optimistic,
            locked: vec![false; n],
        };
        store.prewrite(&req, false).expect("prewrite");
    }

    fn puts(keys: &[Vec<u8>], value: &[u8]) -> Vec<Mutation> {
        keys.iter().map(|k| Mutation::Put(k.clone(), value.to_vec())).collect()
    }

    /// A 200-byte row whose bytes `at` hold `n`, as an update of a fixed-width column.
    fn row(n: u8, at: usize) -> Vec<u8> {
        let mut v: Vec<u8> = (0..200u32).map(|i| (i % 97) as u8).collect();
        v[at] = n;
        v
    }

    #[test]
    fn superseded_rows_kept_as_deltas_read_back_at_every_version() {
        use strata_storage::Cf;
        let store = store();
        let keys = keys();
        let key = &keys[0];
        // Updates 1..=6 change a byte near the start, then one near the end; update 4 is a
        // row of another length (kept whole), update 5 deletes it, 6 brings it back.
        let versions: Vec<Option<Vec<u8>>> = vec![
            Some(row(1, 3)),
            Some(row(2, 3)),
            Some(row(3, 190)),
            Some(row(3, 190)[..150].to_vec()),
            None,
            Some(row(9, 100)),
            Some(row(10, 100)),
        ];
        for (i, v) in versions.iter().enumerate() {
            let start = 10 * (i as u64 + 1);
            let m = match v {
                Some(v) => Mutation::Put(key.clone(), v.clone()),
                None => Mutation::Delete(key.clone()),
            };
            prewrite(&store, vec![m], start);
            store.commit(std::slice::from_ref(key), Timestamp(start), Timestamp(start + 1), false).expect("commit");
        }
        for (i, v) in versions.iter().enumerate() {
            let at = Timestamp(10 * (i as u64 + 1) + 5);
            assert_eq!(store.get(key, at).expect("get"), *v, "version {i}");
            let scanned = store.scan(key, &[key.as_slice(), b"\xff"].concat(), at, 10).expect("scan");
            assert_eq!(scanned.first().map(|(_, v)| v.clone()), v.clone(), "scan of version {i}");
        }
        // Versions 0, 1 and 5 are deltas of a few bytes; 2 (a different length follows), 3
        // (a Delete follows) are whole.
        let enc = crate::records::encode_user_key(key);
        let record = |i: u64| {
            let raw =
                store.engine.get(Cf::Write, &crate::records::versioned(&enc, Timestamp(10 * i + 1))).expect("get");
            crate::records::Write::decode(&raw.expect("record")).expect("decode")
        };
        for (i, delta) in [(1, true), (2, true), (3, false), (4, false), (6, true)] {
            let w = record(i);
            assert_eq!(w.delta_base.is_some(), delta, "version {}", i - 1);
            if delta {
                assert!(w.short_value.expect("delta").len() < 20);
                assert_eq!(w.delta_base, Some(Timestamp(10 * (i + 1) + 1)));
            }
        }
        // GC below the second version keeps what every reader at or above it needs: the
        // first delta goes, the second and the bases above it stay.
        store.gc(Timestamp(25)).expect("gc");
        for (i, v) in versions.iter().enumerate().skip(1) {
            let at = Timestamp(10 * (i as u64 + 1) + 5);
            assert_eq!(store.get(key, at).expect("get"), *v, "version {i} after GC");
        }
    }

    #[test]
    fn a_commit_waits_only_for_its_primarys_latch() {
        let store = store();
        let keys = keys();
        prewrite(&store, puts(&keys, b"a"), 10);
        // A command holding a secondary's latch does not hold the commit up...
        let held = store.latches.acquire([&keys[2]]);
        assert!(matches!(store.try_commit_unsynced(&keys, Timestamp(10), Timestamp(11)), Some(Ok(()))));
        drop(held);
        for k in &keys {
            assert_eq!(store.get(k, Timestamp(12)).expect("get"), Some(b"a".to_vec()));
        }
        // ... one holding the primary's does.
        prewrite(&store, puts(&keys, b"b"), 20);
        let held = store.latches.acquire([&keys[0]]);
        assert!(store.try_commit_unsynced(&keys, Timestamp(20), Timestamp(21)).is_none());
        drop(held);
        assert!(matches!(store.try_commit_unsynced(&keys, Timestamp(20), Timestamp(21)), Some(Ok(()))));
        assert_eq!(store.get(&keys[1], Timestamp(22)).expect("get"), Some(b"b".to_vec()));
        // A transaction whose first key holds no lock of it (rolled back, here) takes every
        // key's latch, as any other command, and fails as before.
        prewrite(&store, puts(&keys, b"c"), 30);
        store.rollback(&keys[..1], Timestamp(30), false).expect("rollback");
        let held = store.latches.acquire([&keys[2]]);
        assert!(store.try_commit_unsynced(&keys, Timestamp(30), Timestamp(31)).is_none());
        drop(held);
        assert!(matches!(store.try_commit_unsynced(&keys, Timestamp(30), Timestamp(31)), Some(Err(_))));
    }

    #[test]
    fn pruning_passes_a_locked_key_by() {
        let store = store();
        let keys = keys();
        prewrite(&store, puts(&keys, b"a"), 10);
        store.commit(&keys, Timestamp(10), Timestamp(11), false).expect("commit");
        prewrite(&store, keys.iter().map(|k| Mutation::Delete(k.clone())).collect(), 20);
        store.commit(&keys, Timestamp(20), Timestamp(21), false).expect("commit");
        // The first key is locked (a commit of it may be under way, holding no latch of
        // it): its Delete stays; the others' go.
        prewrite(&store, puts(&keys[..1], b"b"), 30);
        assert_eq!(store.prune_deletes(Timestamp(25)).expect("prune"), 2);
        store.commit(&keys[..1], Timestamp(30), Timestamp(31), false).expect("commit");
        assert_eq!(store.get(&keys[0], Timestamp(32)).expect("get"), Some(b"b".to_vec()));
        assert_eq!(store.get(&keys[0], Timestamp(22)).expect("get"), None);
        assert_eq!(store.get(&keys[1], Timestamp(32)).expect("get"), None);
    }
}
