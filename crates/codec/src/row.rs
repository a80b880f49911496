//! The row value format: the columns of one row, each tagged with its column id so that
//! ADD/DROP COLUMN never rewrites existing rows (a missing id reads as the column's default).
//!
//! ```text
//!   version:u8=1  count:varint  ( column_id:varint  tag:u8  payload )*
//! ```

use rust_decimal::Decimal;
use strata_common::time::DateTime;
use strata_common::{Error, Result, Value};

const VERSION: u8 = 1;

/// Appends `v` as a LEB128 varint (7 bits a byte, low first).
pub fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Reads a varint `put_varint` wrote, advancing `input`.
#[inline]
pub fn get_varint(input: &mut &[u8]) -> Result<u64> {
    // Column ids, counts and short lengths are one byte.
    if let Some((&b, rest)) = input.split_first() {
        if b < 0x80 {
            *input = rest;
            return Ok(b as u64);
        }
    }
    get_long_varint(input)
}

fn get_long_varint(input: &mut &[u8]) -> Result<u64> {
    let mut v = 0u64;
    let mut shift = 0;
    while shift < 64 {
        let (&b, rest) = input.split_first().ok_or_else(|| corrupt("truncated varint"))?;
        *input = rest;
        v |= ((b & 0x7F) as u64) << shift;
        if b < 0x80 {
            return Ok(v);
        }
        shift += 7;
    }
    Err(corrupt("varint too long"))
}

fn take<'a>(input: &mut &'a [u8], n: usize) -> Result<&'a [u8]> {
    if input.len() < n {
        return Err(corrupt("truncated value"));
    }
    let (head, rest) = input.split_at(n);
    *input = rest;
    Ok(head)
}

fn take8(input: &mut &[u8]) -> Result<[u8; 8]> {
    let mut b = [0u8; 8];
    b.copy_from_slice(take(input, 8)?);
    Ok(b)
}

/// Encodes `(column id, value)` pairs.
pub fn encode_row(cols: &[(u32, &Value)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(1 + cols.len() * 10);
    out.push(VERSION);
    put_varint(&mut out, cols.len() as u64);
    for (id, v) in cols {
        put_varint(&mut out, *id as u64);
        encode_tagged(&mut out, v);
    }
    out
}

/// Appends one value with a type tag (not order-preserving; compact).
pub fn encode_tagged(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(0),
        Value::Int(i) => {
            out.push(1);
            out.extend_from_slice(&i.to_le_bytes());
        }
        Value::UInt(u) => {
            out.push(2);
            out.extend_from_slice(&u.to_le_bytes());
        }
        Value::Double(f) => {
            out.push(3);
            out.extend_from_slice(&f.to_le_bytes());
        }
        Value::Decimal(d) => {
            out.push(4);
            out.extend_from_slice(&d.serialize());
        }
        Value::Bytes(b) => {
            out.push(5);
            put_varint(out, b.len() as u64);
            out.extend_from_slice(b);
        }
        Value::Date(d) => {
            out.push(6);
            out.extend_from_slice(&d.to_packed().to_le_bytes());
        }
        Value::DateTime(d) => {
            out.push(7);
            out.extend_from_slice(&d.to_packed().to_le_bytes());
        }
        Value::Time(t) => {
            out.push(8);
            out.extend_from_slice(&t.to_le_bytes());
        }
    }
}

/// Reads one tagged value.
pub fn decode_tagged(input: &mut &[u8]) -> Result<Value> {
    let (&tag, rest) = input.split_first().ok_or_else(|| corrupt("truncated tag"))?;
    *input = rest;
    Ok(match tag {
        0 => Value::Null,
        1 => Value::Int(i64::from_le_bytes(take8(input)?)),
        2 => Value::UInt(u64::from_le_bytes(take8(input)?)),
        3 => Value::Double(f64::from_le_bytes(take8(input)?)),
        4 => {
            let mut b = [0u8; 16];
            b.copy_from_slice(take(input, 16)?);
            Value::Decimal(Decimal::deserialize(b))
        }
        5 => {
            let n = get_varint(input)? as usize;
            Value::Bytes(take(input, n)?.to_vec())
        }
        6 => Value::Date(DateTime::from_packed(u64::from_le_bytes(take8(input)?))),
        7 => Value::DateTime(DateTime::from_packed(u64::from_le_bytes(take8(input)?))),
        8 => Value::Time(i64::from_le_bytes(take8(input)?)),
        other => return Err(corrupt(&format!("unknown tag {other}"))),
    })
}

/// Decodes a row into `(column id, value)` pairs.
pub fn decode_row(input: &[u8]) -> Result<Vec<(u32, Value)>> {
    decode_row_with(input, |_| true)
}

/// Decodes the columns of a row whose ids `wanted` accepts, skipping the others' values
/// without building them.
pub fn decode_row_with(input: &[u8], wanted: impl Fn(u32) -> bool) -> Result<Vec<(u32, Value)>> {
    let mut reader = RowReader::new(input)?;
    let mut out = Vec::with_capacity(reader.remaining().min(4096));
    while let Some(id) = reader.next_id()? {
        if wanted(id) {
            out.push((id, reader.value()?));
        } else {
            reader.skip()?;
        }
    }
    Ok(out)
}

/// Reads a stored row one column at a time, with no allocation of its own: each
/// column's id, then its value decoded (`value`) or stepped over (`skip`), so a caller
/// can put values straight where they go and build only those it wants.
pub struct RowReader<'a> {
    input: &'a [u8],
    left: usize,
}

impl<'a> RowReader<'a> {
    /// A reader of the stored row `input`.
    pub fn new(mut input: &'a [u8]) -> Result<RowReader<'a>> {
        let version = take(&mut input, 1)?[0];
        if version != VERSION {
            return Err(corrupt(&format!("unknown row version {version}")));
        }
        let left = get_varint(&mut input)? as usize;
        Ok(RowReader { input, left })
    }

    /// Columns not read yet (as the row says: a corrupt count fails when it runs out).
    pub fn remaining(&self) -> usize {
        self.left
    }

    /// The next column's id, or None after the last; `value` or `skip` must follow.
    pub fn next_id(&mut self) -> Result<Option<u32>> {
        if self.left == 0 {
            return Ok(None);
        }
        self.left -= 1;
        Ok(Some(get_varint(&mut self.input)? as u32))
    }

    /// The value of the column whose id was just read.
    pub fn value(&mut self) -> Result<Value> {
        decode_tagged(&mut self.input)
    }

    /// `value` written over `out`; a string goes into `out`'s buffer when `out` already
    /// holds one, so a caller decoding row after row into the same values allocates for
    /// strings only when they grow.
    pub fn value_into(&mut self, out: &mut Value) -> Result<()> {
        if let (Some(5), Value::Bytes(buf)) = (self.input.first(), &mut *out) {
            let mut input = &self.input[1..];
            let n = get_varint(&mut input)? as usize;
            let bytes = take(&mut input, n)?;
            buf.clear();
            buf.extend_from_slice(bytes);
            self.input = input;
            return Ok(());
        }
        *out = self.value()?;
        Ok(())
    }

    /// Steps over the value of the column whose id was just read.
    pub fn skip(&mut self) -> Result<()> {
        skip_tagged(&mut self.input)
    }
}

/// Steps over one tagged value.
fn skip_tagged(input: &mut &[u8]) -> Result<()> {
    let (&tag, rest) = input.split_first().ok_or_else(|| corrupt("truncated tag"))?;
    *input = rest;
    let len = match tag {
        0 => 0,
        1 | 2 | 3 | 6 | 7 | 8 => 8,
        4 => 16,
        5 => get_varint(input)? as usize,
        other => return Err(corrupt(&format!("unknown tag {other}"))),
    };
    take(input, len)?;
    Ok(())
}

fn corrupt(what: &str) -> Error {
    Error::internal(format!("corrupt row: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip() {
        let vals = [
            Value::Null,
            Value::Int(-9),
            Value::UInt(u64::MAX),
            Value::Double(1.5),
            Value::Decimal("-12.345".parse().expect("decimal")),
            Value::str("hello"),
            Value::DateTime(DateTime::parse("2020-01-02 03:04:05").expect("date")),
            Value::Time(-5),
        ];
        let pairs: Vec<(u32, &Value)> = vals.iter().enumerate().map(|(i, v)| (i as u32 * 300, v)).collect();
        let decoded = decode_row(&encode_row(&pairs)).expect("decodes");
        assert_eq!(decoded.len(), vals.len());
        for ((id, v), (i, orig)) in decoded.iter().zip(vals.iter().enumerate()) {
            assert_eq!(*id, i as u32 * 300);
            assert_eq!(v.to_display(), orig.to_display());
        }
        assert!(decode_row(&[1, 5, 0]).is_err());
        // Skipping the others' values leaves exactly the wanted ones.
        let some = decode_row_with(&encode_row(&pairs), |id| id == 600 || id == 1500).expect("decodes");
        assert_eq!(some.len(), 2);
        assert_eq!((some[0].0, some[0].1.to_display()), (600, vals[2].to_display()));
        assert_eq!((some[1].0, some[1].1.to_display()), (1500, vals[5].to_display()));
        // Decoding over earlier values: strings reuse their buffer, other types replace.
        let row = encode_row(&pairs);
        let mut into = vec![Value::str("a much longer earlier string"); vals.len()];
        let mut reader = RowReader::new(&row).expect("decodes");
        for v in &mut into {
            reader.next_id().expect("decodes");
            reader.value_into(v).expect("decodes");
        }
        let shown: Vec<String> = into.iter().map(Value::to_display).collect();
        assert_eq!(shown, vals.iter().map(Value::to_display).collect::<Vec<_>>());
        assert!(
            RowReader::new(&[1, 1, 0, 5, 9, b'x'])
                .and_then(|mut r| {
                    r.next_id()?;
                    r.value_into(&mut Value::str("y"))
                })
                .is_err(),
            "a string longer than the row fails"
        );
    }
}
