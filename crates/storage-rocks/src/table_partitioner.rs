//! The latest CF's compaction outputs cut at table boundaries (`cpp/table_partitioner.cc`),
//! and the same boundaries for the table files a bulk commit is ingested as.
//!
//! RocksDB places an ingested file in the lowest level where no file's key range overlaps
//! it. A level's files written by compactions of flushed memtables ran across many tables,
//! so a bulk load's new rows, though no other file held a key among them, landed in level 0
//! and had to be compacted down again. With every compaction output holding one *unit* — a
//! table's rows, or one index's entries — and each unit of a bulk commit written as a file
//! of its own, a load's appended rows land below every file.
#![allow(unsafe_code)] // two calls into `cpp/table_partitioner.cc`; each states what it relies on

use librocksdb_sys as ffi;
use rocksdb::{AsRawPtr, Options};

extern "C" {
    /// Sets the partitioner on the options (a shared factory they keep).
    fn strata_options_set_table_partitioner(options: *mut ffi::rocksdb_options_t);
    /// How many leading bytes of a latest-CF key name its unit.
    fn strata_table_unit_len(key: *const u8, len: usize) -> usize;
}

/// Cuts the compaction outputs of the column family `options` configure at unit boundaries.
pub(crate) fn set(options: &mut Options) {
    // SAFETY: `options` is a live `rocksdb_options_t` that we hold mutably; the call only
    // assigns its partitioner factory (a `shared_ptr` the options own from then on).
    unsafe { strata_options_set_table_partitioner(options.as_raw_ptr()) }
}

/// The leading bytes of `key` that name its unit (the partitioner's own rule).
pub(crate) fn unit(key: &[u8]) -> &[u8] {
    // SAFETY: the function reads `len` bytes at `key` and returns a length no greater.
    let n = unsafe { strata_table_unit_len(key.as_ptr(), key.len()) };
    &key[..n.min(key.len())]
}

/// `sorted` split where the unit changes, as index ranges in order.
pub(crate) fn runs<V>(sorted: &[(Vec<u8>, V)]) -> Vec<std::ops::Range<usize>> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut current = sorted.first().map_or(&[][..], |(k, _)| unit(k));
    for (i, (key, _)) in sorted.iter().enumerate().skip(1) {
        let u = unit(key);
        if u != current {
            out.push(start..i);
            (start, current) = (i, u);
        }
    }
    if start < sorted.len() {
        out.push(start..sorted.len());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use strata_codec::{keys, memcmp};
    use strata_common::{IndexId, TableId};

    /// A latest-CF key as the MVCC layer stores it: the user key group-encoded.
    fn encoded(user: Vec<u8>) -> Vec<u8> {
        let mut out = Vec::new();
        memcmp::encode_bytes(&mut out, &user);
        out
    }

    fn row(table: i64, pk: &[u8]) -> Vec<u8> {
        let mut k = keys::row_prefix(TableId(table));
        k.extend_from_slice(pk);
        encoded(k)
    }

    fn index(table: i64, index: i64, values: &[u8]) -> Vec<u8> {
        let mut k = keys::index_prefix(TableId(table), IndexId(index));
        k.extend_from_slice(values);
        encoded(k)
    }

    #[test]
    fn a_unit_is_a_table_s_rows_or_one_index() {
        assert_eq!(unit(&row(7, b"\x03abc")), unit(&row(7, b"\x03zzzzzzzzzzzzzzz")));
        assert_ne!(unit(&row(7, b"\x03abc")), unit(&row(8, b"\x03abc")));
        assert_ne!(unit(&row(7, b"\x03abc")), unit(&index(7, 1, b"\x03abc")));
        assert_eq!(unit(&index(7, 1, b"\x03a")), unit(&index(7, 1, b"\x03zzzzzzzzzzzzzzzzzz")));
        assert_ne!(unit(&index(7, 1, b"\x03a")), unit(&index(7, 2, b"\x03a")));
        assert_ne!(unit(&index(7, 1, b"\x03a")), unit(&index(263, 1, b"\x03a")), "ids differing in the last byte");
        // Anything else (the catalog's keys, short keys) is one unit.
        assert_eq!(unit(b"mcatalog/1"), unit(b"mzz"));
        assert_eq!(unit(b""), b"");
    }

    #[test]
    fn runs_split_where_the_unit_changes() {
        // A table's index entries sort before its rows (`_i` < `_r`).
        let keys = [index(7, 1, b"\x01"), index(7, 1, b"\x02"), index(7, 2, b"\x01"), row(7, b"\x01"), row(7, b"\x02")];
        let sorted: Vec<(Vec<u8>, ())> = keys.iter().map(|k| (k.clone(), ())).collect();
        assert!(sorted.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(runs(&sorted), vec![0..2, 2..3, 3..5]);
        assert_eq!(runs::<()>(&[]), Vec::<std::ops::Range<usize>>::new());
    }
}
