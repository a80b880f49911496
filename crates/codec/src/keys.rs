//! The keyspace: every byte key Strata stores, as one enum with an order-preserving encoding.
//!
//! ```text
//!   m <name bytes>                              catalog and counters (Meta)
//!   t <table:i64> _r <pk values, memcmp>        a row, clustered by its primary key (Row)
//!   t <table:i64> _i <index:i64> <values>       an index entry (Index)
//! ```
//! Table and index ids are big-endian with the sign bit flipped so they sort numerically. All
//! of a table's rows are contiguous, as are all entries of one index, so a scan of a table or
//! an index range is one range scan.

use strata_common::{Error, IndexId, Result, TableId, Value};

use crate::memcmp;

const META: u8 = b'm';
const TABLE: u8 = b't';
const ROW_SEP: &[u8; 2] = b"_r";
const INDEX_SEP: &[u8; 2] = b"_i";

/// A decoded key.
#[derive(Clone, Debug, PartialEq)]
pub enum Key {
    /// Catalog entries and counters, by name.
    Meta(Vec<u8>),
    /// A table row; `handle` is the memcomparable encoding of the primary key values.
    Row {
        /// The table.
        table: TableId,
        /// Encoded primary key values.
        handle: Vec<u8>,
    },
    /// An index entry; `values` is the encoding of the indexed values (plus the handle for
    /// non-unique indexes).
    Index {
        /// The table.
        table: TableId,
        /// The index.
        index: IndexId,
        /// Encoded index values.
        values: Vec<u8>,
    },
}

fn push_id(out: &mut Vec<u8>, id: i64) {
    out.extend_from_slice(&((id as u64) ^ (1 << 63)).to_be_bytes());
}

fn take_id(input: &mut &[u8]) -> Result<i64> {
    if input.len() < 8 {
        return Err(Error::internal("corrupt key: truncated id"));
    }
    let mut b = [0u8; 8];
    b.copy_from_slice(&input[..8]);
    *input = &input[8..];
    Ok((u64::from_be_bytes(b) ^ (1 << 63)) as i64)
}

impl Key {
    /// The raw bytes of this key.
    pub fn encode(&self) -> Vec<u8> {
        match self {
            Key::Meta(name) => {
                let mut out = vec![META];
                out.extend_from_slice(name);
                out
            }
            Key::Row { table, handle } => {
                let mut out = row_prefix(*table);
                out.extend_from_slice(handle);
                out
            }
            Key::Index { table, index, values } => {
                let mut out = index_prefix(*table, *index);
                out.extend_from_slice(values);
                out
            }
        }
    }

    /// Decodes raw key bytes.
    pub fn decode(raw: &[u8]) -> Result<Key> {
        let (&kind, mut rest) = raw.split_first().ok_or_else(|| Error::internal("empty key"))?;
        match kind {
            META => Ok(Key::Meta(rest.to_vec())),
            TABLE => {
                let table = TableId(take_id(&mut rest)?);
                if rest.starts_with(ROW_SEP) {
                    Ok(Key::Row { table, handle: rest[2..].to_vec() })
                } else if rest.starts_with(INDEX_SEP) {
                    rest = &rest[2..];
                    let index = IndexId(take_id(&mut rest)?);
                    Ok(Key::Index { table, index, values: rest.to_vec() })
                } else {
                    Err(Error::internal("corrupt table key"))
                }
            }
            other => Err(Error::internal(format!("unknown key prefix {other:#x}"))),
        }
    }

    /// A readable rendering for storage dumps in tests and logs.
    pub fn describe(raw: &[u8]) -> String {
        let values = |mut b: &[u8]| {
            let mut parts = Vec::new();
            while !b.is_empty() {
                match memcmp::decode_value(&mut b) {
                    Ok(v) => parts.push(v.to_display()),
                    Err(_) => {
                        parts.push(format!("<{b:02x?}>"));
                        break;
                    }
                }
            }
            parts.join(",")
        };
        match Key::decode(raw) {
            Ok(Key::Meta(n)) => format!("meta:{}", String::from_utf8_lossy(&n)),
            Ok(Key::Row { table, handle }) => format!("t{}_r({})", table.0, values(&handle)),
            Ok(Key::Index { table, index, values: v }) => format!("t{}_i{}({})", table.0, index.0, values(&v)),
            Err(_) => format!("raw:{raw:02x?}"),
        }
    }
}

/// The table a row or index key belongs to (None for meta keys).
pub fn table_of(raw: &[u8]) -> Option<TableId> {
    let (&kind, mut rest) = raw.split_first()?;
    if kind != TABLE {
        return None;
    }
    take_id(&mut rest).ok().map(TableId)
}

/// The table a row key belongs to (None for index and meta keys).
pub fn row_table_of(raw: &[u8]) -> Option<TableId> {
    if raw.get(9..11) != Some(ROW_SEP.as_slice()) {
        return None;
    }
    table_of(raw)
}

/// The prefix shared by every key of a table (rows and indexes).
pub fn table_prefix(table: TableId) -> Vec<u8> {
    table_prefix_with_room(table, 2)
}

/// `table_prefix` in a buffer with room for `more` bytes after it, so a key built on it
/// is one allocation.
fn table_prefix_with_room(table: TableId, more: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + 8 + more);
    out.push(TABLE);
    push_id(&mut out, table.0);
    out
}

/// The prefix of all rows of a table.
pub fn row_prefix(table: TableId) -> Vec<u8> {
    row_key_of_handle(table, &[])
}

/// The row key of an encoded handle (`row_prefix` then the handle).
pub fn row_key_of_handle(table: TableId, handle: &[u8]) -> Vec<u8> {
    let mut out = table_prefix_with_room(table, ROW_SEP.len() + handle.len());
    out.extend_from_slice(ROW_SEP);
    out.extend_from_slice(handle);
    out
}

/// The prefix of all entries of one index.
pub fn index_prefix(table: TableId, index: IndexId) -> Vec<u8> {
    // Room for the entry's values and handle too, typically.
    let mut out = table_prefix_with_room(table, INDEX_SEP.len() + 8 + 24);
    out.extend_from_slice(INDEX_SEP);
    push_id(&mut out, index.0);
    out
}

/// The row key for primary key values.
pub fn row_key(table: TableId, pk: &[Value]) -> Vec<u8> {
    let mut out = row_prefix(table);
    memcmp::encode_values(&mut out, pk);
    out
}

/// The smallest key greater than every key starting with `prefix`.
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    vec![0xFF; prefix.len() + 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_prefix_is_a_prefix_of_its_keys() {
        let t = TableId(42);
        let row = row_key(t, &[Value::Int(7), Value::str("x")]);
        assert!(row.starts_with(&table_prefix(t)));
        assert!(row.starts_with(&row_prefix(t)));
        assert!(row < prefix_end(&row_prefix(t)));
        let handle = &row[row_prefix(t).len()..];
        assert_eq!(row_key_of_handle(t, handle), row);
        let idx = Key::Index { table: t, index: IndexId(3), values: vec![1, 2] }.encode();
        assert!(idx.starts_with(&index_prefix(t, IndexId(3))));
        assert!(idx.starts_with(&table_prefix(t)));
        assert!(!idx.starts_with(&row_prefix(t)));
        // Tables do not interleave.
        assert!(prefix_end(&table_prefix(t)) <= table_prefix(TableId(43)));
        assert!(table_prefix(TableId(-1)) < table_prefix(TableId(0)));
        let meta = Key::Meta(b"schema".to_vec()).encode();
        assert!(meta < table_prefix(TableId(i64::MIN)) || meta > prefix_end(b"t"));
    }

    #[test]
    fn keys_round_trip_and_describe() {
        let raw = row_key(TableId(5), &[Value::Int(-3)]);
        assert!(matches!(Key::decode(&raw), Ok(Key::Row { table: TableId(5), .. })));
        assert_eq!(Key::describe(&raw), "t5_r(-3)");
    }
}
