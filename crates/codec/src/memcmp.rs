//! Order-preserving encoding of SQL values: for any two values of the same kind,
//! `encode(a) < encode(b)` (bytewise) exactly when `a < b`. Keys of rows and index entries are
//! concatenations of these encodings, so a RocksDB range scan is an SQL range scan.
//!
//! Each value starts with a flag byte (NULL sorts first). Byte strings use group encoding: 8
//! bytes at a time followed by a marker saying how many of them are real, so no value is a
//! prefix of a longer one and the encoding is self-delimiting.

use rust_decimal::Decimal;
use strata_common::time::DateTime;
use strata_common::{Error, Result, Value};

const NULL: u8 = 0x00;
const BYTES: u8 = 0x01;
const INT: u8 = 0x03;
const UINT: u8 = 0x04;
const DOUBLE: u8 = 0x05;
const DECIMAL: u8 = 0x06;
const DATE: u8 = 0x07;
const DATETIME: u8 = 0x08;
const TIME: u8 = 0x09;
/// A flag larger than every value flag: `prefix ++ (MAX_FLAG)` is past every key that starts
/// with `prefix` followed by an encoded value.
pub const MAX_FLAG: u8 = 0xFF;

const GROUP: usize = 8;
const MARKER: u8 = 0xFF;

/// Appends the order-preserving encoding of `v` to `out`.
pub fn encode_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(NULL),
        Value::Int(i) => {
            out.push(INT);
            out.extend_from_slice(&((*i as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::UInt(u) => {
            out.push(UINT);
            out.extend_from_slice(&u.to_be_bytes());
        }
        Value::Double(f) => {
            out.push(DOUBLE);
            let bits = f.to_bits();
            let ordered = if *f >= 0.0 { bits | (1 << 63) } else { !bits };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        Value::Decimal(d) => {
            out.push(DECIMAL);
            encode_decimal(out, d);
        }
        Value::Bytes(b) => encode_bytes_value(out, b),
        Value::Date(d) => {
            out.push(DATE);
            out.extend_from_slice(&d.to_packed().to_be_bytes());
        }
        Value::DateTime(d) => {
            out.push(DATETIME);
            out.extend_from_slice(&d.to_packed().to_be_bytes());
        }
        Value::Time(t) => {
            out.push(TIME);
            out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes());
        }
    }
}

/// Encodes several values one after another.
pub fn encode_values(out: &mut Vec<u8>, vs: &[Value]) {
    for v in vs {
        encode_value(out, v);
    }
}

/// Group encoding of a byte string (see the module docs). Sized once and written group by
/// group (pushing byte by byte grew the vector 5-6 times for a 120-byte string).
pub fn encode_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.reserve((b.len() / GROUP + 1) * (GROUP + 1));
    let mut groups = b.chunks_exact(GROUP);
    for chunk in groups.by_ref() {
        out.extend_from_slice(chunk);
        out.push(MARKER);
    }
    let rest = groups.remainder();
    let mut last = [0u8; GROUP + 1];
    last[..rest.len()].copy_from_slice(rest);
    last[GROUP] = MARKER - (GROUP - rest.len()) as u8;
    out.extend_from_slice(&last);
}

/// `encode_value` of `Value::Bytes(b)`, without the value.
pub fn encode_bytes_value(out: &mut Vec<u8>, b: &[u8]) {
    out.push(BYTES);
    encode_bytes(out, b);
}

/// Decimal as sign, exponent and digits: value = 0.DIGITS x 10^EXP. Negative values invert
/// every byte after the sign so larger magnitudes sort first.
fn encode_decimal(out: &mut Vec<u8>, d: &Decimal) {
    let d = d.normalize();
    if d.is_zero() {
        out.push(1);
        return;
    }
    let neg = d.is_sign_negative();
    let text = d.abs().to_string();
    let (int_part, frac_part) = text.split_once('.').unwrap_or((&text, ""));
    let int_part = int_part.trim_start_matches('0');
    let (exp, digits): (i32, String) = if !int_part.is_empty() {
        (int_part.len() as i32, format!("{int_part}{frac_part}"))
    } else {
        let lead = frac_part.len() - frac_part.trim_start_matches('0').len();
        (-(lead as i32), frac_part.trim_start_matches('0').to_string())
    };
    let digits = digits.trim_end_matches('0');
    let mut body = Vec::with_capacity(digits.len() + 3);
    body.extend_from_slice(&((exp + 0x8000) as u16).to_be_bytes());
    body.extend(digits.bytes().map(|c| c - b'0' + 1));
    body.push(0);
    if neg {
        out.push(0);
        out.extend(body.iter().map(|b| !b));
    } else {
        out.push(2);
        out.extend_from_slice(&body);
    }
}

/// Reads one encoded value from the front of `input`, advancing it.
pub fn decode_value(input: &mut &[u8]) -> Result<Value> {
    let (&flag, rest) = input.split_first().ok_or_else(|| corrupt("empty key"))?;
    *input = rest;
    Ok(match flag {
        NULL => Value::Null,
        INT => Value::Int((take_u64(input)? ^ (1 << 63)) as i64),
        UINT => Value::UInt(take_u64(input)?),
        DOUBLE => {
            let u = take_u64(input)?;
            let bits = if u & (1 << 63) != 0 { u & !(1 << 63) } else { !u };
            Value::Double(f64::from_bits(bits))
        }
        DECIMAL => Value::Decimal(decode_decimal(input)?),
        BYTES => Value::Bytes(decode_bytes(input)?),
        DATE => Value::Date(DateTime::from_packed(take_u64(input)?)),
        DATETIME => Value::DateTime(DateTime::from_packed(take_u64(input)?)),
        TIME => Value::Time((take_u64(input)? ^ (1 << 63)) as i64),
        other => return Err(corrupt(&format!("unknown value flag {other:#x}"))),
    })
}

/// Skips one encoded value at the front of `input`.
pub fn skip_value(input: &mut &[u8]) -> Result<()> {
    decode_value(input).map(|_| ())
}

fn take_u64(input: &mut &[u8]) -> Result<u64> {
    if input.len() < 8 {
        return Err(corrupt("truncated integer"));
    }
    let (head, rest) = input.split_at(8);
    *input = rest;
    let mut buf = [0u8; 8];
    buf.copy_from_slice(head);
    Ok(u64::from_be_bytes(buf))
}

/// Decodes a group-encoded byte string.
pub fn decode_bytes(input: &mut &[u8]) -> Result<Vec<u8>> {
    // Sized once: the groups up to the first one with padding (its last byte below the
    // marker) are the value (decoding every scanned row's key grew the vector 2-3 times).
    let groups = input.chunks_exact(GROUP + 1).position(|g| g[GROUP] != MARKER).map_or(0, |n| n + 1);
    let mut out = Vec::with_capacity(groups * GROUP);
    loop {
        if input.len() < GROUP + 1 {
            return Err(corrupt("truncated bytes"));
        }
        let marker = input[GROUP];
        let pad = (MARKER - marker) as usize;
        if pad > GROUP {
            return Err(corrupt("bad bytes marker"));
        }
        out.extend_from_slice(&input[..GROUP - pad]);
        *input = &input[GROUP + 1..];
        if pad > 0 {
            return Ok(out);
        }
    }
}

fn decode_decimal(input: &mut &[u8]) -> Result<Decimal> {
    let (&sign, rest) = input.split_first().ok_or_else(|| corrupt("truncated decimal"))?;
    *input = rest;
    if sign == 1 {
        return Ok(Decimal::ZERO);
    }
    let neg = sign == 0;
    let get = |b: u8| if neg { !b } else { b };
    if input.len() < 3 {
        return Err(corrupt("truncated decimal"));
    }
    let exp = u16::from_be_bytes([get(input[0]), get(input[1])]) as i32 - 0x8000;
    let mut digits = String::new();
    let mut i = 2;
    loop {
        let b = get(*input.get(i).ok_or_else(|| corrupt("truncated decimal"))?);
        i += 1;
        if b == 0 {
            break;
        }
        digits.push((b - 1 + b'0') as char);
    }
    *input = &input[i..];
    let text = if exp <= 0 {
        format!("0.{}{}", "0".repeat((-exp) as usize), digits)
    } else if digits.len() as i32 <= exp {
        format!("{}{}", digits, "0".repeat((exp - digits.len() as i32) as usize))
    } else {
        format!("{}.{}", &digits[..exp as usize], &digits[exp as usize..])
    };
    let d: Decimal = text.parse().map_err(|_| corrupt("bad decimal digits"))?;
    Ok(if neg { -d } else { d })
}

fn corrupt(what: &str) -> Error {
    Error::internal(format!("corrupt key encoding: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(v: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        encode_value(&mut out, v);
        out
    }

    #[test]
    fn order_is_preserved_within_each_kind() {
        let groups: Vec<Vec<Value>> = vec![
            [i64::MIN, -5, -1, 0, 1, 7, i64::MAX].iter().map(|i| Value::Int(*i)).collect(),
            [f64::MIN, -2.5, -0.0001, 0.0, 1e-9, 3.0, f64::MAX].iter().map(|f| Value::Double(*f)).collect(),
            ["-100.5", "-100", "-99.99", "-0.001", "0", "0.0001", "0.12", "0.123", "1", "9.99", "10", "123456.789"]
                .iter()
                .map(|s| Value::Decimal(s.parse().expect("decimal")))
                .collect(),
            ["", "a", "ab", "abcdefgh", "abcdefgh\0", "abcdefghi", "b"].iter().map(|s| Value::str(*s)).collect(),
        ];
        for g in groups {
            for w in g.windows(2) {
                assert!(enc(&w[0]) < enc(&w[1]), "{:?} < {:?}", w[0], w[1]);
            }
            for v in &g {
                let bytes = enc(v);
                let mut input = bytes.as_slice();
                let back = decode_value(&mut input).expect("decodes");
                assert!(input.is_empty());
                assert_eq!(back.sort_cmp(v), std::cmp::Ordering::Equal, "{v:?} -> {back:?}");
            }
        }
        assert!(enc(&Value::Null) < enc(&Value::Int(i64::MIN)));
    }

    #[test]
    fn byte_strings_are_groups_of_eight_each_with_its_count_of_real_bytes() {
        let bytes = |b: &[u8]| {
            let mut out = Vec::new();
            encode_bytes(&mut out, b);
            out
        };
        assert_eq!(bytes(b""), [0, 0, 0, 0, 0, 0, 0, 0, MARKER - 8]);
        assert_eq!(bytes(b"abc"), [b'a', b'b', b'c', 0, 0, 0, 0, 0, MARKER - 5]);
        let eight = bytes(b"abcdefgh");
        assert_eq!(eight[..9], [b'a', b'b', b'c', b'd', b'e', b'f', b'g', b'h', MARKER]);
        assert_eq!(eight[9..], [0, 0, 0, 0, 0, 0, 0, 0, MARKER - 8]);
        for n in 0..40 {
            let b: Vec<u8> = (0..n).map(|i| i as u8 + 1).collect();
            let e = bytes(&b);
            assert_eq!(e.len(), (n / GROUP + 1) * (GROUP + 1));
            assert_eq!(decode_bytes(&mut e.as_slice()).expect("decodes"), b);
        }
    }

    #[test]
    fn byte_strings_decode_one_at_a_time_and_truncation_fails() {
        let values: Vec<Vec<u8>> =
            vec![vec![], b"a".to_vec(), b"abcdefgh".to_vec(), b"abcdefghijklmnopq".to_vec(), vec![0xFF; 16]];
        let mut all = Vec::new();
        for v in &values {
            encode_value(&mut all, &Value::Bytes(v.clone()));
        }
        let mut input = all.as_slice();
        for v in &values {
            match decode_value(&mut input).expect("decodes") {
                Value::Bytes(b) => {
                    assert_eq!(&b, v);
                    assert!(b.capacity() <= v.len() + GROUP, "sized to its groups: {} for {}", b.capacity(), v.len());
                }
                other => panic!("not bytes: {other:?}"),
            }
        }
        assert!(input.is_empty());
        // A value cut inside its groups is an error, not a shorter value.
        let one = enc(&Value::str("abcdefghijk"));
        let mut cut = &one[1..one.len() - 3];
        assert!(decode_bytes(&mut cut).is_err());
    }
}
