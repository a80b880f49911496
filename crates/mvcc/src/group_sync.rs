//! Group commit: one WAL fsync for every commit that finished its write while the previous
//! fsync ran.
//!
//! A commit writes its batch without syncing (the change is then visible and its locks are
//! gone), and only then waits here for durability, so no latch or lock is held across the
//! fsync: a transaction waiting for one of its keys goes ahead as soon as the write is in
//! the memtable, as InnoDB releases row locks before its log flush. The commit's client is
//! answered only after the fsync, so an acknowledged commit survives a crash.
//!
//! One thread does the fsyncs. A waiter sends a reply slot after its write returned; the
//! thread takes every slot queued when it wakes, syncs the WAL once (RocksDB's SyncWAL:
//! everything written before the call), and answers them all. Slots that arrive during the
//! fsync wait for the next one: their writes may have come after it started.
//!
//! Work that follows a commit reads its changes before they are durable (another
//! transaction, a columnar replica's feed). A later durable commit syncs the log up to its
//! own record and so everything it could have read; what reaches disk some other way (a
//! replica's file) calls [`GroupSync::sync`] first.

use std::sync::mpsc;
use std::sync::{Arc, Weak};
use std::time::Instant;

use parking_lot::Mutex;
use strata_common::{Error, Result};
use strata_kv::metrics::GROUP_COMMIT as METRICS;
use strata_storage::Engine;
use tokio::sync::oneshot;

/// A waiter: when it asked, and where the answer goes (when its fsync ended, or the error).
type Slot = (Instant, oneshot::Sender<Result<Instant>>);

/// The group-commit thread's queue.
pub struct GroupSync {
    queue: Mutex<mpsc::Sender<Slot>>,
}

impl GroupSync {
    /// Starts the fsync thread for `engine`. The thread holds the engine only while it
    /// syncs, and ends once the `GroupSync` is dropped.
    pub fn start(engine: &Arc<dyn Engine>) -> Result<GroupSync> {
        let (tx, rx) = mpsc::channel::<Slot>();
        let engine = Arc::downgrade(engine);
        std::thread::Builder::new()
            .name("strata-wal-sync".into())
            .spawn(move || {
                // 100 µs, or `STRATA_SYNC_SLICE_US` (0: the kernel's slice).
                strata_common::sched::request_slice_from_env("STRATA_SYNC_SLICE_US", 100);
                run(engine, rx)
            })
            .map_err(|e| Error::Io(format!("cannot start the WAL sync thread: {e}")))?;
        Ok(GroupSync { queue: Mutex::new(tx) })
    }

    fn enqueue(&self, asked: Instant) -> Result<oneshot::Receiver<Result<Instant>>> {
        let (tx, rx) = oneshot::channel();
        self.queue.lock().send((asked, tx)).map_err(|_| Error::Io("the WAL sync thread has stopped".into()))?;
        Ok(rx)
    }

    /// Returns once every write that returned before this call is durable.
    pub async fn sync(&self) -> Result<()> {
        let started = Instant::now();
        let rx = self.enqueue(started)?;
        let done = rx.await.map_err(|_| Error::Io("the WAL sync thread has stopped".into()))?;
        METRICS.wait.observe(started.elapsed());
        METRICS.resumed.observe(done?.elapsed());
        Ok(())
    }

    /// `sync` for a caller off the async runtime (a blocking-pool thread).
    pub fn sync_blocking(&self) -> Result<()> {
        let rx = self.enqueue(Instant::now())?;
        rx.blocking_recv().map_err(|_| Error::Io("the WAL sync thread has stopped".into()))?.map(|_| ())
    }
}

fn run(engine: Weak<dyn Engine>, rx: mpsc::Receiver<Slot>) {
    // Ends when every sender is gone (the store was dropped).
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        batch.extend(rx.try_iter());
        let started = Instant::now();
        for (asked, _) in &batch {
            METRICS.queued.observe(started.saturating_duration_since(*asked));
        }
        let done = match engine.upgrade() {
            Some(e) => e.sync_wal(),
            None => Err(Error::Io("the store is closed".into())),
        };
        let ended = Instant::now();
        METRICS.fsync.observe(ended - started);
        if let Err(e) = &done {
            tracing::error!("WAL fsync failed: {e}");
        }
        METRICS.waiters.fetch_add(batch.len() as u64, std::sync::atomic::Ordering::Relaxed);
        for (_, slot) in batch {
            let _ = slot.send(done.clone().map(|()| ended));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};
    use strata_storage::{Cf, Cursor, MemoryEngine, WriteBatch};

    /// Counts fsyncs, each taking a while, so waiters pile up behind one.
    struct Slow {
        inner: MemoryEngine,
        syncs: AtomicU64,
    }

    impl Engine for Slow {
        fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
            self.inner.get(cf, key)
        }
        fn cursor(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
            self.inner.cursor(cf, lower, upper)
        }
        fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
            self.inner.write(batch, sync)
        }
        fn sync_wal(&self) -> Result<()> {
            std::thread::sleep(std::time::Duration::from_millis(100));
            self.syncs.fetch_add(1, Ordering::SeqCst);
            Ok(())
        }
        fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<()> {
            self.inner.compact_range(cf, start, end)
        }
        fn size_bytes(&self) -> Result<u64> {
            self.inner.size_bytes()
        }
    }

    #[test]
    fn concurrent_waiters_share_fsyncs() {
        let slow = Arc::new(Slow { inner: MemoryEngine::default(), syncs: AtomicU64::new(0) });
        let engine: Arc<dyn Engine> = slow.clone();
        let sync = Arc::new(GroupSync::start(&engine).expect("start"));
        let threads: Vec<_> = (0..16)
            .map(|_| {
                let s = sync.clone();
                std::thread::spawn(move || s.sync_blocking())
            })
            .collect();
        for t in threads {
            t.join().expect("join").expect("synced");
        }
        let n = slow.syncs.load(Ordering::SeqCst);
        // Each waiter is answered by an fsync that began after it asked: at least one, and
        // with 16 arriving within one 100 ms fsync, far fewer than 16.
        assert!((1..16).contains(&n), "16 waiters took {n} fsyncs");
    }

    #[test]
    fn a_waiter_is_answered_by_an_fsync_that_started_after_it_asked() {
        let slow = Arc::new(Slow { inner: MemoryEngine::default(), syncs: AtomicU64::new(0) });
        let engine: Arc<dyn Engine> = slow.clone();
        let sync = GroupSync::start(&engine).expect("start");
        for i in 1..=3 {
            sync.sync_blocking().expect("synced");
            assert_eq!(slow.syncs.load(Ordering::SeqCst), i, "one fsync per lone waiter");
        }
    }

    #[tokio::test]
    async fn a_wait_is_split_into_queued_fsync_and_resumed() {
        let slow = Arc::new(Slow { inner: MemoryEngine::default(), syncs: AtomicU64::new(0) });
        let engine: Arc<dyn Engine> = slow.clone();
        let sync = GroupSync::start(&engine).expect("start");
        // The histograms are the process's: other tests may add to them meanwhile.
        let (queued, resumed, waited) = (METRICS.queued.count(), METRICS.resumed.count(), METRICS.wait.sum());
        sync.sync().await.expect("synced");
        assert!(METRICS.queued.count() > queued, "the wait before the fsync is recorded");
        assert!(METRICS.resumed.count() > resumed, "the wait after the fsync is recorded");
        // The 100-ms fsync lies between the two parts: the whole wait covers it.
        assert!(METRICS.wait.sum() - waited >= std::time::Duration::from_millis(100));
    }

    #[test]
    fn a_closed_store_fails_the_wait() {
        let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::default());
        let sync = GroupSync::start(&engine).expect("start");
        drop(engine);
        assert!(sync.sync_blocking().is_err());
    }
}
