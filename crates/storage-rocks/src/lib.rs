//! The RocksDB implementation of `storage::Engine`: one column family per `Cf`, pipelined
//! writes, LZ4 compression. Synced writes go through RocksDB's write groups, so concurrent
//! committers share a WAL fsync (group commit) without extra code here.

use std::path::Path;

use rocksdb::{ColumnFamilyDescriptor, DBCompressionType, DBRawIterator, Options, ReadOptions, WriteOptions, DB};
use strata_common::{Error, Result};
use strata_storage::engine::BatchOp;
use strata_storage::{Cf, Cursor, Engine, WriteBatch};

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
        self.it.status().map_err(io)?;
        Ok(false)
    }
    fn key(&self) -> &[u8] {
        self.it.key().unwrap_or_default()
    }
    fn value(&self) -> &[u8] {
        self.it.value().unwrap_or_default()
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

    fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        let mut wb = rocksdb::WriteBatch::default();
        for op in batch.ops {
            match op {
                BatchOp::Put(cf, k, v) => wb.put_cf(self.handle(cf)?, k, v),
                BatchOp::Delete(cf, k) => wb.delete_cf(self.handle(cf)?, k),
            }
        }
        let mut wo = WriteOptions::default();
        wo.set_sync(sync);
        self.db.write_opt(wb, &wo).map_err(io)
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
}
