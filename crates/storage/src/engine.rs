//! The `Engine` trait and its write batch.

use strata_common::Result;

/// Column families, as in Percolator (committed values, locks, and commit records), plus
/// the latest committed record of each key, so that reading the current value of a key,
/// or of a range of keys, never walks over old versions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cf {
    /// Values of large writes, keyed by `key ++ start_ts`.
    Data,
    /// Locks of in-flight transactions, keyed by `key`.
    Lock,
    /// Commit and rollback records, keyed by `key ++ commit_ts`.
    Write,
    /// Each key's newest commit record that put or deleted a value, keyed by `key` alone
    /// (its value starts with the commit timestamp).
    Latest,
    /// Local, non-transactional metadata (timestamp oracle high-water mark, GC safe point).
    Raw,
}

impl Cf {
    /// All column families.
    pub const ALL: [Cf; 5] = [Cf::Data, Cf::Lock, Cf::Write, Cf::Latest, Cf::Raw];

    /// The column family's name on disk.
    pub fn name(self) -> &'static str {
        match self {
            Cf::Data => "default",
            Cf::Lock => "lock",
            Cf::Write => "write",
            Cf::Latest => "latest",
            Cf::Raw => "raw",
        }
    }
}

/// One mutation in a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BatchOp {
    /// Set `key` to `value`.
    Put(Cf, Vec<u8>, Vec<u8>),
    /// Remove `key`.
    Delete(Cf, Vec<u8>),
}

/// Mutations applied atomically by `Engine::write`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WriteBatch {
    /// The mutations, in order.
    pub ops: Vec<BatchOp>,
}

impl WriteBatch {
    /// Adds a put.
    pub fn put(&mut self, cf: Cf, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(BatchOp::Put(cf, key, value));
    }

    /// Adds a delete.
    pub fn delete(&mut self, cf: Cf, key: Vec<u8>) {
        self.ops.push(BatchOp::Delete(cf, key));
    }

    /// Whether the batch has no mutations.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }
}

/// A positioned cursor over one column family, between the bounds it was opened with. It sees
/// the engine as of the moment it was created.
pub trait Cursor {
    /// Positions at the first key `>= key`.
    fn seek(&mut self, key: &[u8]);
    /// `seek`, returning how many dead entries (deletion markers, and the versions they or
    /// newer ones hide) it stepped over to get there, where the engine counts them (0
    /// where it does not): what a run of deleted keys costs a scan (mvcc's
    /// `empty_ranges`).
    fn seek_counting(&mut self, key: &[u8]) -> u64 {
        self.seek(key);
        0
    }
    /// Advances to the next key.
    fn next(&mut self);
    /// Whether the cursor is on an entry (an I/O failure is an error, not `false`).
    fn valid(&self) -> Result<bool>;
    /// The current key (only when valid).
    fn key(&self) -> &[u8];
    /// The current value (only when valid).
    fn value(&self) -> &[u8];
    /// Whether the cursor shows writes made after it was created (a resident table's,
    /// `storage_rocks::resident`) rather than a snapshot: each key as of the cursor's
    /// creation or later. A reader that looks in another cursor for what a record it saw
    /// here implies (the version a newer record moved into the write CF) must open that
    /// cursor after seeing the record.
    fn live(&self) -> bool {
        false
    }
    /// Whether the last seek or step gave up (not valid, not at the end) because it would
    /// have stepped over more deleted entries than the cursor's limit (`Engine::cursor_limited`).
    fn gave_up(&self) -> bool {
        false
    }
}

/// One compaction's decider (`CompactionFilter::start`): called with each entry's key and
/// value, in key order; `true` drops the entry.
pub type CompactionDecider = Box<dyn FnMut(&[u8], &[u8]) -> bool + Send>;

/// Decides, while an engine's background compaction rewrites a column family, which entries
/// to drop (`Engine::set_compaction_filter`): garbage removed as a side effect of work the
/// engine does anyway, instead of by a pass that reads everything. A compaction hands its
/// entries in key order, but only those of the files it rewrites: entries of the same keys
/// may sit in other files, so a decision may rely only on what this compaction has shown.
pub trait CompactionFilter: Send + Sync + 'static {
    /// The decider for one compaction.
    fn start(&self) -> CompactionDecider;
}

/// How many deletions `delete_each` writes per batch.
pub const CLEAR_BATCH: usize = 4096;

/// `Engine::clear_range` by deleting the range's keys one by one, `CLEAR_BATCH` to a batch,
/// then syncing the log; for engines whose own range deletion cannot serve.
pub fn delete_each<E: Engine + ?Sized>(engine: &E, cf: Cf, start: &[u8], end: &[u8]) -> Result<()> {
    if start >= end {
        return Ok(());
    }
    // One cursor for the whole range: it sees the range as it was when opened, and the
    // deletions written meanwhile only remove what it has already passed.
    let mut c = engine.cursor(cf, start, end)?;
    c.seek(start);
    loop {
        let mut batch = WriteBatch::default();
        while batch.ops.len() < CLEAR_BATCH && c.valid()? {
            batch.delete(cf, c.key().to_vec());
            c.next();
        }
        if batch.is_empty() {
            break;
        }
        engine.write(batch, false)?;
    }
    drop(c);
    engine.sync_wal()
}

/// An ordered key-value store with column families.
pub trait Engine: Send + Sync + 'static {
    /// Reads one key.
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Reads many keys, in the order given: one call for a command's keys, which an engine
    /// may serve faster than one `get` each (RocksDB's MultiGet probes each file's filter
    /// and index for the whole batch). Sorted keys are served best.
    fn multi_get(&self, cf: Cf, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        keys.iter().map(|k| self.get(cf, k)).collect()
    }
    /// Opens a cursor over `[lower, upper)`, positioned nowhere (call `seek`).
    fn cursor(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>>;
    /// A cursor like `cursor` for a range read once, end to end, by work of the server's own
    /// (an index backfill, ANALYZE's samples, a table check or copy): an engine that keeps
    /// often-scanned ranges in memory serves it from there if it does, but does not count it
    /// as a sign that the range is scanned often.
    fn cursor_once(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        self.cursor(cf, lower, upper)
    }
    /// A cursor like `cursor` that is a snapshot (sees the engine as of its creation) even
    /// where `cursor` gives a live one (`Cursor::live`).
    fn snapshot_cursor(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        self.cursor(cf, lower, upper)
    }
    /// A cursor like `cursor`, except that a seek or step that would step over more than
    /// `max_skips` deleted (or overwritten) entries stops and reports `gave_up`, so one cursor
    /// can serve many keys without ever walking a long run of deletions. Engines without
    /// deleted entries to skip give a plain cursor.
    fn cursor_limited(&self, cf: Cf, lower: &[u8], upper: &[u8], max_skips: u64) -> Result<Box<dyn Cursor + '_>> {
        let _ = max_skips;
        self.cursor(cf, lower, upper)
    }
    /// A cursor over the versions of one key: the entries `key ++ 8 bytes` (versioned keys,
    /// as the write CF holds them). Engines with per-file prefix filters skip the files that
    /// hold no version of `key`, so a point read does not search every level.
    fn versions_cursor(&self, cf: Cf, key: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        let mut upper = key.to_vec();
        upper.extend_from_slice(&[0xFF; 9]);
        self.cursor(cf, key, &upper)
    }
    /// Applies a batch atomically. With `sync`, it is durable (WAL fsynced) when this returns;
    /// concurrent synced writers share one fsync.
    fn write(&self, batch: WriteBatch, sync: bool) -> Result<()>;
    /// Applies a large batch of puts to one column family as a sorted table file added to
    /// the store whole (RocksDB's ingestion), bypassing the log, the memtable and the flushes
    /// and compactions the puts would otherwise pass through. The puts are newer than every
    /// earlier write, and when it returns they are durable, as is every write that returned
    /// before the call (one the puts may depend on). An engine that cannot or would rather
    /// not (an in-memory engine; a batch of deletes or of several column families; a store
    /// whose level 0 is backed up) hands the batch back, unapplied, for `write`; its order
    /// may have changed, never that of two puts of one key.
    fn ingest(&self, batch: WriteBatch) -> Result<Option<WriteBatch>> {
        Ok(Some(batch))
    }
    /// Removes every key of `cf` in `[start, end)` and makes that durable. Not atomic: a
    /// reader may see part of the range gone, so it is only for ranges nobody reads or
    /// writes any more (a dropped table's). The default deletes the keys one by one, in
    /// batches of `CLEAR_BATCH`.
    fn clear_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<()> {
        delete_each(self, cf, start, end)
    }
    /// Makes every write that returned before this call durable (fsyncs the WAL). Group
    /// commit (`mvcc::group_sync`) writes without `sync` and then calls this once for all
    /// the commits that wrote meanwhile.
    fn sync_wal(&self) -> Result<()>;
    /// Rewrites the files holding `[start, end)` so space that deletions freed there goes
    /// back to the file system now rather than when background compaction gets to it.
    fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<()>;
    /// Approximate bytes the engine holds: live table files plus memtables, all column
    /// families.
    fn size_bytes(&self) -> Result<u64>;
    /// Draws `n` offsets at random (`seed`) over the bytes `cf` holds in `[lower, upper)`
    /// and returns the pieces of the range they fell in, in key order, with the range's
    /// approximate size (`sample::sample_pieces`); None if the engine cannot tell where its
    /// bytes are without reading the range.
    fn sample_pieces(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
        n: usize,
        seed: u64,
    ) -> Result<Option<(Vec<crate::sample::Piece>, u64)>> {
        let _ = (cf, lower, upper, n, seed);
        Ok(None)
    }
    /// Runs `filter` over the entries of `cf` that compactions from now on rewrite. Returns
    /// false if the engine does not compact that column family (an in-memory engine, or a
    /// column family it runs no filter on): the caller removes its garbage some other way.
    fn set_compaction_filter(&self, cf: Cf, filter: std::sync::Arc<dyn CompactionFilter>) -> bool {
        let _ = (cf, filter);
        false
    }
}
