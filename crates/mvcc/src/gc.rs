//! Garbage collection of old versions behind a safe point: for each key, the newest version
//! at or below the safe point is kept (unless it is a deletion) and everything older goes,
//! as do rollback and lock-only records at or below the safe point. Readers never use a
//! timestamp below the safe point, so what GC removes is invisible to every reader.
//!
//! `destroy_range` is the other half: a whole key range nobody can reach any more (a dropped
//! table, once the safe point has passed the drop) goes at once, without MVCC, as range
//! tombstones in every column family followed by a compaction of the range, so its space
//! comes back now.

use strata_common::{Result, Timestamp};
use strata_storage::{Cf, WriteBatch};

use crate::records::{encode_user_key, split_versioned, versioned, Kind, Write};
use crate::store::MvccStore;

/// What one GC pass removed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GcStats {
    /// Write records deleted.
    pub versions_removed: u64,
}

impl MvccStore {
    /// Removes every version, value and lock of the user keys in `[start, end)` and compacts
    /// the range. Not transactional: only for ranges no reader or writer can reach (the
    /// caller waits for the GC safe point to pass the change that orphaned them).
    pub fn destroy_range(&self, start: &[u8], end: &[u8]) -> Result<()> {
        if start >= end {
            return Ok(());
        }
        // Group encoding preserves order and no encoded key is a prefix of another, so
        // every versioned key of a user key in [start, end) lies in [enc(start), enc(end)).
        let (enc_start, enc_end) = (encode_user_key(start), encode_user_key(end));
        let mut batch = WriteBatch::default();
        batch.delete_range(Cf::Lock, start.to_vec(), end.to_vec());
        batch.delete_range(Cf::Write, enc_start.clone(), enc_end.clone());
        batch.delete_range(Cf::Data, enc_start.clone(), enc_end.clone());
        self.engine().write(batch, true)?;
        self.forget_locks(start, end);
        self.engine().compact_range(Cf::Lock, start, end)?;
        self.engine().compact_range(Cf::Write, &enc_start, &enc_end)?;
        self.engine().compact_range(Cf::Data, &enc_start, &enc_end)
    }

    /// Removes versions no reader at or above `safe_point` can see.
    pub fn gc(&self, safe_point: Timestamp) -> Result<GcStats> {
        let engine = self.engine().clone();
        let mut stats = GcStats::default();
        let mut batch = WriteBatch::default();
        let mut c = engine.cursor(Cf::Write, &[], &[0xFF; 16])?;
        c.seek(&[]);
        let mut current: Vec<u8> = Vec::new();
        let mut kept_base = false;
        while c.valid()? {
            let (enc, commit_ts) = split_versioned(c.key())?;
            if enc != current.as_slice() {
                current = enc.to_vec();
                kept_base = false;
            }
            if commit_ts <= safe_point {
                let w = Write::decode(c.value())?;
                let remove = match w.kind {
                    Kind::Rollback | Kind::Lock | Kind::Pessimistic => true,
                    Kind::Put if !kept_base => {
                        kept_base = true;
                        false
                    }
                    Kind::Delete if !kept_base => {
                        kept_base = true;
                        true
                    }
                    Kind::Put | Kind::Delete => true,
                };
                if remove {
                    batch.delete(Cf::Write, c.key().to_vec());
                    if w.kind == Kind::Put && w.short_value.is_none() {
                        batch.delete(Cf::Data, versioned(enc, w.start_ts));
                    }
                    stats.versions_removed += 1;
                }
            }
            if batch.ops.len() >= 4096 {
                engine.write(std::mem::take(&mut batch), false)?;
            }
            c.next();
        }
        if !batch.is_empty() {
            engine.write(batch, false)?;
        }
        Ok(stats)
    }
}
