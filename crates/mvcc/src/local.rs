//! `LocalClient`: the embedded implementation of `kv::Client`, calling `MvccStore` in process.
//!
//! Write commands run on tokio's blocking pool when they may wait on key latches. Only
//! `commit` (and lock resolution) writes data to the engine; locks are held in memory
//! (`lock_table`). A commit writes without syncing, releases its locks, wakes their
//! waiters, and then waits for group commit's shared WAL fsync (`group_sync`) before it
//! returns. Reads run inline, and so do pessimistic locks, prewrites and commits of a few
//! keys whose latches are free (nothing they do waits for the disk): a hand-off to the
//! pool and back costs more than the command.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use strata_common::{Error, Result, Timestamp};
use strata_kv::metrics::GROUP_COMMIT;
use strata_kv::{Client, PessimisticLockRequest, PrewriteRequest, TxnStatus};
use tokio::time::Instant;

use crate::lock_manager::LockManager;
use crate::records::Kind;
use crate::store::MvccStore;
use crate::tso::LocalOracle;

/// The in-process KV client.
#[derive(Clone)]
pub struct LocalClient {
    store: Arc<MvccStore>,
    locks: Arc<LockManager>,
    /// Whether commits wait for the WAL fsync (true in production).
    sync: bool,
    /// The oracle of the transactions this client serves, for one-phase commits'
    /// timestamps (`with_oracle`); without it every commit has two phases.
    oracle: Option<Arc<LocalOracle>>,
}

/// Commands over at most this many keys may run inline (see the module docs); larger ones
/// would hold a runtime thread too long.
const INLINE_KEYS: usize = 64;

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| Error::internal(format!("storage task failed: {e}")))?
}

/// `blocking` for a commit's write, counted in `strata_mvcc_commit_offloaded_total`.
async fn offloaded<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    GROUP_COMMIT.offloaded.fetch_add(1, Ordering::Relaxed);
    blocking(f).await
}

impl LocalClient {
    /// A client over `store`; `sync` makes commits durable before they return.
    pub fn new(store: Arc<MvccStore>, sync: bool) -> LocalClient {
        LocalClient { store, locks: Arc::new(LockManager::default()), sync, oracle: None }
    }

    /// This client with one-phase commits, their timestamps from `oracle`: it must be the
    /// oracle of every transaction over the client (a commit timestamp from another would
    /// not order with theirs).
    pub fn with_oracle(mut self, oracle: Arc<LocalOracle>) -> LocalClient {
        self.oracle = Some(oracle);
        self
    }

    /// The store underneath.
    pub fn store(&self) -> &Arc<MvccStore> {
        &self.store
    }

    /// Startup recovery for the embedded node: no transaction survives a restart, so every
    /// lock left on disk (only older versions wrote locks there) is resolved now, committing it if its primary committed and
    /// rolling it back otherwise. Returns how many locks were resolved.
    pub fn recover_locks(&self) -> Result<usize> {
        let locks = self.store.all_locks();
        let n = locks.len();
        for (key, lock) in locks {
            let status = if lock.kind == Kind::Pessimistic {
                TxnStatus::RolledBack
            } else {
                // A current_ts of MAX treats every primary lock as expired.
                self.store.check_txn_status(&lock.primary, lock.start_ts, Timestamp::MAX, true)?
            };
            let commit_ts = match status {
                TxnStatus::Committed(ts) => Some(ts),
                _ => None,
            };
            self.store.resolve(&[key], lock.start_ts, commit_ts, true)?;
        }
        Ok(n)
    }
}

#[async_trait]
impl Client for LocalClient {
    async fn batch_get(&self, keys: &[Vec<u8>], ts: Timestamp) -> Result<Vec<Option<Vec<u8>>>> {
        self.store.batch_get(keys, ts)
    }

    async fn scan(&self, start: &[u8], end: &[u8], ts: Timestamp, limit: usize) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.store.scan(start, end, ts, limit)
    }

    async fn scan_once(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.store.scan_once(start, end, ts, limit)
    }

    async fn batch_get_checked(&self, keys: &[Vec<u8>], ts: Timestamp) -> Result<Vec<Option<Vec<u8>>>> {
        self.store.batch_get_checked(keys, ts)
    }

    async fn scan_checked(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        self.store.scan_checked(start, end, ts, limit)
    }

    async fn scan_for_lock(
        &self,
        start: &[u8],
        end: &[u8],
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<strata_kv::ScannedEntry>> {
        self.store.scan_for_lock(start, end, ts, limit)
    }

    async fn pessimistic_lock(&self, req: PessimisticLockRequest) -> Result<Vec<Option<Vec<u8>>>> {
        let deadline = req.wait_timeout_ms.map(|ms| Instant::now() + Duration::from_millis(ms));
        let req = Arc::new(req);
        // The key we last found locked, watched for its release (`lock_manager`). The
        // `Notified` future is enabled *before* each attempt, so a release that happens
        // between the attempt and the wait still wakes us.
        let mut watch: Option<crate::lock_manager::Watch<'_>> = None;
        loop {
            let mut notified = watch.as_ref().map(|w| Box::pin(w.notified()));
            if let Some(f) = notified.as_mut() {
                f.as_mut().enable();
            }
            let inline =
                if req.keys.len() <= INLINE_KEYS { self.store.try_pessimistic_lock(&req, false) } else { None };
            let outcome = match inline {
                Some(outcome) => outcome?,
                None => {
                    let (store, r) = (self.store.clone(), req.clone());
                    blocking(move || store.pessimistic_lock(&r, false)).await?
                }
            };
            let b = match outcome {
                Ok(values) => {
                    if let Some(w) = &watch {
                        w.settle(); // ours now: its release wakes the next waiter
                    }
                    return Ok(values);
                }
                Err(blocked) => blocked,
            };
            let Some(deadline) = deadline else { return Err(Error::LockWaitTimeout) };
            let same_key = watch.as_ref().is_some_and(|w| w.key() == b.key.as_slice());
            let Some(fut) = notified.filter(|_| same_key) else {
                // Newly blocked on this key: watch it, then try again before sleeping. A
                // wake taken on another key is passed on as that watch goes.
                watch = Some(self.locks.watch(&b.key));
                continue;
            };
            if let Some(w) = &watch {
                w.settle(); // held again: the holder's release wakes the queue
            }
            self.locks.start_wait(req.start_ts, b.holder)?;
            // KILL of the waiting statement ends the wait at once (nothing is locked yet).
            let waited =
                strata_common::cancel::or_cancelled(async { Ok(tokio::time::timeout_at(deadline, fut).await) }).await;
            self.locks.end_wait(req.start_ts);
            if let (Ok(Ok(())), Some(w)) = (&waited, &watch) {
                w.woke(); // ours to use or pass on
            }
            if waited?.is_err() {
                return Err(Error::LockWaitTimeout);
            }
        }
    }

    async fn prewrite(&self, req: Arc<PrewriteRequest>) -> Result<()> {
        if req.mutations.len() <= INLINE_KEYS {
            if let Some(done) = self.store.try_prewrite(&req, false) {
                return done;
            }
        }
        let store = self.store.clone();
        blocking(move || store.prewrite(&req, false)).await
    }

    async fn one_pc(&self, req: Arc<PrewriteRequest>) -> Result<Option<Timestamp>> {
        let Some(oracle) = self.oracle.clone() else { return Ok(None) };
        let started = Instant::now();
        let inline =
            if req.mutations.len() <= INLINE_KEYS { self.store.try_one_pc(&req, &|| oracle.next()) } else { None };
        let commit_ts = match inline {
            Some(done) => done?,
            None => {
                let (store, r) = (self.store.clone(), req.clone());
                offloaded(move || store.one_pc(&r, &|| oracle.next())).await?
            }
        };
        let Some(commit_ts) = commit_ts else { return Ok(None) };
        GROUP_COMMIT.write.observe(started.elapsed());
        self.locks.wake(req.mutations.iter().map(|m| m.key()));
        if self.sync {
            self.store.sync_commits().await?;
        }
        Ok(Some(commit_ts))
    }

    async fn commit(&self, keys: &[Vec<u8>], start_ts: Timestamp, commit_ts: Timestamp) -> Result<()> {
        // The write (memtable and WAL buffer, no fsync) runs inline when it is small and its
        // latches are free, like the lock commands; the fsync is group commit's, after the
        // locks are gone and their waiters woken.
        let started = Instant::now();
        let inline =
            if keys.len() <= INLINE_KEYS { self.store.try_commit_unsynced(keys, start_ts, commit_ts) } else { None };
        match inline {
            Some(done) => done?,
            None => {
                let (store, k) = (self.store.clone(), keys.to_vec());
                offloaded(move || store.commit_unsynced(&k, start_ts, commit_ts)).await?;
            }
        }
        GROUP_COMMIT.write.observe(started.elapsed());
        self.locks.wake(keys);
        if self.sync {
            self.store.sync_commits().await?;
        }
        Ok(())
    }

    async fn commit_unread(
        &self,
        puts: Vec<(Vec<u8>, Vec<u8>)>,
        start_ts: Timestamp,
        commit_ts: Timestamp,
    ) -> Result<bool> {
        let store = self.store.clone();
        let done = blocking(move || store.commit_unread(puts, start_ts, commit_ts)).await?;
        if done && self.sync {
            self.store.sync_commits().await?;
        }
        Ok(done)
    }

    async fn wait_for_lock(&self, key: &[u8], start_ts: Timestamp, max: Duration) -> Result<()> {
        if !self.store.holds_lock(key, start_ts) {
            return Ok(());
        }
        // Readers are all woken by a release (`lock_manager`): nothing to pass on.
        let watch = self.locks.watch_as_reader(key);
        let released = watch.notified();
        tokio::pin!(released);
        // Enabled before the second check, so a release between the two still wakes us.
        released.as_mut().enable();
        if !self.store.holds_lock(key, start_ts) {
            return Ok(());
        }
        let _ = tokio::time::timeout(max, released).await;
        Ok(())
    }

    async fn sync_commits(&self) -> Result<()> {
        self.store.sync_commits().await
    }

    async fn rollback(&self, keys: &[Vec<u8>], start_ts: Timestamp) -> Result<()> {
        let (store, k) = (self.store.clone(), keys.to_vec());
        blocking(move || store.rollback(&k, start_ts, false)).await?;
        self.locks.wake(keys);
        Ok(())
    }

    async fn check_txn_status(&self, primary: &[u8], start_ts: Timestamp, current_ts: Timestamp) -> Result<TxnStatus> {
        let (store, p) = (self.store.clone(), primary.to_vec());
        let status = blocking(move || store.check_txn_status(&p, start_ts, current_ts, false)).await?;
        if status == TxnStatus::RolledBack {
            self.locks.wake([primary]);
        }
        Ok(status)
    }

    async fn txn_heart_beat(&self, primary: &[u8], start_ts: Timestamp, ttl_ms: u64) -> Result<bool> {
        let (store, p) = (self.store.clone(), primary.to_vec());
        blocking(move || store.txn_heart_beat(&p, start_ts, ttl_ms, false)).await
    }

    async fn resolve_locks(&self, keys: &[Vec<u8>], start_ts: Timestamp, commit_ts: Option<Timestamp>) -> Result<()> {
        let (store, k, sync) = (self.store.clone(), keys.to_vec(), self.sync);
        blocking(move || store.resolve(&k, start_ts, commit_ts, sync)).await?;
        self.locks.wake(keys);
        Ok(())
    }

    async fn gc(&self, safe_point: Timestamp) -> Result<u64> {
        let store = self.store.clone();
        blocking(move || {
            store
                .gc_periodic(safe_point, crate::gc::FILTERED_WALK_INTERVAL)
                .map(|s| s.versions_removed + s.versions_compacted_away)
        })
        .await
    }

    async fn prune_deletes(&self, below: Timestamp) -> Result<u64> {
        let store = self.store.clone();
        blocking(move || store.prune_deletes(below)).await
    }

    async fn unsafe_destroy_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        let (store, start, end) = (self.store.clone(), start.to_vec(), end.to_vec());
        blocking(move || store.destroy_range(&start, &end)).await
    }

    async fn store_size(&self) -> Result<u64> {
        self.store.engine().size_bytes()
    }

    async fn sample_pieces(
        &self,
        start: &[u8],
        end: &[u8],
        n: usize,
        seed: u64,
    ) -> Result<Option<(Vec<strata_kv::KeyPiece>, u64)>> {
        self.store.sample_pieces(start, end, n, seed)
    }

    async fn check_locks(&self, start: &[u8], end: &[u8], ts: Timestamp) -> Result<()> {
        self.store.check_locks(start, end, ts)
    }

    async fn scan_changes(
        &self,
        start: &[u8],
        end: &[u8],
        after: Timestamp,
        ts: Timestamp,
        limit: usize,
    ) -> Result<Vec<strata_kv::CommittedChange>> {
        self.store.scan_changes(start, end, after, ts, limit)
    }

    fn subscribe(&self, sink: Arc<dyn strata_kv::ChangeSink>) -> Result<()> {
        self.store.subscribe(sink);
        Ok(())
    }
}
