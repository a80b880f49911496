//! The RocksDB implementation of `storage::Engine`: one column family per `Cf`, pipelined
//! writes, LZ4 compression. Synced writes go through RocksDB's write groups, so concurrent
//! committers share a WAL fsync (group commit) without extra code here.

use std::path::Path;

use rocksdb::{
    properties, BottommostLevelCompaction, ColumnFamilyDescriptor, CompactOptions, DBCompressionType, DBRawIterator,
    Options, ReadOptions, WriteOptions, DB,
};
use strata_common::{Error, Result};
use strata_storage::engine::BatchOp;
use strata_storage::{Cf, Cursor, Engine, WriteBatch};

/// Runs `f` on this thread and returns, with its result, how many deleted entries RocksDB
/// stepped over meanwhile (its per-thread perf context). Tests use it to hold a read path to
/// a bounded amount of tombstone walking: the lock CF keeps a deletion for every key ever
/// committed, and a cursor that moves across them costs time in proportion.
pub fn deleted_entries_skipped<T>(f: impl FnOnce() -> T) -> (T, u64) {
    use rocksdb::perf::{set_perf_stats, PerfContext, PerfMetric, PerfStatsLevel};
    set_perf_stats(PerfStatsLevel::EnableCount);
    let mut ctx = PerfContext::default();
    ctx.reset();
    let out = f();
    let skipped = ctx.metric(PerfMetric::InternalDeleteSkippedCount);
    set_perf_stats(PerfStatsLevel::Disable);
    (out, skipped)
}

/// A RocksDB database opened for Strata.
pub struct RocksEngine {
    db: DB,
}

fn io(e: rocksdb::Error) -> Error {
    Error::Io(e.into_string())
}

impl RocksEngine {
    /// Opens (creating if needed) the database in `dir`. RocksDB's own LOCK file refuses a
    /// second process on the same directory.
    pub fn open(dir: &Path) -> Result<RocksEngine> {
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.create_missing_column_families(true);
        opts.set_enable_pipelined_write(true);
        opts.set_compression_type(DBCompressionType::Lz4);
        opts.increase_parallelism(2);
        let cfs = Cf::ALL.iter().map(|cf| {
            let mut o = Options::default();
            o.set_compression_type(DBCompressionType::Lz4);
            ColumnFamilyDescriptor::new(cf.name(), o)
        });
        let db = DB::open_cf_descriptors(&opts, dir, cfs).map_err(io)?;
        Ok(RocksEngine { db })
    }

    fn handle(&self, cf: Cf) -> Result<&rocksdb::ColumnFamily> {
        self.db.cf_handle(cf.name()).ok_or_else(|| Error::internal(format!("missing column family {}", cf.name())))
    }
}

struct RocksCursor<'a> {
    it: DBRawIterator<'a>,
}

/// Whether RocksDB stopped an iterator at its `max_skippable_internal_keys`.
fn gave_up(status: std::result::Result<(), rocksdb::Error>) -> bool {
    matches!(status, Err(e) if e.kind() == rocksdb::ErrorKind::Incomplete)
}

impl Cursor for RocksCursor<'_> {
    fn seek(&mut self, key: &[u8]) {
        self.it.seek(key);
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

impl Engine for RocksEngine {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.db.get_cf(self.handle(cf)?, key).map_err(io)
    }

    fn cursor(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(lower.to_vec());
        ro.set_iterate_upper_bound(upper.to_vec());
        let it = self.db.raw_iterator_cf_opt(self.handle(cf)?, ro);
        Ok(Box::new(RocksCursor { it }))
    }

    fn cursor_limited(&self, cf: Cf, lower: &[u8], upper: &[u8], max_skips: u64) -> Result<Box<dyn Cursor + '_>> {
        let mut ro = ReadOptions::default();
        ro.set_iterate_lower_bound(lower.to_vec());
        ro.set_iterate_upper_bound(upper.to_vec());
        ro.set_max_skippable_internal_keys(max_skips.max(1));
        let it = self.db.raw_iterator_cf_opt(self.handle(cf)?, ro);
        Ok(Box::new(RocksCursor { it }))
    }

    fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        let mut wb = rocksdb::WriteBatch::default();
        for op in batch.ops {
            match op {
                BatchOp::Put(cf, k, v) => wb.put_cf(self.handle(cf)?, k, v),
                BatchOp::Delete(cf, k) => wb.delete_cf(self.handle(cf)?, k),
                BatchOp::DeleteRange(cf, start, end) => wb.delete_range_cf(self.handle(cf)?, start, end),
            }
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        self.db.write_opt(wb, &wo).map_err(io)
    }

    fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<()> {
        // Force the bottommost level too: by default RocksDB leaves it alone unless a
        // compaction filter is set, and that is where old data sits.
        let mut opts = CompactOptions::default();
        opts.set_bottommost_level_compaction(BottommostLevelCompaction::Force);
        self.db.compact_range_cf_opt(self.handle(cf)?, Some(start), Some(end), &opts);
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

    #[test]
    fn delete_range_and_compaction_give_the_space_back() {
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
            e.write(b, false).expect("write");
        }
        e.compact_range(Cf::Data, b"", b"\xff").expect("flush into files");
        let before = e.size_bytes().expect("size");
        assert!(before > 8_000_000, "8 MB written, {before} bytes held");

        let mut del = WriteBatch::default();
        del.delete_range(Cf::Data, b"t".to_vec(), b"u".to_vec());
        e.write(del, true).expect("delete range");
        assert_eq!(e.get(Cf::Data, b"t00000007").expect("get"), None);
        e.compact_range(Cf::Data, b"t", b"u").expect("compact");
        let after = e.size_bytes().expect("size");
        assert!(after < before / 10, "space not given back: {before} bytes before, {after} after");
        assert_eq!(e.get(Cf::Data, b"u-keep").expect("get"), Some(b"kept".to_vec()));
    }
}
