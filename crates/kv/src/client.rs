//! The transactional KV API (Percolator). Every call is batch-shaped: it carries many keys so
//! one round trip does real work when the store is remote.

use async_trait::async_trait;
use strata_common::{Result, Timestamp};

/// A write a transaction wants to make to one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mutation {
    /// Set the key.
    Put(Vec<u8>, Vec<u8>),
    /// Set a key that must have no value: the prewrite fails with `Error::AlreadyExists`
    /// if it has one (TiKV's Insert). An autocommit INSERT's new keys, which it checks this
    /// way instead of locking and reading them first.
    Insert(Vec<u8>, Vec<u8>),
    /// Delete the key.
    Delete(Vec<u8>),
    /// Lock the key without writing it (SELECT ... FOR UPDATE in optimistic mode).
    Lock(Vec<u8>),
}

impl Mutation {
    /// The key written.
    pub fn key(&self) -> &[u8] {
        match self {
            Mutation::Put(k, _) | Mutation::Insert(k, _) | Mutation::Delete(k) | Mutation::Lock(k) => k,
        }
    }

    /// The key written, without the value.
    pub fn into_key(self) -> Vec<u8> {
        match self {
            Mutation::Put(k, _) | Mutation::Insert(k, _) | Mutation::Delete(k) | Mutation::Lock(k) => k,
        }
    }
}

/// How a transaction detects conflicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Conflicts are found at prewrite (commit) time.
    Optimistic,
    /// Keys are locked as statements write them; prewrite checks the locks are still held.
    Pessimistic,
}

/// The first phase of two-phase commit.
#[derive(Clone, Debug)]
pub struct PrewriteRequest {
    /// Writes to lock and stage.
    pub mutations: Vec<Mutation>,
    /// The transaction's primary key (its commit point).
    pub primary: Vec<u8>,
    /// The transaction's start timestamp.
    pub start_ts: Timestamp,
    /// Lock time to live in milliseconds.
    pub ttl_ms: u64,
    /// Pessimistic transactions must already hold a pessimistic lock on the keys marked in
    /// `locked`; other keys (such as non-unique index entries) need no conflict check.
    pub mode: LockMode,
    /// For pessimistic mode: whether mutation i must hold this transaction's pessimistic lock.
    pub locked: Vec<bool>,
}

/// A request to take pessimistic locks, waiting for other holders.
#[derive(Clone, Debug)]
pub struct PessimisticLockRequest {
    /// Keys to lock.
    pub keys: Vec<Vec<u8>>,
    /// The transaction's primary key.
    pub primary: Vec<u8>,
    /// The transaction's start timestamp (its identity).
    pub start_ts: Timestamp,
    /// The statement's read timestamp: a commit newer than this is a write conflict.
    pub for_update_ts: Timestamp,
    /// Lock time to live in milliseconds.
    pub ttl_ms: u64,
    /// How long to wait for another transaction's lock; `None` fails at once.
    pub wait_timeout_ms: Option<u64>,
    /// What a locking scan read of these keys, if one did (`Client::scan_for_lock`): the
    /// store may take a record from here instead of reading the key again.
    pub seen: Option<Seen>,
}

/// The store's records of keys' latest committed versions as a scan at `ts` read them
/// (`Client::scan_for_lock`), handed back with the lock of those keys. Opaque above the
/// store; a store that sees the key was committed again since `ts` reads it instead.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// The scan's read timestamp.
    pub ts: Timestamp,
    /// Per key of the request, in order: the record read, if the scan has one to give.
    pub records: Vec<Option<Vec<u8>>>,
}

/// An entry of a locking scan: key, value, and the store's record of it to hand back with
/// the key's lock (`Seen`), when it has one.
pub type ScannedEntry = (Vec<u8>, Vec<u8>, Option<Vec<u8>>);

/// What `check_txn_status` found about a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TxnStatus {
    /// Committed at this timestamp.
    Committed(Timestamp),
    /// Rolled back (possibly just now, because its lock had expired).
    RolledBack,
    /// Still running; its primary lock lives for this many more milliseconds.
    Locked {
        /// Remaining time to live.
        ttl_left_ms: u64,
    },
}

/// The transactional KV API.
#[async_trait]
pub trait Client: Send + Sync + 'static {
    /// Reads keys at `ts`. Fails with `Error::KeyLocked` if a key has a lock from a
    /// transaction that started at or before `ts`.
    async fn batch_get(&self, keys: &[Vec<u8>], ts: Timestamp) -> Result<Vec<Option<Vec<u8>>>>;
    /// Reads up to `limit` entries of `[start, end)` at `ts`, in key order.
    async fn scan(&self, start: &[u8], end: &[u8], ts: Timestamp, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// [`scan`](Self::scan) of a range the server's own work reads once, end to end (an
    /// index backfill, ANALYZE, a table check or copy): a store that keeps often-scanned
    /// tables in memory does not count it as such a scan.
    async fn scan_once(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.scan(start, end, ts, limit).await
    }
    /// [`batch_get`](Self::batch_get) that also fails with `Error::WriteConflict` if a key
    /// has a version committed after `ts` (TiKV's RC check-ts read: a READ COMMITTED
    /// statement reading at a timestamp it did not fetch for itself learns that it must
    /// read again at a fresh one).
    async fn batch_get_checked(&self, keys: &[Vec<u8>], ts: Timestamp) -> Result<Vec<Option<Vec<u8>>>>;
    /// [`scan`](Self::scan) that also fails with `Error::WriteConflict` at a key committed
    /// after `ts` (up to the last entry returned).
    async fn scan_checked(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>>;
    /// [`scan`](Self::scan) for a statement that locks what it reads next: each entry comes
    /// with what the store read of it, for the lock request's `seen`. A store without such
    /// records gives none.
    async fn scan_for_lock(&self, start: &[u8], end: &[u8], ts: Timestamp, limit: usize) -> Result<Vec<ScannedEntry>> {
        Ok(self.scan(start, end, ts, limit).await?.into_iter().map(|(k, v)| (k, v, None)).collect())
    }
    /// Takes pessimistic locks; waits for holders up to the timeout, detecting deadlocks.
    /// Returns the keys' latest committed values (in request order), read in the same pass:
    /// once the keys are locked nothing can commit past them.
    async fn pessimistic_lock(&self, req: PessimisticLockRequest) -> Result<Vec<Option<Vec<u8>>>>;
    /// Prewrites mutations: checks for conflicts and leaves locks with the staged values.
    async fn prewrite(&self, req: std::sync::Arc<PrewriteRequest>) -> Result<()>;
    /// Prewrites and commits `req` in one command (one-phase commit) if this client can: a
    /// store in the process that also hands out the transaction's timestamps. Some(commit
    /// timestamp), durable when it returns; None when it did nothing and the caller should
    /// prewrite and commit. Fails as `prewrite` fails, before anything is written.
    async fn one_pc(&self, req: std::sync::Arc<PrewriteRequest>) -> Result<Option<Timestamp>> {
        let _ = req;
        Ok(None)
    }
    /// Commits keys prewritten by `start_ts` at `commit_ts`. Committing the primary key is the
    /// transaction's commit point. Durable when this returns (others may see the change and
    /// take its keys' locks a little earlier: group commit syncs after the locks go).
    async fn commit(&self, keys: &[Vec<u8>], start_ts: Timestamp, commit_ts: Timestamp) -> Result<()>;
    /// Commits Puts of distinct keys of the transaction `start_ts` at `commit_ts` in one
    /// step, without locks, if no key is locked or has a version committed at or after
    /// `start_ts`; false (nothing written) otherwise, or if the store cannot. Durable when
    /// it returns true. Readers never meet a lock of it: only for keys nobody reads until
    /// `commit_ts` is past (a non-unique index's entries while it is built), with
    /// `commit_ts` taken after `start_ts` and before the call.
    async fn commit_unread(
        &self,
        puts: Vec<(Vec<u8>, Vec<u8>)>,
        start_ts: Timestamp,
        commit_ts: Timestamp,
    ) -> Result<bool> {
        let _ = (puts, start_ts, commit_ts);
        Ok(false)
    }
    /// Waits until the lock `start_ts` holds on `key` is gone (committed, rolled back or
    /// resolved), at most `max`: what a reader does when the lock's transaction is alive,
    /// instead of sleeping out a fixed backoff.
    async fn wait_for_lock(&self, key: &[u8], start_ts: Timestamp, max: std::time::Duration) -> Result<()>;
    /// Returns once every commit that returned before the call is durable. A change can be
    /// read before its commit is (see `commit`); what copies such a read to disk outside
    /// the store (a columnar replica's file) calls this first.
    async fn sync_commits(&self) -> Result<()>;
    /// Rolls back the locks of `start_ts` on `keys`, leaving a record that stops a late
    /// prewrite from succeeding.
    async fn rollback(&self, keys: &[Vec<u8>], start_ts: Timestamp) -> Result<()>;
    /// Finds out whether the transaction whose primary is `primary` committed; rolls it back
    /// if its lock expired (as judged at `current_ts`).
    async fn check_txn_status(&self, primary: &[u8], start_ts: Timestamp, current_ts: Timestamp) -> Result<TxnStatus>;
    /// Extends the TTL of the lock `start_ts` holds on `primary` to at least `ttl_ms` (counted
    /// from `start_ts`); false if there is no such lock any more.
    async fn txn_heart_beat(&self, primary: &[u8], start_ts: Timestamp, ttl_ms: u64) -> Result<bool>;
    /// Commits (`Some`) or rolls back (`None`) every lock of `start_ts` on `keys`.
    async fn resolve_locks(&self, keys: &[Vec<u8>], start_ts: Timestamp, commit_ts: Option<Timestamp>) -> Result<()>;
    /// Garbage-collects versions no reader at or above `safe_point` can see; returns how
    /// many it removed.
    async fn gc(&self, safe_point: Timestamp) -> Result<u64>;
    /// Lets the store forget deletions committed below `below` from its current-version
    /// index, so scans stop stepping over them: the caller knows no running reader is
    /// below `below` (a reader that is stays correct, only slower). Returns how many
    /// deletions it forgot.
    async fn prune_deletes(&self, below: Timestamp) -> Result<u64> {
        let _ = below;
        Ok(0)
    }
    /// Removes every version and lock of the keys in `[start, end)` at once, outside MVCC,
    /// and gives their space back (TiKV's UnsafeDestroyRange). Only for ranges nobody can
    /// reach any more: the caller has seen the GC safe point pass the change that orphaned
    /// the range.
    async fn unsafe_destroy_range(&self, start: &[u8], end: &[u8]) -> Result<()>;
    /// Approximate bytes the store holds on disk and in memory.
    async fn store_size(&self) -> Result<u64>;
    /// Draws `n` byte offsets at random (`seed`) over what the store holds of the current
    /// versions of `[start, end)` and returns the pieces of the range they fell in, in key
    /// order, and the range's approximate bytes, without reading the rows between: where
    /// a sampled ANALYZE reads. A piece may start at a deleted key. None if the store
    /// cannot tell where its bytes are without reading the range.
    async fn sample_pieces(
        &self,
        start: &[u8],
        end: &[u8],
        n: usize,
        seed: u64,
    ) -> Result<Option<(Vec<KeyPiece>, u64)>> {
        let _ = (start, end, n, seed);
        Ok(None)
    }
    /// Fails with `Error::KeyLocked` if a key of `[start, end)` has a lock that blocks a
    /// read at `ts` (what `scan` would fail with), without reading any value: a reader of a
    /// copy kept current by `subscribe` checks this first, then reads its copy.
    async fn check_locks(&self, start: &[u8], end: &[u8], ts: Timestamp) -> Result<()> {
        self.scan(start, end, ts, 0).await.map(|_| ())
    }
    /// The keys of `[start, end)` whose newest version at or below `ts` was committed after
    /// `after` (at most `limit`, in key order), each with that version: how a copy of the
    /// range taken at `after` catches up to `ts` (a columnar replica after a restart).
    /// Fails with `Error::KeyLocked` like `scan`. Only exact while the GC safe point is at
    /// or below `after`. A store that cannot list changes says so.
    async fn scan_changes(
        &self,
        start: &[u8],
        end: &[u8],
        after: Timestamp,
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<CommittedChange>> {
        let _ = (start, end, after, ts, limit);
        Err(strata_common::Error::internal("this store does not list changes"))
    }
    /// Hands every change committed from now on to `sink` (see `ChangeSink`). A store that
    /// cannot feed changes says so.
    fn subscribe(&self, sink: std::sync::Arc<dyn ChangeSink>) -> Result<()> {
        let _ = sink;
        Err(strata_common::Error::internal("this store does not feed committed changes"))
    }
}

/// A piece of a key range a sample fell in (`Client::sample_pieces`): its keys are
/// `[start, end)`, about `bytes` of them in the store, `hits` of the drawn offsets in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyPiece {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub bytes: u64,
    pub hits: u32,
}

/// One committed change to a key, as a change feed delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommittedChange {
    /// The user key.
    pub key: Vec<u8>,
    /// The commit timestamp.
    pub commit_ts: Timestamp,
    /// The new value; `None` for a deletion.
    pub value: Option<Vec<u8>>,
}

/// Receives the committed changes of the keys it wants, as the store applies them: the feed
/// that keeps a columnar replica current. The embedded store calls it from each commit; a
/// cluster's Raft learner will call it as it applies the log.
///
/// Ordering contract (what makes a replica read snapshot-consistent): `committed` runs
/// after the changes are in the store and before their locks are released. So a reader at
/// `ts` that finds no blocking lock (`Client::check_locks`) and then reads its copy has
/// been handed every change committed at or below `ts`.
pub trait ChangeSink: Send + Sync + 'static {
    /// Whether changes to `key` are wanted (cheap: asked for every committed key).
    fn wants(&self, key: &[u8]) -> bool;
    /// The wanted changes of one atomic write.
    fn committed(&self, changes: Vec<CommittedChange>);
}

/// The timestamp oracle: strictly increasing timestamps, the only source of MVCC order.
#[async_trait]
pub trait Oracle: Send + Sync + 'static {
    /// A new timestamp, larger than every one handed out before (also across restarts).
    async fn get_ts(&self) -> Result<Timestamp>;
}
