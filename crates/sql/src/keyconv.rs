//! Turning a value compared with a key column into a key bound.
//!
//! A predicate `col OP v` compares with MySQL's rules (`Value::sql_cmp`): strings against
//! numbers as doubles, numbers against each other exactly, strings against temporal values
//! as temporal values. An index can serve it only where the key order agrees with that
//! comparison, and only with a bound that covers every row the comparison accepts. The
//! scan re-checks the predicate on each row, so a bound may be wider than needed (rounded
//! inclusively) but never narrower. Where the key order does not agree (a string column
//! compared with a number: `'10' < '9'` as strings, `10 > 9` as numbers) the key is not
//! usable and the whole table is read.

use rust_decimal::prelude::{FromPrimitive, ToPrimitive};
use rust_decimal::Decimal;
use strata_common::Value;

use crate::types::ColumnType;

/// Which side of a range the value bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// `col = v`
    Eq,
    /// `col > v` / `col >= v`
    Lower,
    /// `col < v` / `col <= v`
    Upper,
}

/// A value converted for a key column.
#[derive(Clone, Debug)]
pub enum KeyConv {
    /// No row can satisfy the comparison (NULL, or out of the column's range on the
    /// wrong side).
    Empty,
    /// The bound excludes nothing: out of range on the open side.
    Unbounded,
    /// The key order does not agree with the comparison: read everything.
    Unusable,
    /// A key value of the column's type; `exact` when it equals `v` under the comparison
    /// (an inexact bound is taken inclusively, an inexact equality matches nothing).
    At(Value, bool),
}

/// 2^53: doubles beyond it no longer hold every integer.
const EXACT_DOUBLE_INT: f64 = 9_007_199_254_740_992.0;

/// Converts `v` (compared with a column of type `ty`) into a bound on `side`.
pub fn key_conv(ty: &ColumnType, v: &Value, side: Side) -> KeyConv {
    if v.is_null() {
        return KeyConv::Empty;
    }
    match ty {
        ColumnType::Int { bytes, unsigned } => {
            let (min, max) = crate::types::int_range(*bytes, *unsigned);
            match v {
                Value::Int(_) | Value::UInt(_) | Value::Decimal(_) => {
                    let d = match v.as_decimal() {
                        Some(d) => d,
                        None => return KeyConv::Unusable,
                    };
                    int_bound(d, min, max, *unsigned, side)
                }
                Value::Double(f) => double_int_bound(*f, min, max, *unsigned, side),
                // Strings and temporal values compare with numbers as doubles.
                other => match other.as_f64() {
                    Some(f) if matches!(other, Value::Bytes(_)) => double_int_bound(f, min, max, *unsigned, side),
                    _ => KeyConv::Unusable,
                },
            }
        }
        ColumnType::Decimal { precision, scale } => {
            let d = match v {
                Value::Int(_) | Value::UInt(_) | Value::Decimal(_) => v.as_decimal(),
                Value::Double(f) if f.abs() < EXACT_DOUBLE_INT => Decimal::from_f64(*f),
                Value::Bytes(_) => v.as_f64().filter(|f| f.abs() < EXACT_DOUBLE_INT).and_then(Decimal::from_f64),
                _ => None,
            };
            let Some(d) = d else { return KeyConv::Unusable };
            let int_digits = (*precision - *scale) as u32;
            if int_digits < 28 {
                let limit = Decimal::from_i128_with_scale(10i128.pow(int_digits), 0);
                if d.abs() >= limit {
                    return out_of_range(d.is_sign_negative(), side);
                }
            }
            let mut r = d.round_dp_with_strategy(*scale as u32, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
            r.rescale(*scale as u32);
            let exact = r == d;
            at(Value::Decimal(r), exact, side)
        }
        ColumnType::Float | ColumnType::Double => {
            let f = match v {
                Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Double(_) | Value::Bytes(_) => v.as_f64(),
                _ => None,
            };
            match f {
                Some(f) if f.is_finite() => {
                    // A FLOAT column holds single-precision values; a double between two of
                    // them equals none.
                    let exact = *ty == ColumnType::Double || (f as f32) as f64 == f;
                    at(Value::Double(f), exact, side)
                }
                _ => KeyConv::Unusable,
            }
        }
        t if t.is_string() => match v {
            Value::Bytes(b) => KeyConv::At(Value::Bytes(b.clone()), true),
            _ => KeyConv::Unusable,
        },
        ColumnType::Date | ColumnType::DateTime(_) | ColumnType::Timestamp(_) => match v {
            Value::Date(_) | Value::DateTime(_) | Value::Bytes(_) | Value::Int(_) | Value::UInt(_) => {
                match ty.coerce(v.clone(), "") {
                    Ok(c) => {
                        let exact = c.sql_cmp(v) == Some(std::cmp::Ordering::Equal);
                        at(c, exact, side)
                    }
                    Err(_) => KeyConv::Unusable,
                }
            }
            _ => KeyConv::Unusable,
        },
        ColumnType::Time(_) => match v {
            Value::Time(_) | Value::Bytes(_) => match ty.coerce(v.clone(), "") {
                Ok(c) => {
                    let exact = c.sql_cmp(v) == Some(std::cmp::Ordering::Equal);
                    at(c, exact, side)
                }
                Err(_) => KeyConv::Unusable,
            },
            _ => KeyConv::Unusable,
        },
        _ => KeyConv::Unusable,
    }
}

fn at(v: Value, exact: bool, side: Side) -> KeyConv {
    if side == Side::Eq && !exact {
        KeyConv::Empty
    } else {
        KeyConv::At(v, exact)
    }
}

/// A value beyond the column's range: below the minimum (`negative`) or above the maximum.
fn out_of_range(negative: bool, side: Side) -> KeyConv {
    match (side, negative) {
        (Side::Eq, _) => KeyConv::Empty,
        // col > (below min): everything; col > (above max): nothing.
        (Side::Lower, true) | (Side::Upper, false) => KeyConv::Unbounded,
        (Side::Lower, false) | (Side::Upper, true) => KeyConv::Empty,
    }
}

fn int_value(n: i128, unsigned: bool) -> Value {
    if unsigned {
        Value::UInt(n as u64)
    } else {
        Value::Int(n as i64)
    }
}

fn int_bound(d: Decimal, min: i128, max: i128, unsigned: bool, side: Side) -> KeyConv {
    let r = d.round_dp_with_strategy(0, rust_decimal::RoundingStrategy::MidpointAwayFromZero);
    let Some(n) = r.to_i128() else { return out_of_range(d.is_sign_negative(), side) };
    if n < min {
        return out_of_range(true, side);
    }
    if n > max {
        return out_of_range(false, side);
    }
    at(int_value(n, unsigned), r == d, side)
}

fn double_int_bound(f: f64, min: i128, max: i128, unsigned: bool, side: Side) -> KeyConv {
    if f.is_nan() {
        return KeyConv::Unusable;
    }
    if f.abs() >= EXACT_DOUBLE_INT {
        // Neighbouring integers compare equal to the same double here: a key bound could
        // skip rows the comparison accepts. Only the open side of an out-of-range value is
        // decidable.
        if f < min as f64 * 2.0 || f > max as f64 * 2.0 {
            return out_of_range(f < 0.0, side);
        }
        return KeyConv::Unusable;
    }
    match Decimal::from_f64(f) {
        Some(d) => int_bound(d, min, max, unsigned, side),
        None => KeyConv::Unusable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const INT: ColumnType = ColumnType::Int { bytes: 4, unsigned: false };

    fn shown(k: KeyConv) -> String {
        match k {
            KeyConv::Empty => "empty".into(),
            KeyConv::Unbounded => "unbounded".into(),
            KeyConv::Unusable => "unusable".into(),
            KeyConv::At(v, exact) => format!("{}{}", v.to_display(), if exact { "" } else { "~" }),
        }
    }

    #[test]
    fn strings_against_int_columns_compare_as_numbers() {
        assert_eq!(shown(key_conv(&INT, &Value::str("abc"), Side::Upper)), "0");
        assert_eq!(shown(key_conv(&INT, &Value::str("2.5"), Side::Lower)), "3~");
        assert_eq!(shown(key_conv(&INT, &Value::str("2.5"), Side::Eq)), "empty");
        assert_eq!(shown(key_conv(&INT, &Value::str(" 7"), Side::Eq)), "7");
    }

    #[test]
    fn out_of_range_bounds_open_or_close_the_range() {
        assert_eq!(shown(key_conv(&INT, &Value::Int(1 << 40), Side::Upper)), "unbounded");
        assert_eq!(shown(key_conv(&INT, &Value::Int(1 << 40), Side::Lower)), "empty");
        assert_eq!(shown(key_conv(&INT, &Value::Double(-1e30), Side::Lower)), "unbounded");
        assert_eq!(shown(key_conv(&INT, &Value::str("1e30"), Side::Eq)), "empty");
        let u = ColumnType::Int { bytes: 1, unsigned: true };
        assert_eq!(shown(key_conv(&u, &Value::Int(-1), Side::Lower)), "unbounded");
        assert_eq!(shown(key_conv(&u, &Value::Int(-1), Side::Upper)), "empty");
        let big = ColumnType::Int { bytes: 8, unsigned: false };
        assert_eq!(shown(key_conv(&big, &Value::str("9007199254740993"), Side::Eq)), "unusable");
    }

    #[test]
    fn string_columns_do_not_serve_numeric_comparisons() {
        assert_eq!(shown(key_conv(&ColumnType::Varchar(10), &Value::Int(-1), Side::Lower)), "unusable");
        assert_eq!(shown(key_conv(&ColumnType::Varchar(10), &Value::str("b"), Side::Eq)), "b");
    }

    #[test]
    fn decimal_and_float_columns() {
        let dec = ColumnType::Decimal { precision: 5, scale: 2 };
        assert_eq!(shown(key_conv(&dec, &Value::str("1.005"), Side::Lower)), "1.01~");
        assert_eq!(shown(key_conv(&dec, &Value::Int(1000), Side::Upper)), "unbounded");
        assert_eq!(shown(key_conv(&dec, &Value::Int(5), Side::Eq)), "5.00");
        assert_eq!(shown(key_conv(&ColumnType::Float, &Value::Double(1.1), Side::Eq)), "empty");
        assert_eq!(shown(key_conv(&ColumnType::Float, &Value::Double(1.5), Side::Eq)), "1.5");
    }
}
