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

/// Values as they are compared in keys: trailing spaces of strings do not count
/// (utf8mb4_bin is a PAD SPACE collation).
pub fn key_value(v: &Value) -> Value {
    match v {
        Value::Bytes(b) => {
            let end = b.iter().rposition(|c| *c != b' ').map(|i| i + 1).unwrap_or(0);
            Value::Bytes(b[..end].to_vec())
        }
        other => other.clone(),
    }
}

/// Encodes the handle (primary key values) of a row.
pub fn handle_of(table: &TableInfo, row: &Row, row_id: Option<i64>) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(16);
    match &table.pk {
        Some(cols) => {
            for &c in cols {
                memcmp::encode_value(&mut out, &key_value(&row[c]));
            }
        }
        None => memcmp::encode_value(&mut out, &Value::Int(row_id.ok_or_else(|| Error::internal("row id missing"))?)),
    }
    Ok(out)
}

/// The row key for a handle.
pub fn row_key(table: &TableInfo, handle: &[u8]) -> Vec<u8> {
    let mut k = row_prefix(table.table_id());
    k.extend_from_slice(handle);
    k
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
    place_columns(table, row::decode_row(bytes)?, |_| true)
}

/// `decode_row` of the columns at `positions` only (the others are NULL); no row id.
pub fn decode_columns(table: &TableInfo, bytes: &[u8], positions: &[usize]) -> Result<Row> {
    let wanted = |id: u32| positions.iter().any(|&p| table.columns[p].id == id);
    let (row, _) = place_columns(table, row::decode_row_with(bytes, wanted)?, |p| positions.contains(&p))?;
    Ok(row)
}

/// Stored `(column id, value)` pairs in table order, a column missing from them taking its
/// default if `defaulted` says so (NULL otherwise); and the hidden row id, if any.
fn place_columns(
    table: &TableInfo,
    stored: Vec<(u32, Value)>,
    defaulted: impl Fn(usize) -> bool,
) -> Result<(Row, Option<i64>)> {
    let mut slots: Vec<Option<Value>> = vec![None; table.columns.len()];
    let mut row_id = None;
    for (id, v) in stored {
        // Column ids mostly follow the columns' order: look there first.
        let at = (id as usize).checked_sub(1).filter(|&p| table.columns.get(p).is_some_and(|c| c.id == id));
        match at.or_else(|| table.columns.iter().position(|c| c.id == id)) {
            Some(p) => slots[p] = Some(v),
            None if id == 0 && table.pk.is_none() => {
                if let Value::Int(i) = v {
                    row_id = Some(i);
                }
            }
            None => {}
        }
    }
    let mut out: Row = Vec::with_capacity(table.columns.len());
    for (p, (c, v)) in table.columns.iter().zip(slots).enumerate() {
        out.push(match v {
            Some(v) => v,
            None if !defaulted(p) => Value::Null,
            None => match &c.default {
                Some(crate::catalog::DefaultValue::Text(t)) => {
                    c.ty.coerce(Value::str(t.clone()), &c.name).unwrap_or(Value::Null)
                }
                _ => Value::Null,
            },
        });
    }
    Ok((out, row_id))
}

/// Whether an index entry for these values must be unique (unique index, no NULLs).
pub fn is_unique_entry(index: &IndexInfo, row: &Row) -> bool {
    index.unique && index.columns.iter().all(|&c| !row[c].is_null())
}

/// The key of a row's entry in `index`, and its value.
pub fn index_entry(table: &TableInfo, index: &IndexInfo, row: &Row, handle: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let mut key = index_prefix(table.table_id(), TableInfo::index_id(index));
    for &c in &index.columns {
        memcmp::encode_value(&mut key, &key_value(&row[c]));
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
        memcmp::encode_value(&mut key, &key_value(v));
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
        memcmp::encode_value(&mut key, &key_value(v));
    }
    key
}
