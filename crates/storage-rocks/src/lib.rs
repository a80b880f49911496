//! The RocksDB implementation of `storage::Engine`: one column family per `Cf`, pipelined
//! writes, no compression of current rows (the latest CF), LZ4 below the two top levels of
//! the other column families. Commits write unsynced and then share a WAL fsync
//! (`Engine::sync_wal`) through `mvcc::group_sync`; other synced writes go through
//! RocksDB's write groups.
//!
//! Point reads: the write CF's keys are `key ++ 8-byte timestamp`, and its prefix
//! extractor drops the timestamp, so each table file carries a Bloom filter of the user
//! keys it holds. A versions cursor (`Engine::versions_cursor`) seeks in prefix mode and
//! skips the files whose filter rules the key out, instead of binary-searching the index
//! of a file in every level; range cursors seek in total order and ignore the filters.
//! The data and latest CFs are read by whole key, so their filters are of whole keys. One LRU block cache
//! serves all column families; the latest CF's point reads go through a cache of its
//! records first (`record_cache`).

use sst_writer::CachedSstWriter;
use std::ffi::CStr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

mod ingest_group;
mod record_cache;
mod resident;
mod sst_writer;
mod table_partitioner;

use record_cache::{Lookup, RecordCache};
pub use resident::UnitOf;
use resident::{Resident, ResidentCursor};
use rocksdb::{
    properties, BlockBasedOptions, BottommostLevelCompaction, Cache, ColumnFamilyDescriptor, CompactOptions,
    DBCompressionType, DBRawIterator, DataBlockIndexType, FlushOptions, IngestExternalFileOptions, Options,
    ReadOptions, SliceTransform, WriteOptions, DB,
};
use strata_common::{Error, Result};
use strata_storage::engine::BatchOp;
use strata_storage::{Cf, CompactionFilter, Cursor, Engine, WriteBatch};

/// Runs `f` on this thread and returns, with its result, how many deleted entries RocksDB
/// stepped over meanwhile (its per-thread perf context). Tests use it to hold a read path to
/// a bounded amount of tombstone walking: the lock CF keeps a deletion for every key ever
/// committed, and a cursor that moves across them costs time in proportion.
pub fn deleted_entries_skipped<T>(f: impl FnOnce() -> T) -> (T, u64) {
    use rocksdb::perf::PerfMetric;
    counting(|p| {
        let before = p.ctx.metric(PerfMetric::InternalDeleteSkippedCount);
        let out = f();
        (out, p.ctx.metric(PerfMetric::InternalDeleteSkippedCount).wrapping_sub(before))
    })
}

/// Capacity of the block cache all column families share when the caller names none
/// (`open`; the server sizes it by `--block-cache-size`). Uncompressed blocks; memory is
/// taken as blocks are read, not up front.
pub const DEFAULT_BLOCK_CACHE_BYTES: usize = 512 << 20;

/// The smallest block cache `open_with` makes.
const MIN_BLOCK_CACHE_BYTES: usize = 8 << 20;
/// The latest CF's record cache's share of the block cache budget (one part in this many).
const RECORD_CACHE_SHARE: usize = 4;
/// The resident tables' budget, as a part of the block cache budget (on top of it).
const RESIDENT_SHARE: usize = 4;

/// Bloom filter bits per key (about 1% false positives).
const BLOOM_BITS_PER_KEY: f64 = 10.0;

/// Memtable size of the latest CF. Its keys are overwritten in place, and a memtable keeps
/// every overwritten entry until it is flushed, so a scan over often-updated keys steps
/// over their hidden entries: with the 64 MiB default, sysbench oltp_read_write fell from
/// 756 to 566 TPS within a minute; with 4-8 MiB it stays flat (BENCHMARKS.md).
const LATEST_WRITE_BUFFER_BYTES: usize = 8 << 20;

/// Memtable size of the write CF (superseded versions), a quarter of RocksDB's 64 MiB. A
/// memtable insert walks the skiplist from the top, and the bottom levels of a 64 MiB one
/// miss the CPU's caches: under 8-thread TPC-C (two of them per updated row: the latest
/// record and the superseded version) the skiplist search was 6.2% of the server's samples,
/// 4.2% with this CF's memtable at 8 MiB; server CPU per transaction was lower with 8 or
/// 16 MiB in 7 of 9 interleaved pairs, by ~5% on average (BENCHMARKS.md, session 51).
const WRITE_WRITE_BUFFER_BYTES: usize = 16 << 20;

/// Memtable size of the latest CF while bulk commits arrive (a load): the ordinary path's
/// writes of a load (the commits `ingest` hands back) touch every table, so each flushed
/// memtable spans the whole key space and its compaction rewrites every base-level file it
/// overlaps. With 8 MiB memtables a 4-warehouse TPC-C load spent 28% of its CPU in such
/// compactions; with 64 MiB it ran none and used a fifth less CPU (BENCHMARKS.md, session 33).
/// Not kept afterwards: see `LATEST_WRITE_BUFFER_BYTES`.
const LOAD_WRITE_BUFFER_BYTES: usize = 64 << 20;

/// How long after the last bulk commit the latest CF's memtable goes back to
/// `LATEST_WRITE_BUFFER_BYTES` (and the large one is flushed).
const LOAD_QUIET: Duration = Duration::from_secs(5);

/// The latest CF's base level (where level 0 is compacted to) holds this many memtables'
/// worth (level 0's size when it is compacted, as RocksDB's tuning guide advises) in files
/// of a memtable each (RocksDB's 64 MiB would make one file of it). Every level-0 file spans
/// the hot keys of the whole key space, so a level-0 compaction rewrites the entire base
/// level: with RocksDB's 256 MiB base the base level grew through a TPC-C run, holding
/// every row updated since the start, and was rewritten whole every ten seconds (2 s of
/// compaction, invalidating every cached block and row of it); New-Orders per minute fell
/// by a fifth within seven minutes. Sized by the memtable, it stays small and moves into
/// the levels below a file at a time (BENCHMARKS.md, session 44).
const LATEST_BASE_LEVEL_MEMTABLES: usize = 4;

/// The latest CF's sizes for memtables of `memtable` bytes: the memtable, its base level
/// and its files, set at open and by `size_latest_memtable`.
struct LatestSizes {
    memtable: usize,
    base_level: usize,
    file: usize,
}

impl LatestSizes {
    fn for_memtable(memtable: usize) -> LatestSizes {
        LatestSizes { memtable, base_level: memtable * LATEST_BASE_LEVEL_MEMTABLES, file: memtable }
    }

    fn set(&self, o: &mut Options) {
        o.set_write_buffer_size(self.memtable);
        o.set_max_bytes_for_level_base(self.base_level as u64);
        o.set_target_file_size_base(self.file as u64);
    }

    /// The same as RocksDB's option names and values, for `SetOptions`.
    fn named(&self) -> [(&'static str, String); 3] {
        [
            ("write_buffer_size", self.memtable.to_string()),
            ("max_bytes_for_level_base", self.base_level.to_string()),
            ("target_file_size_base", self.file.to_string()),
        ]
    }
}

/// Level-0 files of the latest CF that start a compaction into level 1. Every level-0
/// file is one more sorted run a range scan merges and steps through (each holds its own
/// entry of every hot key): at 8, sysbench oltp_read_write ran 2-21% slower than at 4 in
/// all of 6 interleaved pairs, the sysbench and 4-warehouse TPC-C loads were no faster, and
/// the first minute of TPC-C after a load sometimes went to compactions (BENCHMARKS.md,
/// session 31). RocksDB's default, kept explicit.
const LATEST_L0_COMPACTION_TRIGGER: i32 = 4;

/// Compression by LSM level of the write, data, lock and raw CFs: none for the two levels
/// every write passes through (a flush writes level 0, and level 0 is compacted into level 1
/// soon after), LZ4 below, where the data stays. Compressing level 0 took a tenth of the
/// server's CPU during bulk loads (TiKV's defaults are the same for the upper levels).
const COMPRESSION_PER_LEVEL: [DBCompressionType; 7] = [
    DBCompressionType::None,
    DBCompressionType::None,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
    DBCompressionType::Lz4,
];

/// The latest CF's compression: none at any level, as InnoDB stores its pages. The latest
/// CF holds every table's current rows, which an OLTP workload updates all over the key
/// space, so its compactions rewrite them again and again: under TPC-C, compressing them
/// and decompressing them again (compaction inputs, block-cache misses) were 6.5% of the
/// server's instructions, for a quarter less disk (a 4-warehouse load: 706 MB instead of
/// 525 MB). `STRATA_ROCKSDB_OPTIONS=latest.compression_per_level=...` turns LZ4 back on
/// for files written from then on (BENCHMARKS.md, session 50).
const LATEST_COMPRESSION: [DBCompressionType; 7] = [DBCompressionType::None; 7];

/// WAL kept before RocksDB flushes the column families that pin its oldest file.
const MAX_TOTAL_WAL_BYTES: u64 = 256 << 20;

/// Length of the timestamp suffix of a versioned key.
const TS_LEN: usize = 8;

/// The prefix extractor of versioned keys: the key without its timestamp. Encoded user
/// keys are prefix-free, so the keys sharing a prefix are contiguous, as RocksDB requires.
fn versioned_prefix() -> SliceTransform {
    SliceTransform::create("strata.versioned_key", |k| &k[..k.len().saturating_sub(TS_LEN)], Some(|k| k.len() > TS_LEN))
}

/// Options of a column family read mostly by point gets (`Engine::get`): a bloom filter
/// over the memtable's whole keys, so a get of a key the memtable does not hold (most keys:
/// they live in the files) skips the memtable's skiplist search, which was 5% of the
/// server's CPU under TPC-C.
fn point_reads(o: &mut Options) {
    o.set_memtable_whole_key_filtering(true);
    o.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO);
}

/// The share of a memtable's size given to its bloom filter.
const MEMTABLE_BLOOM_RATIO: f64 = 0.05;

/// Level-0 files of a column family at which `Engine::ingest` hands batches back for the
/// log and memtable. An ingested file whose keys overlap a level-0 file (or the memtable,
/// which is then flushed into one) lands in level 0 itself, and a store that keeps taking
/// such files would pile up level-0 files faster than compactions merge them; below this,
/// compactions keep up (the trigger is 4).
const INGEST_MAX_L0_FILES: u64 = 8;

/// The directory, inside the database's, where `Engine::ingest` writes its table files
/// before RocksDB links them in. A file is written there with its pages kept in the page
/// cache (`sst_writer`), so the statements after a load find it in memory and nothing is
/// copied. Emptied at open: a file left there was never ingested.
const INGEST_DIR: &str = "ingest";

/// A RocksDB database opened for Strata.
pub struct RocksEngine {
    /// Shared with the thread that loads resident tables (`resident`).
    db: Arc<DB>,
    /// The filter the write CF's compactions run (`Engine::set_compaction_filter`).
    write_filter: FilterSlot,
    /// Each column family's options, for the table files `ingest` writes (the same table
    /// format, filters and compression as the column family's own files).
    cf_options: Vec<(Cf, Options)>,
    /// Where `ingest` writes its files, and the number of the next one.
    /// `INGEST_DIR` in the data directory.
    ingest_dir: PathBuf,
    ingest_seq: AtomicU64,
    load: LoadMode,
    /// The latest CF's records (see `record_cache`).
    records: RecordCache,
    /// Often-scanned tables' latest records in key order (see `resident`), and the thread
    /// that loads them.
    resident: Arc<Resident>,
    resident_budget: usize,
    loader: parking_lot::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Bulk commits' table files waiting to be taken in together (`ingest_group`).
    ingests: ingest_group::IngestGroups,
}

impl Drop for RocksEngine {
    fn drop(&mut self) {
        // The loader holds the database open: it stops before the database closes.
        self.resident.close();
        if let Some(h) = self.loader.lock().take() {
            let _ = h.join();
        }
    }
}

/// Whether bulk commits are arriving, which sizes the latest CF's memtable
/// (`LOAD_WRITE_BUFFER_BYTES`).
struct LoadMode {
    opened: Instant,
    /// Milliseconds after `opened` of the last bulk commit.
    last_bulk_ms: AtomicU64,
    on: AtomicBool,
}

impl LoadMode {
    fn new() -> LoadMode {
        LoadMode { opened: Instant::now(), last_bulk_ms: AtomicU64::new(0), on: AtomicBool::new(false) }
    }

    fn now_ms(&self) -> u64 {
        self.opened.elapsed().as_millis() as u64
    }

    /// Notes a bulk commit at `now_ms`; true if that starts a load.
    fn bulk_commit(&self, now_ms: u64) -> bool {
        self.last_bulk_ms.fetch_max(now_ms, Ordering::Relaxed);
        !self.on.load(Ordering::Relaxed) && !self.on.swap(true, Ordering::AcqRel)
    }

    /// True once (for the caller that ends it) if a load is on and no bulk commit came in
    /// the `LOAD_QUIET` before `now_ms()` (asked only while a load is on: every ordinary
    /// write asks).
    fn quiet(&self, now_ms: impl FnOnce() -> u64) -> bool {
        self.on.load(Ordering::Relaxed)
            && now_ms().saturating_sub(self.last_bulk_ms.load(Ordering::Relaxed)) >= LOAD_QUIET.as_millis() as u64
            && self.on.swap(false, Ordering::AcqRel)
    }
}

/// The column family whose compactions run the filter set on it (the others run none).
const FILTERED_CF: Cf = Cf::Write;

/// Where `set_compaction_filter` puts the filter; RocksDB's factory, registered when the
/// database opens, reads it at the start of each compaction.
type FilterSlot = Arc<RwLock<Option<Arc<dyn CompactionFilter>>>>;

struct FilterFactory(FilterSlot);

impl rocksdb::compaction_filter_factory::CompactionFilterFactory for FilterFactory {
    type Filter = FilterRun;

    fn create(&mut self, _: rocksdb::compaction_filter_factory::CompactionFilterContext) -> FilterRun {
        let slot = self.0.read().unwrap_or_else(|e| e.into_inner());
        FilterRun(slot.as_ref().map(|f| f.start()))
    }

    fn name(&self) -> &CStr {
        c"strata-filter-factory"
    }
}

/// One compaction's run of the filter (none set: keeps everything).
struct FilterRun(Option<strata_storage::engine::CompactionDecider>);

impl rocksdb::compaction_filter::CompactionFilter for FilterRun {
    fn filter(&mut self, _level: u32, key: &[u8], value: &[u8]) -> rocksdb::compaction_filter::Decision {
        let drops = self.0.as_mut().is_some_and(|drops| drops(key, value));
        if drops {
            rocksdb::compaction_filter::Decision::Remove
        } else {
            rocksdb::compaction_filter::Decision::Keep
        }
    }

    fn name(&self) -> &CStr {
        c"strata-filter"
    }
}

/// A batch of `puts` in `cf`, in their order.
fn handed_back(cf: Cf, puts: Vec<(Vec<u8>, Vec<u8>)>) -> WriteBatch {
    let mut back = WriteBatch { ops: Vec::with_capacity(puts.len()) };
    for (k, v) in puts {
        back.put(cf, k, v);
    }
    back
}

/// `STRATA_ROCKSDB_OPTIONS`: mutable column-family options applied with RocksDB's
/// `SetOptions` once the database is open, as `cf.name=value` items separated by commas
/// (`latest.max_bytes_for_level_base=33554432`), for tuning experiments. Database options
/// go in `STRATA_ROCKSDB_OPEN_OPTIONS`.
fn apply_env_options(db: &DB) -> Result<()> {
    match std::env::var("STRATA_ROCKSDB_OPTIONS") {
        Ok(spec) => apply_options(db, &spec),
        Err(_) => Ok(()),
    }
}

/// `STRATA_ROCKSDB_OPEN_OPTIONS`: database options, including those fixed once it is open,
/// as RocksDB's option string (`recycle_log_file_num=4;bytes_per_sync=1048576`) applied on
/// top of Strata's own before the open, for tuning experiments.
fn open_env_options(opts: Options) -> Result<Options> {
    match std::env::var("STRATA_ROCKSDB_OPEN_OPTIONS") {
        Ok(spec) => with_open_options(opts, &spec),
        Err(_) => Ok(opts),
    }
}

/// A column family's options before Strata's own: RocksDB's defaults, except that the
/// consistency checks of every new version of the tree (files of a level sorted and
/// apart) run only in RocksDB's debug builds, as TiKV runs it. They walk every file of
/// the column family under the database mutex, which holds writes off: with the ~1,600
/// small bottom-level files of a TPC-C load's ingested commits, each commit paid for two
/// such walks (3.6% of the load's server CPU, BENCHMARKS.md, session 73).
fn cf_base_options() -> Result<Options> {
    Options::default()
        .get_options_from_string("force_consistency_checks=false")
        .map_err(|e| Error::Io(format!("column family options: {}", e.into_string())))
}

/// `opts` with the options of the string `spec` (as for `STRATA_ROCKSDB_OPEN_OPTIONS`).
fn with_open_options(mut opts: Options, spec: &str) -> Result<Options> {
    opts.get_options_from_string(spec)
        .map_err(|e| Error::Io(format!("STRATA_ROCKSDB_OPEN_OPTIONS: {}", e.into_string())))
}

/// Applies `spec` (as for `STRATA_ROCKSDB_OPTIONS`) to `db`.
fn apply_options(db: &DB, spec: &str) -> Result<()> {
    for item in spec.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = || Error::Io(format!("STRATA_ROCKSDB_OPTIONS: expected cf.name=value, got {item}"));
        let (lhs, value) = item.split_once('=').ok_or_else(bad)?;
        let (cf, name) = lhs.split_once('.').ok_or_else(bad)?;
        let h = db.cf_handle(cf).ok_or_else(bad)?;
        db.set_options_cf(h, &[(name, value)]).map_err(io)?;
    }
    Ok(())
}

fn io(e: rocksdb::Error) -> Error {
    Error::Io(e.into_string())
}

impl RocksEngine {
    /// Opens (creating if needed) the database in `dir`. RocksDB's own LOCK file refuses a
    /// second process on the same directory.
    pub fn open(dir: &Path) -> Result<RocksEngine> {
        Self::open_with(dir, DEFAULT_BLOCK_CACHE_BYTES)
    }

    /// `open` with a block cache of `block_cache_bytes` (at least 8 MiB).
    pub fn open_with(dir: &Path, block_cache_bytes: usize) -> Result<RocksEngine> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_enable_pipelined_write(true);
        opts.set_compression_type(DBCompressionType::Lz4);
        opts.increase_parallelism(2);
        // A WAL file is deleted only once every column family's memtable holding its writes
        // has been flushed; the lock, data and raw CFs fill theirs slowly, so without a cap
        // they kept ~1 GB of WAL after a 4-warehouse TPC-C load (and a restart replays it).
        opts.set_max_total_wal_size(MAX_TOTAL_WAL_BYTES);
        let opts = open_env_options(opts)?;
        // A quarter of the budget caches the latest CF's records (`record_cache`), the rest
        // blocks. (RocksDB's row cache, which the records replace, lost its entries with
        // every compaction of their files.)
        let budget = block_cache_bytes.max(MIN_BLOCK_CACHE_BYTES);
        let records = RecordCache::new(budget / RECORD_CACHE_SHARE);
        let cache = Cache::new_lru_cache(budget - budget / RECORD_CACHE_SHARE);
        let write_filter = FilterSlot::default();
        let mut cf_options = Vec::with_capacity(Cf::ALL.len());
        let cfs: Vec<ColumnFamilyDescriptor> = Cf::ALL
            .iter()
            .map(|&cf| {
                let mut o = cf_base_options()?;
                let compression = if cf == Cf::Latest { &LATEST_COMPRESSION } else { &COMPRESSION_PER_LEVEL };
                o.set_compression_per_level(compression);
                let mut table = BlockBasedOptions::default();
                table.set_block_cache(&cache);
                match cf {
                    Cf::Write => {
                        o.set_write_buffer_size(WRITE_WRITE_BUFFER_BYTES);
                        o.set_compaction_filter_factory(FilterFactory(write_filter.clone()));
                        table.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
                        table.set_whole_key_filtering(false);
                        o.set_prefix_extractor(versioned_prefix());
                    }
                    Cf::Data => {
                        table.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
                        point_reads(&mut o);
                    }
                    Cf::Latest => {
                        table.set_bloom_filter(BLOOM_BITS_PER_KEY, false);
                        table.set_data_block_index_type(DataBlockIndexType::BinaryAndHash);
                        LatestSizes::for_memtable(LATEST_WRITE_BUFFER_BYTES).set(&mut o);
                        o.set_level_zero_file_num_compaction_trigger(LATEST_L0_COMPACTION_TRIGGER);
                        point_reads(&mut o);
                        table_partitioner::set(&mut o);
                    }
                    Cf::Lock | Cf::Raw => {}
                }
                o.set_block_based_table_factory(&table);
                cf_options.push((cf, o.clone()));
                Ok(ColumnFamilyDescriptor::new(cf.name(), o))
            })
            .collect::<Result<_>>()?;
        let db = DB::open_cf_descriptors(&opts, dir, cfs).map_err(io)?;
        // Files an earlier process left unfinished; only now that RocksDB's LOCK file is
        // ours (a second process on the directory must not delete a running one's files).
        let ingest_dir = dir.join(INGEST_DIR);
        if ingest_dir.exists() {
            std::fs::remove_dir_all(&ingest_dir).map_err(|e| Error::Io(format!("{}: {e}", ingest_dir.display())))?;
        }
        apply_env_options(&db)?;
        Ok(RocksEngine {
            db: Arc::new(db),
            write_filter,
            cf_options,
            ingest_dir,
            ingest_seq: AtomicU64::new(0),
            load: LoadMode::new(),
            records,
            resident: Arc::new(Resident::new(None, 0)),
            resident_budget: budget / RESIDENT_SHARE,
            loader: parking_lot::Mutex::new(None),
            ingests: ingest_group::IngestGroups::default(),
        })
    }

    /// Makes often-scanned units of the latest CF resident (`resident`), within a share of
    /// the block cache budget the engine was opened with (taken on top of it); `unit_of`
    /// says which unit a scan's bounds fall in (a table).
    pub fn with_resident_tables(self, unit_of: UnitOf) -> Result<RocksEngine> {
        let budget = self.resident_budget;
        self.with_resident_budget(unit_of, budget)
    }

    /// `with_resident_tables` within `budget` bytes (0: none).
    pub fn with_resident_budget(mut self, unit_of: UnitOf, budget: usize) -> Result<RocksEngine> {
        let resident = Arc::new(Resident::new(Some(unit_of), budget));
        if resident.enabled() {
            let (db, r) = (self.db.clone(), resident.clone());
            let h = std::thread::Builder::new()
                .name("resident-load".into())
                .spawn(move || run_loader(&db, &r))
                .map_err(|e| Error::Io(format!("cannot start the resident-table loader: {e}")))?;
            *self.loader.get_mut() = Some(h);
        }
        self.resident = resident;
        Ok(self)
    }

    /// Resident tables: bytes their records take, and how many are resident or loading.
    pub fn resident_stats(&self) -> (usize, usize) {
        self.resident.stats()
    }

    /// Whether `cf` holds a key between the first and the last of `puts` (sorted). A file
    /// of them would then land in level 0 or force a memtable flush (which makes a level-0
    /// file it then overlaps): TPC-C's loads, whose statements mix a table's rows with its
    /// index entries and interleave with other loaders' keys, took a quarter longer when
    /// every large commit was ingested (BENCHMARKS.md). A unit that appends to a key range
    /// nobody else writes (a bulk INSERT's new rows) lands below every file.
    fn holds_keys_within(&self, cf: Cf, puts: &[(Vec<u8>, Vec<u8>)]) -> Result<bool> {
        let (Some((first, _)), Some((last, _))) = (puts.first(), puts.last()) else { return Ok(false) };
        let mut upper = last.clone();
        upper.push(0);
        // RocksDB's own cursor: a probe, which must not count as a scan toward making the
        // table resident (every batch of a sysbench load made its table resident, and the
        // load then paid for map updates).
        let mut c = self.snapshot_cursor(cf, first, &upper)?;
        c.seek(first);
        c.valid()
    }

    /// Writes `puts` (sorted, distinct keys) into a new table file for `cf` in `INGEST_DIR`
    /// and returns its path.
    fn write_table_file(&self, cf: Cf, puts: &[(Vec<u8>, Vec<u8>)]) -> Result<PathBuf> {
        let opts = &self.cf_options.iter().find(|(c, _)| *c == cf).expect("every column family has options").1;
        let dir = &self.ingest_dir;
        std::fs::create_dir_all(dir).map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
        let path = dir.join(format!("{}.sst", self.ingest_seq.fetch_add(1, Ordering::Relaxed)));
        let mut w = CachedSstWriter::new(opts);
        let written = w.open(&path).and_then(|_| {
            for (k, v) in puts {
                w.put(k, v)?;
            }
            w.finish()
        });
        drop(w);
        if let Err(e) = written {
            let _ = std::fs::remove_file(&path);
            return Err(Error::Io(format!("{}: {e}", path.display())));
        }
        Ok(path)
    }

    /// Sizes the latest CF's memtable (and with it its base level and files,
    /// `LatestSizes`) for a load, or back for ordinary work; a smaller size also flushes the
    /// large memtable (without waiting), so the next one is small.
    fn size_latest_memtable(&self, bytes: usize) -> Result<()> {
        let h = self.handle(Cf::Latest)?;
        let sizes = LatestSizes::for_memtable(bytes).named();
        let sizes: Vec<(&str, &str)> = sizes.iter().map(|(k, v)| (*k, v.as_str())).collect();
        self.db.set_options_cf(h, &sizes).map_err(io)?;
        if bytes < LOAD_WRITE_BUFFER_BYTES {
            let mut o = FlushOptions::default();
            o.set_wait(false);
            self.db.flush_cf_opt(h, &o).map_err(io)?;
        }
        Ok(())
    }

    /// RocksDB's MultiGet of `keys`, in their order.
    fn multi_get_uncached(&self, cf: Cf, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        let sorted = keys.is_sorted();
        let ro = ReadOptions::default();
        self.db
            .batched_multi_get_cf_opt(self.handle(cf)?, keys.iter().copied(), sorted, &ro)
            .into_iter()
            .map(|r| r.map(|v| v.map(|v| v.to_vec())).map_err(io))
            .collect()
    }

    /// The latest CF's record cache: lookups that hit, lookups that missed, bytes held.
    pub fn record_cache_stats(&self) -> (u64, u64, usize) {
        let (hits, misses) = self.records.counts();
        (hits, misses, self.records.bytes())
    }

    fn handle(&self, cf: Cf) -> Result<&rocksdb::ColumnFamily> {
        self.db.cf_handle(cf.name()).ok_or_else(|| Error::internal(format!("missing column family {}", cf.name())))
    }
}

/// Read options of a total-order iterator over `[lower, upper)`.
fn bounded(lower: &[u8], upper: &[u8]) -> ReadOptions {
    let mut ro = ReadOptions::default();
    ro.set_total_order_seek(true);
    ro.set_iterate_lower_bound(lower.to_vec());
    ro.set_iterate_upper_bound(upper.to_vec());
    ro
}

/// The resident-table loader: loads the units scans asked for (`resident`) and drops idle
/// ones, until the engine closes.
fn run_loader(db: &DB, resident: &Resident) {
    lower_own_cpu_priority();
    let mut last_sweep = Instant::now();
    while !resident.closed.load(Ordering::Acquire) {
        if let Some(unit) = resident.next_to_load(resident::SWEEP_EVERY) {
            load_unit(db, resident, &unit);
        }
        if last_sweep.elapsed() >= resident::SWEEP_EVERY {
            resident.sweep();
            last_sweep = Instant::now();
        }
    }
}

/// Gives the calling thread the lowest CPU priority (nice 19), so that it runs in the time
/// statement workers leave idle. The resident-table loader is such a thread: loading a
/// table (order_line right after a TPC-C load: 1.2M records, 318 MB, 2.3 s of CPU) is an
/// investment the scans only repay later, and on a small machine it took the cores the
/// statements were waiting for. Three interleaved pairs of 8-thread TPC-C runs right after
/// a load: 13,300 / 13,047 / 13,467 tpmC with it, 12,865 / 11,676 / 11,710 without
/// (BENCHMARKS.md, session 56). Linux only: there the nice value is per thread.
fn lower_own_cpu_priority() {
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn setpriority(which: i32, who: u32, prio: i32) -> i32;
        }
        const PRIO_PROCESS: i32 = 0;
        // SAFETY: setpriority takes plain integers; on Linux PRIO_PROCESS with who = 0
        // names the calling thread. A failure leaves the priority as it was.
        #[allow(unsafe_code)]
        let _ = unsafe { setpriority(PRIO_PROCESS, 0, 19) };
    }
}

/// Copies a registered unit's latest-CF records into its map from one RocksDB snapshot.
fn load_unit(db: &DB, resident: &Resident, unit: &Arc<resident::Unit>) {
    let Some(h) = db.cf_handle(Cf::Latest.name()) else { return resident.abandon(unit) };
    let mut ro = bounded(&unit.start, &unit.end);
    ro.fill_cache(false);
    let mut it = db.raw_iterator_cf_opt(h, ro);
    it.seek(&unit.start);
    loop {
        let mut chunk = Vec::with_capacity(resident::LOAD_CHUNK);
        while chunk.len() < resident::LOAD_CHUNK && it.valid() {
            let (Some(k), Some(v)) = (it.key(), it.value()) else { break };
            chunk.push((Box::from(k), Box::from(v)));
            it.next();
        }
        if chunk.is_empty() {
            break;
        }
        if !resident.load_chunk(unit, chunk) {
            return;
        }
    }
    match it.status() {
        Ok(()) => resident.finish_load(unit),
        Err(_) => resident.abandon(unit),
    }
}

struct RocksCursor<'a> {
    it: DBRawIterator<'a>,
    /// A versions cursor's first possible entry, `key ++ 0^8`: a seek target shorter than
    /// a versioned key (the bare key) goes there instead, since the filters hold the key as
    /// a prefix (the bare key's own "prefix" would be a different one).
    versions_start: Option<Vec<u8>>,
}

/// Whether RocksDB stopped an iterator at its `max_skippable_internal_keys`.
fn gave_up(status: std::result::Result<(), rocksdb::Error>) -> bool {
    matches!(status, Err(e) if e.kind() == rocksdb::ErrorKind::Incomplete)
}

/// A thread's RocksDB perf context. RocksDB counts into it at its default perf level
/// (`kEnableCount`) on every step of every iterator and get; nothing reads those counts but
/// `seek_counting` (and tests), so a thread turns counting off the first time it uses the
/// engine (`quiet`) and on only around the seeks that want the count. The counters' upkeep
/// (a TLS lookup per counter) was ~1% of a range scan's CPU.
struct Perf {
    ctx: rocksdb::perf::PerfContext,
    /// Counting is on for a caller that wants it throughout (`deleted_entries_skipped`).
    counting: std::cell::Cell<bool>,
}

thread_local! {
    static PERF: Perf = {
        rocksdb::perf::set_perf_stats(rocksdb::perf::PerfStatsLevel::Disable);
        Perf { ctx: rocksdb::perf::PerfContext::default(), counting: std::cell::Cell::new(false) }
    };
}

/// Turns RocksDB's perf counting off on this thread, the first time it is called here.
fn quiet() {
    PERF.with(|_| ());
}

/// Dead entries this thread's iterators have stepped over so far: deletion markers and the
/// older or deleted versions of keys (RocksDB's perf counters, when counting is on).
fn skipped_entries(p: &Perf) -> u64 {
    use rocksdb::perf::PerfMetric;
    p.ctx.metric(PerfMetric::InternalDeleteSkippedCount) + p.ctx.metric(PerfMetric::InternalKeySkippedCount)
}

/// Runs `f` with RocksDB's perf counters on for this thread (as they were after).
fn counting<T>(f: impl FnOnce(&Perf) -> T) -> T {
    use rocksdb::perf::{set_perf_stats, PerfStatsLevel};
    PERF.with(|p| {
        if p.counting.get() {
            return f(p);
        }
        set_perf_stats(PerfStatsLevel::EnableCount);
        p.counting.set(true);
        let out = f(p);
        p.counting.set(false);
        set_perf_stats(PerfStatsLevel::Disable);
        out
    })
}

impl Cursor for RocksCursor<'_> {
    fn seek(&mut self, key: &[u8]) {
        match &self.versions_start {
            Some(start) if key.len() < start.len() => self.it.seek(start),
            _ => self.it.seek(key),
        }
    }
    fn seek_counting(&mut self, key: &[u8]) -> u64 {
        counting(|p| {
            let before = skipped_entries(p);
            self.seek(key);
            skipped_entries(p).wrapping_sub(before)
        })
    }
    fn next(&mut self) {
        self.it.next();
    }
    fn valid(&self) -> Result<bool> {
        if self.it.valid() {
            return Ok(true);
        }
        match self.it.status() {
            Err(e) if e.kind() == rocksdb::ErrorKind::Incomplete => Ok(false), // see gave_up
            other => other.map(|_| false).map_err(io),
        }
    }
    fn key(&self) -> &[u8] {
        self.it.key().unwrap_or_default()
    }
    fn value(&self) -> &[u8] {
        self.it.value().unwrap_or_default()
    }
    fn gave_up(&self) -> bool {
        !self.it.valid() && gave_up(self.it.status())
    }
}

/// A column family as the sampler sees it (`Engine::sample_pieces`): RocksDB's approximate
/// sizes (table files only, from their indexes) and one iterator seeking both ways.
struct RocksKeySpace<'a> {
    db: &'a DB,
    handle: &'a rocksdb::ColumnFamily,
    it: DBRawIterator<'a>,
}

impl RocksKeySpace<'_> {
    fn current(&self) -> Result<Option<&[u8]>> {
        if self.it.valid() {
            return Ok(self.it.key());
        }
        self.it.status().map_err(io)?;
        Ok(None)
    }
}

impl strata_storage::sample::KeySpace for RocksKeySpace<'_> {
    fn size(&mut self, start: &[u8], end: &[u8]) -> Result<u64> {
        let sizes = self.db.get_approximate_sizes_cf(self.handle, &[rocksdb::Range::new(start, end)]);
        Ok(sizes.first().copied().unwrap_or(0))
    }

    fn first_at_or_after(&mut self, key: &[u8], upper: &[u8]) -> Result<Option<Vec<u8>>> {
        self.it.seek(key);
        Ok(self.current()?.filter(|k| *k < upper).map(<[u8]>::to_vec))
    }

    fn last_before(&mut self, key: &[u8], lower: &[u8]) -> Result<Option<Vec<u8>>> {
        self.it.seek_for_prev(key);
        if self.current()? == Some(key) {
            self.it.prev();
        }
        Ok(self.current()?.filter(|k| *k >= lower).map(<[u8]>::to_vec))
    }
}

/// The column family whose point reads go through `RocksEngine::records`.
const RECORD_CACHED_CF: Cf = Cf::Latest;

impl Engine for RocksEngine {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        quiet();
        if cf != RECORD_CACHED_CF {
            return self.db.get_cf(self.handle(cf)?, key).map_err(io);
        }
        match self.records.lookup(key) {
            Lookup::Hit(record) => Ok(record),
            Lookup::Miss(ticket) => {
                let record = match self.resident.get(key) {
                    Some(record) => record,
                    None => self.db.get_cf(self.handle(cf)?, key).map_err(io)?,
                };
                self.records.fill(key, ticket, record.as_deref());
                Ok(record)
            }
        }
    }

    fn multi_get(&self, cf: Cf, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>> {
        quiet();
        if cf != RECORD_CACHED_CF {
            return self.multi_get_uncached(cf, keys);
        }
        let mut out = Vec::with_capacity(keys.len());
        let mut missed = Vec::new();
        // A bulk command's check of keys it is about to write (a load's INSERTs) neither
        // looks in the cache nor fills it (no ticket): the keys are new, so each would miss,
        // be cached as absent and be dropped again by the commit (6-7% of the server's CPU
        // in a go-tpc prepare, session 52). RocksDB is never older than the cache.
        let bulk = keys.len() > record_cache::WRITE_ALLOCATE_MAX;
        for (i, key) in keys.iter().enumerate() {
            match if bulk { Lookup::Miss(None) } else { self.records.lookup(key) } {
                Lookup::Hit(record) => out.push(record),
                Lookup::Miss(ticket) => {
                    out.push(None);
                    missed.push((i, ticket));
                }
            }
        }
        // Keys of resident tables are answered from their maps.
        missed.retain(|(i, ticket)| match self.resident.get(keys[*i]) {
            Some(record) => {
                self.records.fill(keys[*i], *ticket, record.as_deref());
                out[*i] = record;
                false
            }
            None => true,
        });
        if missed.is_empty() {
            return Ok(out);
        }
        // The keys missed, in the order asked (sorted if the request was).
        let ask: Vec<&[u8]> = missed.iter().map(|(i, _)| keys[*i]).collect();
        for ((i, ticket), record) in missed.into_iter().zip(self.multi_get_uncached(cf, &ask)?) {
            self.records.fill(keys[i], ticket, record.as_deref());
            out[i] = record;
        }
        Ok(out)
    }

    fn cursor(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        if cf == Cf::Latest && self.resident.enabled() {
            if let Some(unit) = self.resident.unit_for_scan(lower, upper) {
                return Ok(Box::new(ResidentCursor::new(unit, lower, upper)));
            }
        }
        self.snapshot_cursor(cf, lower, upper)
    }

    fn cursor_once(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        if cf == Cf::Latest && self.resident.enabled() {
            if let Some(unit) = self.resident.ready_unit(lower, upper) {
                return Ok(Box::new(ResidentCursor::new(unit, lower, upper)));
            }
        }
        self.snapshot_cursor(cf, lower, upper)
    }

    fn snapshot_cursor(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        quiet();
        let it = self.db.raw_iterator_cf_opt(self.handle(cf)?, bounded(lower, upper));
        Ok(Box::new(RocksCursor { it, versions_start: None }))
    }

    fn versions_cursor(&self, cf: Cf, key: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        quiet();
        let mut upper = key.to_vec();
        upper.extend_from_slice(&[0xFF; TS_LEN + 1]);
        let mut ro = ReadOptions::default();
        let prefix_mode = cf == Cf::Write && !key.is_empty();
        if prefix_mode {
            // Prefix mode: the seek consults each file's filter for `key`.
            ro.set_prefix_same_as_start(true);
        } else {
            ro.set_total_order_seek(true);
        }
        ro.set_iterate_lower_bound(key.to_vec());
        ro.set_iterate_upper_bound(upper);
        let it = self.db.raw_iterator_cf_opt(self.handle(cf)?, ro);
        let versions_start = prefix_mode.then(|| [key, &[0; TS_LEN]].concat());
        Ok(Box::new(RocksCursor { it, versions_start }))
    }

    fn cursor_limited(&self, cf: Cf, lower: &[u8], upper: &[u8], max_skips: u64) -> Result<Box<dyn Cursor + '_>> {
        quiet();
        let mut ro = bounded(lower, upper);
        ro.set_max_skippable_internal_keys(max_skips.max(1));
        let it = self.db.raw_iterator_cf_opt(self.handle(cf)?, ro);
        Ok(Box::new(RocksCursor { it, versions_start: None }))
    }

    fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        quiet();
        if self.load.quiet(|| self.load.now_ms()) {
            self.size_latest_memtable(LATEST_WRITE_BUFFER_BYTES)?;
        }
        // The batch, and the keys it writes in the record-cached CF with their records.
        let mut wb = rocksdb::WriteBatch::default();
        let (mut keys, mut records) = (Vec::new(), Vec::new());
        for op in &batch.ops {
            let (cf, k, v) = match op {
                BatchOp::Put(cf, k, v) => {
                    wb.put_cf(self.handle(*cf)?, k, v);
                    (*cf, k, Some(v.as_slice()))
                }
                BatchOp::Delete(cf, k) => {
                    wb.delete_cf(self.handle(*cf)?, k);
                    (*cf, k, None)
                }
            };
            if cf == RECORD_CACHED_CF {
                keys.push(k.as_slice());
                records.push(v);
            }
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        if keys.is_empty() {
            return self.db.write_opt(wb, &wo).map_err(io);
        }
        let marks = self.records.writing(&keys);
        let done = self.db.write_opt(wb, &wo).map_err(io);
        if done.is_ok() {
            self.resident.apply(keys.iter().copied().zip(records.iter().copied()));
        }
        let allocate = done.is_ok() && keys.len() <= record_cache::WRITE_ALLOCATE_MAX;
        self.records.written(&keys, allocate.then_some(&records[..]), marks);
        done
    }

    fn ingest(&self, batch: WriteBatch) -> Result<Option<WriteBatch>> {
        if self.load.bulk_commit(self.load.now_ms()) {
            self.size_latest_memtable(LOAD_WRITE_BUFFER_BYTES)?;
        }
        let cf = match batch.ops.first() {
            Some(BatchOp::Put(cf, _, _)) => *cf,
            _ => return Ok(Some(batch)),
        };
        if !batch.ops.iter().all(|op| matches!(op, BatchOp::Put(c, _, _) if *c == cf)) {
            return Ok(Some(batch));
        }
        let h = self.handle(cf)?;
        let l0 = self.db.property_int_value_cf(h, "rocksdb.num-files-at-level0").map_err(io)?.unwrap_or(0);
        if l0 >= INGEST_MAX_L0_FILES {
            return Ok(Some(batch));
        }
        let mut puts: Vec<(Vec<u8>, Vec<u8>)> = batch
            .ops
            .into_iter()
            .map(|op| match op {
                BatchOp::Put(_, k, v) => (k, v),
                _ => unreachable!("checked above"),
            })
            .collect();
        // Stable: two puts of one key keep their order in the batch handed back.
        puts.sort_by(|a, b| a.0.cmp(&b.0));
        if puts.windows(2).any(|w| w[0].0 == w[1].0) {
            return Ok(Some(handed_back(cf, puts)));
        }
        // A file per unit (a table's rows, an index's entries), cut where the compactions
        // cut theirs: a unit the store holds no key inside lands below every file. A
        // commit with a unit that does hold keys inside (an index whose new entries fall
        // among earlier ones) is handed back whole: its files go in by one call, and that
        // one would land in level 0, which a load then fills faster than compactions empty
        // it (a 4-warehouse TPC-C load ingested half as many keys, BENCHMARKS.md).
        let runs = table_partitioner::runs(&puts);
        for r in &runs {
            if self.holds_keys_within(cf, &puts[r.clone()])? {
                return Ok(Some(handed_back(cf, puts)));
            }
        }
        let mut files = Vec::with_capacity(runs.len());
        for r in &runs {
            match self.write_table_file(cf, &puts[r.clone()]) {
                Ok(path) => files.push(ingest_group::File {
                    path,
                    first: puts[r.start].0.clone(),
                    last: puts[r.end - 1].0.clone(),
                }),
                Err(e) => {
                    for f in &files {
                        let _ = std::fs::remove_file(&f.path);
                    }
                    return Err(e);
                }
            }
        }
        let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
        let cached: Vec<&[u8]> =
            if cf == RECORD_CACHED_CF { puts.iter().map(|(k, _)| k.as_slice()).collect() } else { Vec::new() };
        let marks = self.records.writing(&cached);
        let ingested = self.ingests.ingest(
            ingest_group::Request::new(cf, files),
            // Everything written before goes to disk first: the files are durable once
            // ingested, and their puts may have been computed from writes the log still
            // only buffers.
            || self.db.flush_wal(true).map_err(io),
            |call| {
                let mut o = IngestExternalFileOptions::default();
                o.set_move_files(true);
                let files = call.files();
                let paths: Vec<&Path> = files.iter().map(|f| f.path.as_path()).collect();
                self.db.ingest_external_file_cf_opts(self.handle(call.cf)?, &o, paths).map_err(io)
            },
        );
        if ingested.is_ok() && cf == RECORD_CACHED_CF {
            self.resident.apply(puts.iter().map(|(k, v)| (k.as_slice(), Some(v.as_slice()))));
        }
        self.records.written(&cached, None, marks);
        for path in &paths {
            let _ = std::fs::remove_file(path); // gone already once linked in; not if that failed
        }
        ingested?;
        Ok(None)
    }

    fn sync_wal(&self) -> Result<()> {
        // FlushWAL(sync): the log's buffered tail goes to the file, then every live log
        // file is fsynced.
        self.db.flush_wal(true).map_err(io)
    }

    fn clear_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        if cf == Cf::Latest {
            // Its files go without writes `resident` would see.
            self.resident.drop_overlapping(start, end);
        }
        // The range goes in two steps (written when a row cache, which refuses range
        // tombstones, was set): the table files lying wholly inside it are dropped (no I/O, whatever their
        // size), then what is left (memtables, files straddling the bounds, older versions
        // of keys a dropped file held) is deleted key by key. DeleteFilesInRange includes
        // its upper bound, so it is given the range's last key instead of `end`.
        let h = self.handle(cf)?;
        let mut it = self.db.raw_iterator_cf_opt(h, bounded(start, end));
        it.seek_to_last();
        let last = it.valid().then(|| it.key().map(<[u8]>::to_vec)).flatten();
        it.status().map_err(io)?;
        drop(it);
        if let Some(last) = last {
            let dropped = self.db.delete_file_in_range_cf(h, start, &last[..]).map_err(io);
            if cf == RECORD_CACHED_CF {
                self.records.clear(); // the dropped files' keys went without a write
            }
            dropped?;
        }
        strata_storage::engine::delete_each(self, cf, start, end)?;
        if cf == Cf::Latest {
            self.resident.drop_overlapping(start, end); // one loaded meanwhile
        }
        Ok(())
    }

    fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<()> {
        // The memtable is flushed first even when it holds no key of the range (RocksDB
        // flushes it only then): deletions are point tombstones (`clear_range`), and a
        // memtable keeps its whole bloom filter (5% of its size) until it is flushed.
        let h = self.handle(cf)?;
        self.db.flush_cf(h).map_err(io)?;
        // Force the bottommost level too: by default RocksDB leaves it alone unless a
        // compaction filter is set, and that is where old data sits.
        let mut opts = CompactOptions::default();
        opts.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
        self.db.compact_range_cf_opt(h, Some(start), Some(end), &opts);
        Ok(())
    }

    fn size_bytes(&self) -> Result<u64> {
        let mut total = 0;
        for cf in Cf::ALL {
            let h = self.handle(cf)?;
            for prop in [properties::LIVE_SST_FILES_SIZE, properties::CUR_SIZE_ALL_MEM_TABLES] {
                total += self.db.property_int_value_cf(h, prop).map_err(io)?.unwrap_or(0);
            }
        }
        Ok(total)
    }

    fn sample_pieces(
        &self,
        cf: Cf,
        lower: &[u8],
        upper: &[u8],
        n: usize,
        seed: u64,
    ) -> Result<Option<(Vec<strata_storage::sample::Piece>, u64)>> {
        let handle = self.handle(cf)?;
        let mut ro = bounded(lower, upper);
        // Only keys are wanted: do not fill the block cache with what a sample passes.
        ro.fill_cache(false);
        let mut space = RocksKeySpace { db: &self.db, handle, it: self.db.raw_iterator_cf_opt(handle, ro) };
        strata_storage::sample::sample_pieces(&mut space, lower, upper, n, seed)
    }

    fn set_compaction_filter(&self, cf: Cf, filter: Arc<dyn CompactionFilter>) -> bool {
        if cf != FILTERED_CF {
            return false;
        }
        *self.write_filter.write().unwrap_or_else(|e| e.into_inner()) = Some(filter);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn survives_reopen_and_refuses_second_open() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let e = RocksEngine::open(dir.path()).expect("open");
            let mut b = WriteBatch::default();
            b.put(Cf::Write, b"k1".to_vec(), b"v1".to_vec());
            b.put(Cf::Lock, b"k2".to_vec(), b"v2".to_vec());
            e.write(b, true).expect("write");
            assert!(RocksEngine::open(dir.path()).is_err(), "second open must fail on the LOCK file");
        }
        let e = RocksEngine::open(dir.path()).expect("reopen");
        assert_eq!(e.get(Cf::Write, b"k1").expect("get"), Some(b"v1".to_vec()));
        assert_eq!(e.get(Cf::Data, b"k1").expect("get"), None);
        let mut c = e.cursor(Cf::Lock, b"", b"z").expect("cursor");
        c.seek(b"");
        assert!(c.valid().expect("valid"));
        assert_eq!(c.key(), b"k2");
    }

    /// A versioned key as the write CF holds it: `key ++ 8-byte timestamp`.
    fn versioned(key: &str, ts: u64) -> Vec<u8> {
        let mut k = format!("{key:<12}").into_bytes();
        k.extend_from_slice(&(!ts).to_be_bytes());
        k
    }

    #[test]
    fn multi_get_answers_in_the_order_asked_from_memtable_and_files() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        let mut b = WriteBatch::default();
        for k in (0..100u32).step_by(2) {
            b.put(Cf::Latest, format!("k{k:03}").into_bytes(), format!("file{k}").into_bytes());
        }
        e.write(b, false).expect("write");
        e.db.flush_cf(e.handle(Cf::Latest).expect("cf")).expect("flush");
        let mut b = WriteBatch::default();
        b.put(Cf::Latest, b"k004".to_vec(), b"memtable".to_vec());
        b.put(Cf::Latest, b"k005".to_vec(), b"new".to_vec());
        e.write(b, false).expect("write");
        let keys: [&[u8]; 6] = [b"k098", b"k004", b"k001", b"k005", b"k050", b"zzz"];
        let got = e.multi_get(Cf::Latest, &keys).expect("multi_get");
        let want: Vec<Option<Vec<u8>>> = [Some("file98"), Some("memtable"), None, Some("new"), Some("file50"), None]
            .iter()
            .map(|v| v.map(|v| v.as_bytes().to_vec()))
            .collect();
        assert_eq!(got, want);
        let sorted: [&[u8]; 3] = [b"k001", b"k002", b"k004"];
        let got = e.multi_get(Cf::Latest, &sorted).expect("multi_get");
        assert_eq!(got, vec![None, Some(b"file2".to_vec()), Some(b"memtable".to_vec())]);
    }

    #[test]
    fn versions_cursor_reads_one_key_and_skips_files_by_their_filters() {
        use rocksdb::perf::{set_perf_stats, PerfContext, PerfMetric, PerfStatsLevel};
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        let cf = e.handle(Cf::Write).expect("cf");
        // Four level-0 files reach the compaction trigger; a background compaction that
        // merged them into one file would leave the filters nothing to rule out.
        e.db.set_options_cf(cf, &[("disable_auto_compactions", "true")]).expect("set options");
        // Four table files whose key ranges all overlap: file i holds the keys k with
        // k % 4 == i, two versions each.
        for file in 0..4u64 {
            let mut b = WriteBatch::default();
            for k in (file..400).step_by(4) {
                for ts in [10, 20] {
                    b.put(Cf::Write, versioned(&format!("key{k:05}"), ts), format!("{k}@{ts}").into_bytes());
                }
            }
            e.write(b, false).expect("write");
            e.db.flush_cf(cf).expect("flush");
        }
        let prefix = format!("{:<12}", "key00101").into_bytes();
        set_perf_stats(PerfStatsLevel::EnableCount);
        let mut ctx = PerfContext::default();
        ctx.reset();
        let mut c = e.versions_cursor(Cf::Write, &prefix).expect("cursor");
        // A bare-key seek lands on the newest version; a versioned one on the newest at or
        // below its timestamp.
        c.seek(&prefix);
        let mut seen = Vec::new();
        while c.valid().expect("valid") {
            seen.push(String::from_utf8(c.value().to_vec()).expect("utf8"));
            c.next();
        }
        assert_eq!(seen, ["101@20", "101@10"], "only this key's versions, newest first");
        c.seek(&versioned("key00101", 15));
        assert!(c.valid().expect("valid"));
        assert_eq!(c.value(), b"101@10");
        let ruled_out = ctx.metric(PerfMetric::BloomSstMissCount);
        set_perf_stats(PerfStatsLevel::Disable);
        // Two seeks; each could skip the three files without the key (a filter may let
        // one through now and then).
        assert!(ruled_out >= 4, "the filters ruled out only {ruled_out} file reads");
        // A key with no versions: nothing, and a range cursor still sees every key.
        let mut none = e.versions_cursor(Cf::Write, format!("{:<12}", "key00100x").as_bytes()).expect("cursor");
        none.seek(b"");
        assert!(!none.valid().expect("valid"));
        let mut all = e.cursor(Cf::Write, b"", &[0xFF; 4]).expect("cursor");
        all.seek(b"");
        let mut n = 0;
        while all.valid().expect("valid") {
            n += 1;
            all.next();
        }
        assert_eq!(n, 800);
    }

    /// Drops the values "drop" while it is set to, counting the compactions it ran in.
    struct DropMarked {
        runs: Arc<std::sync::atomic::AtomicU64>,
    }

    impl CompactionFilter for DropMarked {
        fn start(&self) -> strata_storage::engine::CompactionDecider {
            self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::new(|_, v| v == b"drop")
        }
    }

    #[test]
    fn the_write_cf_compactions_run_the_filter_set_on_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        let runs = Arc::new(std::sync::atomic::AtomicU64::new(0));
        assert!(!e.set_compaction_filter(Cf::Data, Arc::new(DropMarked { runs: runs.clone() })));
        let write = |cf: Cf| {
            let mut b = WriteBatch::default();
            for i in 0..100u32 {
                b.put(
                    cf,
                    format!("k{i:03}").into_bytes(),
                    if i % 3 == 0 { b"drop".to_vec() } else { b"keep".to_vec() },
                );
            }
            e.write(b, false).expect("write");
            e.db.flush_cf(e.handle(cf).expect("cf")).expect("flush");
        };
        let count = |cf: Cf| {
            let mut c = e.cursor(cf, b"", b"z").expect("cursor");
            c.seek(b"");
            let mut n = 0;
            while c.valid().expect("valid") {
                n += 1;
                c.next();
            }
            n
        };
        // Before a filter is set, a compaction keeps everything.
        write(Cf::Write);
        e.compact_range(Cf::Write, b"", b"z").expect("compact");
        assert_eq!(count(Cf::Write), 100);
        assert!(e.set_compaction_filter(Cf::Write, Arc::new(DropMarked { runs: runs.clone() })));
        // A flush does not filter; the compaction does, in this column family only.
        write(Cf::Write);
        write(Cf::Data);
        assert_eq!(count(Cf::Write), 100);
        e.compact_range(Cf::Write, b"", b"z").expect("compact");
        e.compact_range(Cf::Data, b"", b"z").expect("compact");
        assert_eq!(count(Cf::Write), 66);
        assert_eq!(count(Cf::Data), 100);
        assert!(runs.load(std::sync::atomic::Ordering::SeqCst) >= 1);
    }

    fn level_files(e: &RocksEngine, cf: Cf, level: u32) -> u64 {
        let prop = format!("rocksdb.num-files-at-level{level}");
        e.db.property_int_value_cf(e.handle(cf).expect("cf"), prop.as_str()).expect("property").unwrap_or(0)
    }

    fn latest_puts(keys: impl IntoIterator<Item = u32>, tag: &str) -> WriteBatch {
        let mut b = WriteBatch::default();
        for k in keys {
            b.put(Cf::Latest, format!("k{k:04}").into_bytes(), format!("{tag}{k}").into_bytes());
        }
        b
    }

    #[test]
    fn samples_land_on_keys_in_proportion_to_bytes() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        // Keys 0..3000 with 200-byte values, then 3000..6000 with 1000-byte ones: five
        // sixths of the bytes are in the second half; values that do not compress, written
        // as a table file.
        let mut b = WriteBatch::default();
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for k in 0..6000u32 {
            let len = if k < 3000 { 200 } else { 1000 };
            let value: Vec<u8> = (0..len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state as u8
                })
                .collect();
            b.put(Cf::Latest, format!("k{k:04}").into_bytes(), value);
        }
        assert!(e.ingest(b).expect("ingest").is_none(), "taken as a table file");
        let (pieces, total) = e.sample_pieces(Cf::Latest, b"k", b"l", 600, 3).expect("sample").expect("sizes known");
        assert!(total > 3_000_000, "{total} bytes");
        let keys: Vec<&Vec<u8>> = pieces.iter().flat_map(|p| std::iter::repeat_n(&p.start, p.hits as usize)).collect();
        assert_eq!(keys.len(), 600);
        assert!(keys.windows(2).all(|w| w[0] <= w[1]), "in key order");
        assert!(keys.iter().all(|k| k.len() == 5 && k.starts_with(b"k")), "real keys");
        let heavy = keys.iter().filter(|k| k.as_slice() >= b"k3000".as_slice()).count() as f64 / 600.0;
        assert!((0.75..0.92).contains(&heavy), "{heavy} of the samples in five sixths of the bytes");
        // The keys of the pieces per byte of them, times the bytes: about the key count.
        let (mut rows, mut bytes) = (0u64, 0u64);
        for p in &pieces {
            let mut c = e.cursor(Cf::Latest, &p.start, &p.end).expect("cursor");
            c.seek(&p.start);
            while c.valid().expect("valid") {
                rows += 1;
                c.next();
            }
            bytes += p.bytes;
        }
        let estimate = total as f64 * rows as f64 / bytes as f64;
        assert!((4_800.0..7_200.0).contains(&estimate), "{estimate} keys estimated of 6000");
        // Nothing in files yet (a memtable only): the engine cannot tell.
        let mut b = WriteBatch::default();
        b.put(Cf::Latest, b"m1".to_vec(), b"v".to_vec());
        e.write(b, false).expect("write");
        assert_eq!(e.sample_pieces(Cf::Latest, b"m", b"n", 10, 1).expect("sample"), None);
        // An empty range: no keys.
        assert_eq!(e.sample_pieces(Cf::Latest, b"x", b"y", 10, 1).expect("sample"), Some((Vec::new(), 0)));
    }

    /// How many of the pages of the file at `path` are in the page cache, and how many it has.
    #[cfg(target_os = "linux")]
    fn resident_pages(path: &Path) -> (usize, usize) {
        use std::os::fd::AsRawFd;
        extern "C" {
            fn mmap(addr: *mut u8, len: usize, prot: i32, flags: i32, fd: i32, off: i64) -> *mut u8;
            fn munmap(addr: *mut u8, len: usize) -> i32;
            fn mincore(addr: *mut u8, len: usize, vec: *mut u8) -> i32;
        }
        const PROT_READ: i32 = 1;
        const MAP_SHARED: i32 = 1;
        const PAGE: usize = 4096;
        let f = std::fs::File::open(path).expect("open");
        let len = f.metadata().expect("metadata").len() as usize;
        let mut vec = vec![0u8; len.div_ceil(PAGE)];
        // SAFETY: a read-only shared map of a whole open file, never dereferenced: mincore
        // only reports which of its pages are cached, into `vec` (one byte per page), and
        // the map is undone before `f` closes.
        #[allow(unsafe_code)]
        unsafe {
            let at = mmap(std::ptr::null_mut(), len, PROT_READ, MAP_SHARED, f.as_raw_fd(), 0);
            assert!(!at.is_null() && at as isize != -1, "mmap failed");
            assert_eq!(mincore(at, len, vec.as_mut_ptr()), 0, "mincore failed");
            munmap(at, len);
        }
        (vec.iter().filter(|b| **b & 1 == 1).count(), vec.len())
    }

    /// Ingests ~4 MB of values LZ4 cannot shrink (so the file spans many MiB-sized steps
    /// at which RocksDB's own writer would drop its pages) into `e`, whose data directory is
    /// `dir`, and returns how many of the ingested file's pages are in the page cache, of all.
    #[cfg(target_os = "linux")]
    fn ingest_and_count_cached_pages(e: &RocksEngine, dir: &Path) -> (usize, usize) {
        let mut b = WriteBatch::default();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for k in 0..20_000u32 {
            let v: Vec<u8> = (0..200)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            b.put(Cf::Latest, format!("k{k:06}").into_bytes(), v);
        }
        assert!(e.ingest(b).expect("ingest").is_none(), "taken as a table file");
        let files: Vec<PathBuf> = std::fs::read_dir(dir)
            .expect("read_dir")
            .map(|d| d.expect("entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "sst"))
            .collect();
        assert_eq!(files.len(), 1, "one table file: {files:?}");
        assert!(std::fs::metadata(&files[0]).expect("metadata").len() > 3_000_000);
        resident_pages(&files[0])
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn an_ingested_file_stays_in_the_page_cache() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        let (cached, pages) = ingest_and_count_cached_pages(&e, dir.path());
        // Written with the page cache kept and linked in.
        assert!(cached * 10 >= pages * 9, "{cached} of {pages} pages cached");
        assert_eq!(std::fs::read_dir(dir.path().join(INGEST_DIR)).expect("ingest dir").count(), 0);
    }

    #[test]
    fn ingest_adds_a_file_below_level_0_durably() {
        let dir = tempfile::tempdir().expect("tempdir");
        {
            let e = RocksEngine::open(dir.path()).expect("open");
            // Unsorted keys into an empty store: one file, below level 0 (nothing overlaps).
            let back = e.ingest(latest_puts((0..500).rev(), "a")).expect("ingest");
            assert!(back.is_none(), "an ingestible batch was handed back");
            assert_eq!(level_files(&e, Cf::Latest, 0), 0);
            assert_eq!((1..7).map(|l| level_files(&e, Cf::Latest, l)).sum::<u64>(), 1);
            // Keys after the file's and the memtable's: another file, also below level 0.
            e.write(latest_puts(500..600, "m"), false).expect("write");
            assert!(e.ingest(latest_puts(600..700, "b")).expect("ingest").is_none());
            assert_eq!(level_files(&e, Cf::Latest, 0), 0);
            assert_eq!((1..7).map(|l| level_files(&e, Cf::Latest, l)).sum::<u64>(), 2);
            // A later write is newer than an ingested put.
            e.write(latest_puts([652], "w"), false).expect("write");
            assert_eq!(e.get(Cf::Latest, b"k0652").expect("get"), Some(b"w652".to_vec()));
        }
        // Nothing was flushed or synced by hand: the files and the log bring it all back,
        // and the ingest directory is left empty.
        let e = RocksEngine::open(dir.path()).expect("reopen");
        let mut c = e.cursor(Cf::Latest, b"k", b"l").expect("cursor");
        c.seek(b"k");
        let mut seen = Vec::new();
        while c.valid().expect("valid") {
            seen.push((
                String::from_utf8(c.key().to_vec()).expect("utf8"),
                String::from_utf8(c.value().to_vec()).expect("utf8"),
            ));
            c.next();
        }
        assert_eq!(seen.len(), 700);
        assert!(seen.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(seen[10].1, "a10");
        assert_eq!(seen[499].1, "a499");
        assert_eq!(seen[500].1, "m500");
        assert_eq!(seen[651].1, "b651");
        assert_eq!(seen[652].1, "w652");
        let left = std::fs::read_dir(dir.path().join(INGEST_DIR)).map(|d| d.count()).unwrap_or(0);
        assert_eq!(left, 0, "table files left behind");
    }

    #[test]
    fn latest_reads_through_the_record_cache_follow_every_write() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        let get = |k: &str| e.get(Cf::Latest, k.as_bytes()).expect("get").map(|v| String::from_utf8(v).expect("utf8"));
        e.write(latest_puts(0..10, "a"), false).expect("write");
        // Written records are cached as written.
        assert_eq!(get("k0003").as_deref(), Some("a3"));
        assert_eq!(get("k0042"), None);
        assert_eq!(get("k0042"), None, "an absent key is cached too");
        let (hits, misses, bytes) = e.record_cache_stats();
        assert_eq!((hits, misses), (2, 1));
        assert!(bytes > 0);
        // A write replaces what was cached, a put of an absent key and a delete included.
        let mut b = latest_puts([3, 42], "b");
        b.delete(Cf::Latest, b"k0004".to_vec());
        assert_eq!(get("k0004").as_deref(), Some("a4"));
        e.write(b, false).expect("write");
        assert_eq!(get("k0003").as_deref(), Some("b3"));
        assert_eq!(get("k0042").as_deref(), Some("b42"));
        assert_eq!(get("k0004"), None);
        // MultiGet mixes hits and misses in the order asked.
        let keys: Vec<&[u8]> = vec![b"k0009", b"k0003", b"k0100", b"k0004", b"k0005"];
        let got = e.multi_get(Cf::Latest, &keys).expect("multi_get");
        let want: Vec<Option<Vec<u8>>> =
            vec![Some(b"a9".to_vec()), Some(b"b3".to_vec()), None, None, Some(b"a5".to_vec())];
        assert_eq!(got, want);
        // A bulk MultiGet (a load checking its new keys) reads RocksDB and caches nothing,
        // where a small one caches what it read.
        let (_, misses_before, bytes_before) = e.record_cache_stats();
        let bulk: Vec<Vec<u8>> = (2000..2000 + record_cache::WRITE_ALLOCATE_MAX as u32 + 1)
            .map(|i| format!("k{i:04}").into_bytes())
            .collect();
        let mut bulk_keys: Vec<&[u8]> = bulk.iter().map(|k| k.as_slice()).collect();
        bulk_keys.push(b"k0009");
        let got = e.multi_get(Cf::Latest, &bulk_keys).expect("bulk multi_get");
        assert_eq!(got.iter().filter(|r| r.is_some()).count(), 1);
        assert_eq!(got.last().cloned().flatten(), Some(b"a9".to_vec()));
        assert_eq!(e.record_cache_stats().2, bytes_before, "a bulk MultiGet filled the cache");
        assert_eq!(e.record_cache_stats().1, misses_before, "a bulk MultiGet looked in the cache");
        e.multi_get(Cf::Latest, &bulk_keys[..10]).expect("small multi_get");
        assert!(e.record_cache_stats().2 > bytes_before, "a small MultiGet caches what it read");
        // A large batch drops what it writes; the next read finds the new record.
        e.write(latest_puts(0..(record_cache::WRITE_ALLOCATE_MAX as u32 + 1), "c"), false).expect("write");
        assert_eq!(get("k0005").as_deref(), Some("c5"));
        // An ingested file and a cleared range are seen too.
        assert_eq!(get("k0900"), None);
        assert!(e.ingest(latest_puts(800..1000, "i")).expect("ingest").is_none());
        assert_eq!(get("k0900").as_deref(), Some("i900"));
        e.clear_range(Cf::Latest, b"k", b"l").expect("clear");
        assert_eq!(get("k0900"), None);
        assert_eq!(get("k0003"), None);
    }

    /// Encoded latest-CF keys of table 7: its rows, and entries of its index 1.
    fn unit_key(index: bool, n: u32) -> Vec<u8> {
        use strata_codec::{keys, memcmp};
        use strata_common::{IndexId, TableId};
        let mut user = if index { keys::index_prefix(TableId(7), IndexId(1)) } else { keys::row_prefix(TableId(7)) };
        user.extend_from_slice(format!("{n:06}").as_bytes());
        let mut out = Vec::new();
        memcmp::encode_bytes(&mut out, &user);
        out
    }

    fn unit_puts(rows: std::ops::Range<u32>, entries: std::ops::Range<u32>) -> WriteBatch {
        let mut b = WriteBatch::default();
        for n in rows {
            b.put(Cf::Latest, unit_key(false, n), vec![b'r'; 100]);
        }
        for n in entries {
            b.put(Cf::Latest, unit_key(true, n), Vec::new());
        }
        b
    }

    #[test]
    fn a_bulk_commit_s_rows_and_index_entries_land_below_level_0_after_compactions() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        // Rows and index entries through the log and memtable, flushed and compacted to
        // the last level: without the partitioner one file spans the index and the rows.
        e.write(unit_puts(0..500, 0..500), false).expect("write");
        e.compact_range(Cf::Latest, b"", b"\xff").expect("compact");
        let files: Vec<_> =
            e.db.live_files().expect("live files").into_iter().filter(|f| f.column_family_name == "latest").collect();
        assert_eq!(files.len(), 2, "one file for the rows, one for the index: {files:?}");
        for f in &files {
            let (first, last) = (f.start_key.as_deref().expect("start"), f.end_key.as_deref().expect("end"));
            assert_eq!(table_partitioner::unit(first), table_partitioner::unit(last), "a file spans two units");
        }
        // A commit appending to both: two files, neither in level 0, in one call.
        assert!(e.ingest(unit_puts(500..1000, 500..1000)).expect("ingest").is_none(), "handed back");
        assert_eq!(level_files(&e, Cf::Latest, 0), 0);
        assert_eq!((1..7).map(|l| level_files(&e, Cf::Latest, l)).sum::<u64>(), 4);
        let mut c = e.cursor(Cf::Latest, &unit_key(true, 0), &unit_key(false, 999_999)).expect("cursor");
        c.seek(&unit_key(true, 0));
        let mut n = 0;
        while c.valid().expect("valid") {
            n += 1;
            c.next();
        }
        assert_eq!(n, 2000);
        // One whose index entries fall among those already there is handed back whole.
        let mut between = unit_puts(1000..1100, 2000..2010);
        between.put(Cf::Latest, unit_key(true, 250), Vec::new());
        let back = e.ingest(between).expect("ingest").expect("an entry among the index's");
        assert_eq!(back.ops.len(), 111);
        assert_eq!(e.get(Cf::Latest, &unit_key(false, 1000)).expect("get"), None);
    }

    #[test]
    fn ingest_hands_back_what_it_cannot_take() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        let mut mixed = latest_puts(0..10, "a");
        mixed.put(Cf::Write, b"w".to_vec(), b"v".to_vec());
        let back = e.ingest(mixed.clone()).expect("ingest").expect("two column families");
        assert_eq!(back, mixed);
        let mut del = latest_puts(0..10, "a");
        del.delete(Cf::Latest, b"k0003".to_vec());
        assert!(e.ingest(del).expect("ingest").is_some());
        // Two puts of one key: handed back sorted, the later put still after the earlier.
        let mut dup = latest_puts([7, 3], "a");
        dup.put(Cf::Latest, b"k0003".to_vec(), b"second".to_vec());
        let back = e.ingest(dup).expect("ingest").expect("duplicate keys");
        e.write(back, false).expect("write");
        assert_eq!(e.get(Cf::Latest, b"k0003").expect("get"), Some(b"second".to_vec()));
        assert_eq!(e.get(Cf::Latest, b"k0007").expect("get"), Some(b"a7".to_vec()));
        // Keys on both sides of one the store holds (in its memtable, or in a file).
        assert!(e.ingest(latest_puts([2, 4], "x")).expect("ingest").is_some());
        e.db.flush_cf(e.handle(Cf::Latest).expect("cf")).expect("flush");
        let back = e.ingest(latest_puts([6, 8], "x")).expect("ingest").expect("a key between");
        assert_eq!(back, latest_puts([6, 8], "x"));
        assert!(e.ingest(latest_puts([8, 9], "x")).expect("ingest").is_none(), "nothing between k0008 and k0009");
        // A backed-up level 0 (auto compactions off, overlapping flushes) refuses ingests.
        let h = e.handle(Cf::Latest).expect("cf");
        e.db.set_options_cf(h, &[("disable_auto_compactions", "true")]).expect("set options");
        for i in 0..INGEST_MAX_L0_FILES {
            e.write(latest_puts([1, 900 + i as u32], "f"), false).expect("write");
            e.db.flush_cf(h).expect("flush");
        }
        assert!(level_files(&e, Cf::Latest, 0) >= INGEST_MAX_L0_FILES);
        assert!(e.ingest(latest_puts(2000..2100, "z")).expect("ingest").is_some());
        assert_eq!(e.get(Cf::Latest, b"k2000").expect("get"), None);
    }

    #[test]
    fn a_load_starts_with_a_bulk_commit_and_ends_after_a_quiet_spell() {
        let m = LoadMode::new();
        let quiet = LOAD_QUIET.as_millis() as u64;
        assert!(!m.quiet(|| 10 * quiet), "no load yet");
        assert!(m.bulk_commit(1_000), "the first bulk commit starts it");
        assert!(!m.bulk_commit(1_500), "only once");
        assert!(!m.quiet(|| 1_500 + quiet - 1));
        assert!(m.quiet(|| 1_500 + quiet), "quiet since the last bulk commit");
        assert!(!m.quiet(|| 1_500 + 2 * quiet), "ended once");
        assert!(m.bulk_commit(90_000), "a later load starts again");
        // A late caller's older clock does not move the last bulk commit back.
        assert!(!m.bulk_commit(80_000));
        assert!(!m.quiet(|| 80_000 + quiet));
        assert!(m.quiet(|| 90_000 + quiet));
    }

    /// The latest CF's active memtable, in bytes.
    fn active_memtable(e: &RocksEngine) -> u64 {
        let h = e.handle(Cf::Latest).expect("cf");
        e.db.property_int_value_cf(h, "rocksdb.cur-size-active-mem-table").expect("property").unwrap_or(0)
    }

    /// Writes `mib` MiB into the latest CF in 256 KiB commits from key `first` on, and
    /// returns the largest active memtable seen.
    fn fill_latest(e: &RocksEngine, first: u32, mib: u32) -> u64 {
        let mut largest = 0;
        for i in 0..mib * 4 {
            let mut b = WriteBatch::default();
            for j in 0..64u32 {
                b.put(Cf::Latest, format!("f{:08}", first + i * 64 + j).into_bytes(), vec![b'v'; 4096]);
            }
            e.write(b, false).expect("write");
            largest = largest.max(active_memtable(e));
        }
        largest
    }

    #[test]
    fn the_latest_memtable_is_large_during_a_load_and_small_after_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut e = RocksEngine::open(dir.path()).expect("open");
        let small = LATEST_WRITE_BUFFER_BYTES as u64;
        assert!(fill_latest(&e, 0, 12) <= small + (1 << 20), "ordinary memtables stay small");
        // A bulk commit starts a load; the memtable after the current one is large.
        assert!(e.ingest(latest_puts(0..2000, "bulk")).expect("ingest").is_none());
        e.db.flush_cf(e.handle(Cf::Latest).expect("cf")).expect("flush");
        assert!(fill_latest(&e, 1 << 20, 24) > 2 * small, "a load's memtable grows past the ordinary size");
        // A quiet spell later the next write flushes it and memtables are small again.
        e.load = LoadMode::new();
        e.load.on.store(true, Ordering::Relaxed);
        e.load.last_bulk_ms.store(0, Ordering::Relaxed);
        e.load.opened -= 2 * LOAD_QUIET;
        let before = active_memtable(&e);
        e.write(latest_puts([1], "after"), false).expect("write");
        let deadline = Instant::now() + Duration::from_secs(30);
        while active_memtable(&e) >= before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(active_memtable(&e) < before, "the load's memtable is flushed");
        assert!(fill_latest(&e, 2 << 20, 24) <= small + (1 << 20), "memtables are small after the load");
        assert_eq!(e.get(Cf::Latest, b"k1999").expect("get"), Some(b"bulk1999".to_vec()));
        assert_eq!(e.get(Cf::Latest, b"k0001").expect("get"), Some(b"after1".to_vec()));
    }

    /// `name` of column family `cf` in the newest OPTIONS file RocksDB wrote in `dir` (it
    /// writes one at open and after every `SetOptions`).
    fn cf_option(dir: &Path, cf: &str, name: &str) -> Option<String> {
        section_option(dir, &format!("[CFOptions \"{cf}\"]"), name)
    }

    /// An option of the newest OPTIONS file's section headed `section`.
    fn section_option(dir: &Path, section: &str, name: &str) -> Option<String> {
        let newest = std::fs::read_dir(dir)
            .expect("read dir")
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .filter(|n| n.starts_with("OPTIONS-"))
            .max_by_key(|n| n["OPTIONS-".len()..].parse::<u64>().unwrap_or(0))?;
        let text = std::fs::read_to_string(dir.join(newest)).expect("read options");
        let mut lines = text.lines().skip_while(|l| l.trim() != section).skip(1);
        lines
            .by_ref()
            .take_while(|l| !l.trim_start().starts_with('['))
            .find_map(|l| l.trim().strip_prefix(&format!("{name}=")).map(str::to_string))
    }

    #[test]
    fn the_latest_cf_base_level_follows_its_memtable() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut e = RocksEngine::open(dir.path()).expect("open");
        let base = || cf_option(dir.path(), "latest", "max_bytes_for_level_base").expect("option");
        let small = LATEST_WRITE_BUFFER_BYTES;
        assert_eq!(base(), (small * LATEST_BASE_LEVEL_MEMTABLES).to_string());
        assert_eq!(cf_option(dir.path(), "latest", "target_file_size_base"), Some(small.to_string()));
        // The write CF keeps RocksDB's level sizes, with a smaller memtable.
        assert_eq!(cf_option(dir.path(), "write", "max_bytes_for_level_base"), Some((256u64 << 20).to_string()));
        assert_eq!(cf_option(dir.path(), "write", "write_buffer_size"), Some(WRITE_WRITE_BUFFER_BYTES.to_string()));
        // A load's large memtables get a base level as large as four of them, and back.
        assert!(e.ingest(latest_puts(0..2000, "bulk")).expect("ingest").is_none());
        assert_eq!(base(), (LOAD_WRITE_BUFFER_BYTES * LATEST_BASE_LEVEL_MEMTABLES).to_string());
        e.load.opened -= 2 * LOAD_QUIET;
        e.load.last_bulk_ms.store(0, Ordering::Relaxed);
        e.write(latest_puts([1], "after"), false).expect("write");
        assert_eq!(base(), (small * LATEST_BASE_LEVEL_MEMTABLES).to_string());
    }

    #[test]
    fn options_given_by_name_are_applied_and_bad_ones_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        apply_options(&e.db, " write.max_bytes_for_level_base=33554432, latest.level0_file_num_compaction_trigger=6 ")
            .expect("apply");
        assert_eq!(cf_option(dir.path(), "write", "max_bytes_for_level_base"), Some("33554432".into()));
        assert_eq!(cf_option(dir.path(), "latest", "level0_file_num_compaction_trigger"), Some("6".into()));
        for bad in ["latest", "max_bytes_for_level_base=1", "nocf.write_buffer_size=1", "latest.no_such_option=1"] {
            assert!(apply_options(&e.db, bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn open_options_given_as_a_string_are_applied_and_bad_ones_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut base = Options::default();
        base.create_if_missing(true);
        let opts = with_open_options(base, "recycle_log_file_num=3;wal_bytes_per_sync=524288").expect("options");
        drop(DB::open(&opts, dir.path()).expect("open"));
        assert_eq!(section_option(dir.path(), "[DBOptions]", "recycle_log_file_num"), Some("3".into()));
        assert_eq!(section_option(dir.path(), "[DBOptions]", "wal_bytes_per_sync"), Some("524288".into()));
        assert!(with_open_options(Options::default(), "no_such_option=1").is_err());
    }

    #[test]
    fn clear_range_and_compaction_give_the_space_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = RocksEngine::open(dir.path()).expect("open");
        // Incompressible values, so the files are as big as the data.
        let mut seed = 0x9E37_79B9_7F4A_7C15u64;
        for chunk in 0..8u32 {
            let mut b = WriteBatch::default();
            for i in 0..1000u32 {
                let value: Vec<u8> = (0..1024)
                    .map(|_| {
                        seed ^= seed << 13;
                        seed ^= seed >> 7;
                        seed ^= seed << 17;
                        seed as u8
                    })
                    .collect();
                b.put(Cf::Data, format!("t{:08}", chunk * 1000 + i).into_bytes(), value);
            }
            b.put(Cf::Data, b"u-keep".to_vec(), b"kept".to_vec());
            // The range's end bound itself is outside it.
            b.put(Cf::Data, b"u".to_vec(), b"end".to_vec());
            e.write(b, false).expect("write");
        }
        e.compact_range(Cf::Data, b"", b"\xff").expect("flush into files");
        // Newer versions of some keys in the memtable, over the files' old ones.
        let mut b = WriteBatch::default();
        for i in (0..8000u32).step_by(7) {
            b.put(Cf::Data, format!("t{i:08}").into_bytes(), b"new".to_vec());
        }
        e.write(b, false).expect("write");
        let before = e.size_bytes().expect("size");
        assert!(before > 8_000_000, "8 MB written, {before} bytes held");

        e.get(Cf::Data, b"t00000008").expect("a read before the clear");
        e.clear_range(Cf::Data, b"t", b"u").expect("clear range");
        for k in ["t00000007", "t00000008", "t00007999"] {
            assert_eq!(e.get(Cf::Data, k.as_bytes()).expect("get"), None, "{k} survived");
        }
        let mut c = e.cursor(Cf::Data, b"t", b"u").expect("cursor");
        c.seek(b"t");
        assert!(!c.valid().expect("valid"), "a key of the range survived");
        drop(c);
        assert_eq!(e.get(Cf::Data, b"u").expect("get"), Some(b"end".to_vec()));
        e.compact_range(Cf::Data, b"t", b"u").expect("compact");
        let after = e.size_bytes().expect("size");
        assert!(after < before / 10, "space not given back: {before} bytes before, {after} after");
        assert_eq!(e.get(Cf::Data, b"u-keep").expect("get"), Some(b"kept".to_vec()));
    }
}
