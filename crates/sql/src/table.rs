//! How a table's rows become key-value pairs.
//!
//! ```text
//!   row:            t{id}_r{pk values}                 -> row (all columns, by column id)
//!   unique index:   t{id}_i{idx}{values}               -> handle
//!   other index:    t{id}_i{idx}{values}{handle}       -> (empty)
//! ```
//! The handle is the encoded primary key (or the hidden row id). A unique index entry whose
//! values include NULL is stored like a non-unique one, since NULLs never collide.

use strata_codec::keys::{index_prefix, row_prefix};
use strata_codec::{memcmp, row};
use strata_common::{Error, Result, Value};

use crate::catalog::{IndexInfo, TableInfo};

/// A row as a vector of column values in table order.
pub type Row = Vec<Value>;

/// A string without its trailing spaces.
fn trim_pad(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|c| *c != b' ').map(|i| i + 1).unwrap_or(0);
    &b[..end]
}

/// Appends the key encoding of `v`: `memcmp::encode_value`, except that strings are
/// compared in keys without their trailing spaces (utf8mb4_bin is a PAD SPACE collation),
/// trimmed in place.
pub fn encode_key(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Bytes(b) => memcmp::encode_bytes_value(out, trim_pad(b)),
        other => memcmp::encode_value(out, other),
    }
}

/// Encodes the handle (primary key values) of a row.
pub fn handle_of(table: &TableInfo, row: &Row, row_id: Option<i64>) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(16);
    match &table.pk {
        Some(cols) => {
            for &c in cols {
                encode_key(&mut out, &row[c]);
            }
        }
        None => memcmp::encode_value(&mut out, &Value::Int(row_id.ok_or_else(|| Error::internal("row id missing"))?)),
    }
    Ok(out)
}

/// The row key for a handle.
pub fn row_key(table: &TableInfo, handle: &[u8]) -> Vec<u8> {
    strata_codec::keys::row_key_of_handle(table.table_id(), handle)
}

/// The handle part of a row key.
pub fn handle_from_row_key<'a>(table: &TableInfo, key: &'a [u8]) -> &'a [u8] {
    let p = row_prefix(table.table_id()).len();
    &key[p.min(key.len())..]
}

/// Encodes a row value. A hidden row id is stored as column id 0.
pub fn encode_row(table: &TableInfo, row: &Row, row_id: Option<i64>) -> Vec<u8> {
    let hidden = row_id.map(Value::Int);
    let mut cols: Vec<(u32, &Value)> = table.columns.iter().zip(row.iter()).map(|(c, v)| (c.id, v)).collect();
    if let Some(h) = &hidden {
        cols.push((0, h));
    }
    row::encode_row(&cols)
}

/// Decodes a row value into table order; columns missing from the stored row (added later)
/// take their default. Returns the hidden row id too, if any.
pub fn decode_row(table: &TableInfo, bytes: &[u8]) -> Result<(Row, Option<i64>)> {
    decode_masked(table, bytes, None)
}

/// `decode_row` over the values of `out` (its strings' buffers reused), for a caller
/// decoding many rows one after another; no row id.
pub fn decode_row_into(table: &TableInfo, bytes: &[u8], out: &mut Row) -> Result<()> {
    decode_masked_into(table, bytes, None, out).map(|_| ())
}

/// `decode_row` of the columns at `positions` only (the others are NULL); no row id.
pub fn decode_columns(table: &TableInfo, bytes: &[u8], positions: &[usize]) -> Result<Row> {
    let mut mask = vec![false; table.columns.len()];
    for &p in positions {
        if let Some(m) = mask.get_mut(p) {
            *m = true;
        }
    }
    Ok(decode_masked(table, bytes, Some(&mask))?.0)
}

/// `decode_row` building only the columns `wanted` marks (all when None); the others are
/// NULL, their stored values stepped over. Values go straight to their place in the row.
pub fn decode_masked(table: &TableInfo, bytes: &[u8], wanted: Option<&[bool]>) -> Result<(Row, Option<i64>)> {
    // Filled with `resize_with`: `vec![Value::Null; n]` clones through `Value`'s match.
    let mut out: Row = Vec::with_capacity(table.columns.len());
    out.resize_with(table.columns.len(), || Value::Null);
    let row_id = decode_masked_into(table, bytes, wanted, &mut out)?;
    Ok((out, row_id))
}

/// `decode_masked` over the values of `out`, which it sizes to the table: every column is
/// written (a string into the buffer of a string already there); returns the row id.
fn decode_masked_into(table: &TableInfo, bytes: &[u8], wanted: Option<&[bool]>, out: &mut Row) -> Result<Option<i64>> {
    let n = table.columns.len();
    out.resize(n, Value::Null);
    let mut row_id = None;
    let mut placed = 0;
    let want = |p: usize| wanted.is_none_or(|w| w.get(p).copied().unwrap_or(true));
    let mut reader = row::RowReader::new(bytes)?;
    while let Some(id) = reader.next_id()? {
        // Column ids mostly follow the columns' order: look there first.
        let at = (id as usize).checked_sub(1).filter(|&p| table.columns.get(p).is_some_and(|c| c.id == id));
        match at.or_else(|| table.columns.iter().position(|c| c.id == id)) {
            Some(p) => {
                placed += 1;
                if want(p) {
                    reader.value_into(&mut out[p])?;
                } else {
                    reader.skip()?;
                    out[p] = Value::Null;
                }
            }
            None if id == 0 && table.pk.is_none() => {
                if let Value::Int(i) = reader.value()? {
                    row_id = Some(i);
                }
            }
            None => reader.skip()?,
        }
    }
    if placed < n {
        // Columns added after the row was written: their defaults.
        let mut stored = vec![false; n];
        let mut again = row::RowReader::new(bytes)?;
        while let Some(id) = again.next_id()? {
            if let Some(p) = table.columns.iter().position(|c| c.id == id) {
                stored[p] = true;
            }
            again.skip()?;
        }
        for (p, c) in table.columns.iter().enumerate() {
            if stored[p] {
                continue;
            }
            out[p] = match &c.default {
                Some(crate::catalog::DefaultValue::Text(t)) if want(p) => {
                    c.ty.coerce(Value::str(t.clone()), &c.name).unwrap_or(Value::Null)
                }
                _ => Value::Null,
            };
        }
    }
    Ok(row_id)
}

/// Whether an index entry for these values must be unique (unique index, no NULLs).
pub fn is_unique_entry(index: &IndexInfo, row: &Row) -> bool {
    index.unique && index.columns.iter().all(|&c| !row[c].is_null())
}

/// The key of a row's entry in `index`, and its value.
pub fn index_entry(table: &TableInfo, index: &IndexInfo, row: &Row, handle: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut key = index_prefix(table.table_id(), TableInfo::index_id(index));
    for &c in &index.columns {
        encode_key(&mut key, &row[c]);
    }
    if is_unique_entry(index, row) {
        (key, handle.to_vec())
    } else {
        key.extend_from_slice(handle);
        (key, Vec::new())
    }
}

/// The prefix of `index` entries whose leading columns equal `values`.
pub fn index_value_prefix(table: &TableInfo, index: &IndexInfo, values: &[Value]) -> Vec<u8> {
    let mut key = index_prefix(table.table_id(), TableInfo::index_id(index));
    for v in values {
        encode_key(&mut key, v);
    }
    key
}

/// The handle an index entry points to.
pub fn handle_from_index_entry(index: &IndexInfo, prefix_len: usize, key: &[u8], value: &[u8]) -> Result<Vec<u8>> {
    if !value.is_empty() {
        return Ok(value.to_vec());
    }
    let mut rest = &key[prefix_len.min(key.len())..];
    for _ in &index.columns {
        memcmp::skip_value(&mut rest)?;
    }
    Ok(rest.to_vec())
}

/// The prefix of a table's row keys whose leading primary key columns equal `values`.
pub fn pk_prefix(table: &TableInfo, values: &[Value]) -> Vec<u8> {
    let mut key = row_prefix(table.table_id());
    for v in values {
        encode_key(&mut key, v);
    }
    key
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ColumnInfo, DefaultValue};

    fn column(id: u32, name: &str, default: Option<&str>) -> ColumnInfo {
        ColumnInfo { default: default.map(|d| DefaultValue::Text(d.into())), ..ColumnInfo::test_int(id, name, 8, true) }
    }

    fn table(columns: Vec<ColumnInfo>, pk: Option<Vec<usize>>) -> TableInfo {
        TableInfo {
            id: 3,
            db: "d".into(),
            name: "t".into(),
            next_column_id: columns.iter().map(|c| c.id).max().unwrap_or(0) + 1,
            columns,
            pk,
            indexes: Vec::new(),
            next_index_id: 1,
            checks: Vec::new(),
            columnar_replica: None,
            cached: false,
        }
    }

    #[test]
    fn masked_rows_decode_only_the_wanted_columns() {
        let t = table(vec![column(1, "a", None), column(2, "b", None), column(3, "c", None)], Some(vec![0]));
        let row = vec![Value::Int(1), Value::str("bee"), Value::Int(3)];
        let bytes = encode_row(&t, &row, None);
        assert_eq!(decode_row(&t, &bytes).expect("row"), (row.clone(), None));
        let (masked, _) = decode_masked(&t, &bytes, Some(&[true, false, true])).expect("masked");
        assert_eq!(masked, vec![Value::Int(1), Value::Null, Value::Int(3)]);
        assert_eq!(
            decode_columns(&t, &bytes, &[1]).expect("columns"),
            vec![Value::Null, Value::str("bee"), Value::Null]
        );
        assert!(decode_masked(&t, &bytes[..bytes.len() - 1], None).is_err(), "a truncated row fails");
        // Decoding over the row before: every column replaced, strings in their old buffers.
        let mut into = vec![Value::str("a longer string than bee"), Value::str("x"), Value::Null];
        decode_row_into(&t, &bytes, &mut into).expect("row");
        assert_eq!(into, row);
        let mut into = Vec::new();
        decode_row_into(&t, &bytes, &mut into).expect("row");
        assert_eq!(into, row, "an empty row grows to the table's columns");
        assert!(decode_row_into(&t, &bytes[..bytes.len() - 1], &mut into).is_err(), "a truncated row fails");
    }

    #[test]
    fn columns_added_later_read_as_their_default_and_dropped_ones_are_skipped() {
        // Written when the table had a (id 1), x (id 2, dropped since) and b (id 3).
        let old = table(vec![column(1, "a", None), column(2, "x", None), column(3, "b", None)], None);
        let bytes = encode_row(&old, &vec![Value::Int(1), Value::Int(2), Value::Int(3)], Some(77));
        // Now: a, b, then c added with DEFAULT 9 and d with none; x dropped; column order changed.
        let now = table(
            vec![column(3, "b", None), column(1, "a", None), column(4, "c", Some("9")), column(5, "d", None)],
            None,
        );
        let (row, row_id) = decode_row(&now, &bytes).expect("row");
        assert_eq!(row, vec![Value::Int(3), Value::Int(1), Value::Int(9), Value::Null]);
        assert_eq!(row_id, Some(77));
        let (row, _) = decode_masked(&now, &bytes, Some(&[false, true, false, false])).expect("masked");
        assert_eq!(row, vec![Value::Null, Value::Int(1), Value::Null, Value::Null], "unwanted defaults stay NULL");
        // Decoding over a row that had every column: the added ones take their defaults.
        let mut into = vec![Value::Int(30), Value::Int(10), Value::Int(90), Value::Int(50)];
        decode_row_into(&now, &bytes, &mut into).expect("row");
        assert_eq!(into, vec![Value::Int(3), Value::Int(1), Value::Int(9), Value::Null]);
    }
}
