//! The SQL value: one cell of a row, as every layer above the codec sees it.
//!
//! Strings are bytes (utf8mb4 text or binary data alike). Comparison follows TiDB's default
//! collation `utf8mb4_bin`: byte order, with trailing spaces ignored (PAD SPACE).

use std::cmp::Ordering;

use rust_decimal::prelude::{FromPrimitive, ToPrimitive};
use rust_decimal::Decimal;

use crate::time::{format_duration, DateTime};

/// One SQL value.
#[derive(Clone, Debug)]
pub enum Value {
    /// SQL NULL.
    Null,
    /// A signed integer (any signed integer column, BOOLEAN).
    Int(i64),
    /// An unsigned integer.
    UInt(u64),
    /// FLOAT or DOUBLE.
    Double(f64),
    /// An exact DECIMAL.
    Decimal(Decimal),
    /// CHAR, VARCHAR, TEXT, BLOB, BINARY.
    Bytes(Vec<u8>),
    /// A DATE (time fields zero).
    Date(DateTime),
    /// A DATETIME or TIMESTAMP.
    DateTime(DateTime),
    /// A TIME, in microseconds.
    Time(i64),
}

impl Value {
    /// Whether this is NULL.
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// A string value.
    pub fn str(s: impl Into<String>) -> Value {
        Value::Bytes(s.into().into_bytes())
    }

    /// Whether the value is a number (integer, decimal or float).
    pub fn is_numeric(&self) -> bool {
        matches!(self, Value::Int(_) | Value::UInt(_) | Value::Double(_) | Value::Decimal(_))
    }

    /// The value as f64, converting strings the MySQL way (leading numeric prefix).
    pub fn as_f64(&self) -> Option<f64> {
        Some(match self {
            Value::Null => return None,
            Value::Int(i) => *i as f64,
            Value::UInt(u) => *u as f64,
            Value::Double(f) => *f,
            Value::Decimal(d) => d.to_f64().unwrap_or(0.0),
            Value::Bytes(b) => parse_f64_prefix(b),
            Value::Date(d) | Value::DateTime(d) => datetime_as_number(d) as f64,
            Value::Time(t) => duration_as_number(*t) as f64,
        })
    }

    /// The value as an exact decimal, if it has a numeric reading.
    pub fn as_decimal(&self) -> Option<Decimal> {
        match self {
            Value::Null => None,
            Value::Int(i) => Some(Decimal::from(*i)),
            Value::UInt(u) => Some(Decimal::from(*u)),
            Value::Double(f) => Decimal::from_f64(*f),
            Value::Decimal(d) => Some(*d),
            Value::Bytes(b) => {
                let s = std::str::from_utf8(b).unwrap_or("").trim();
                let end = numeric_prefix_len(s.as_bytes());
                s[..end]
                    .parse::<Decimal>()
                    .ok()
                    .or_else(|| Decimal::from_f64(parse_f64_prefix(b)))
                    .or(Some(Decimal::ZERO))
            }
            Value::Date(d) | Value::DateTime(d) => Some(Decimal::from(datetime_as_number(d))),
            Value::Time(t) => Some(Decimal::from(duration_as_number(*t))),
        }
    }

    /// The value as i64 with MySQL rounding (half away from zero); saturates.
    pub fn as_i64(&self) -> Option<i64> {
        Some(match self {
            Value::Null => return None,
            Value::Int(i) => *i,
            Value::UInt(u) => (*u).min(i64::MAX as u64) as i64,
            Value::Double(f) => f.round() as i64,
            Value::Decimal(d) => d.round().to_i64().unwrap_or(if d.is_sign_negative() { i64::MIN } else { i64::MAX }),
            Value::Bytes(_) => return self.as_decimal().and_then(|d| Value::Decimal(d).as_i64()),
            Value::Date(d) | Value::DateTime(d) => datetime_as_number(d),
            Value::Time(t) => duration_as_number(*t),
        })
    }

    /// MySQL truthiness: NULL is None, zero is false.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Value::Null => None,
            Value::Int(i) => Some(*i != 0),
            Value::UInt(u) => Some(*u != 0),
            Value::Decimal(d) => Some(!d.is_zero()),
            other => other.as_f64().map(|f| f != 0.0),
        }
    }

    /// The text form MySQL's text protocol sends (None for NULL).
    pub fn to_text(&self) -> Option<Vec<u8>> {
        Some(match self {
            Value::Null => return None,
            Value::Int(i) => i.to_string().into_bytes(),
            Value::UInt(u) => u.to_string().into_bytes(),
            Value::Double(f) => format_double(*f).into_bytes(),
            Value::Decimal(d) => d.to_string().into_bytes(),
            Value::Bytes(b) => b.clone(),
            Value::Date(d) => d.format_date().into_bytes(),
            Value::DateTime(d) => d.format_datetime(if d.micro > 0 { 6 } else { 0 }).into_bytes(),
            Value::Time(t) => format_duration(*t, if t % 1_000_000 != 0 { 6 } else { 0 }).into_bytes(),
        })
    }

    /// The text form as a String (lossy for binary data); "NULL" for NULL.
    pub fn to_display(&self) -> String {
        match self.to_text() {
            Some(b) => String::from_utf8_lossy(&b).into_owned(),
            None => "NULL".to_string(),
        }
    }

    /// SQL comparison: None when either side is NULL. Mixed types compare the MySQL way:
    /// numbers numerically (exactly where both are exact), strings against numbers as
    /// doubles, strings against temporal values as temporal values.
    pub fn sql_cmp(&self, other: &Value) -> Option<Ordering> {
        use Value::*;
        Some(match (self, other) {
            (Null, _) | (_, Null) => return None,
            (Int(a), Int(b)) => a.cmp(b),
            (UInt(a), UInt(b)) => a.cmp(b),
            (Int(a), UInt(b)) => {
                if *a < 0 {
                    Ordering::Less
                } else {
                    (*a as u64).cmp(b)
                }
            }
            (UInt(a), Int(b)) => {
                if *b < 0 {
                    Ordering::Greater
                } else {
                    a.cmp(&(*b as u64))
                }
            }
            (Bytes(a), Bytes(b)) => trim_pad(a).cmp(trim_pad(b)),
            (Date(a) | DateTime(a), Date(b) | DateTime(b)) => a.cmp(b),
            (Time(a), Time(b)) => a.cmp(b),
            (Date(a) | DateTime(a), Bytes(b)) => match parse_datetime_bytes(b) {
                Some(b) => a.cmp(&b),
                None => return self.as_f64()?.partial_cmp(&other.as_f64()?),
            },
            (Bytes(a), Date(b) | DateTime(b)) => match parse_datetime_bytes(a) {
                Some(a) => a.cmp(b),
                None => return self.as_f64()?.partial_cmp(&other.as_f64()?),
            },
            // A number against a date compares as a date when it reads as one (20200101),
            // as MySQL converts the constant of a temporal comparison.
            (Date(a) | DateTime(a), Int(_) | UInt(_) | Decimal(_)) if number_as_datetime(other).is_some() => {
                a.cmp(&number_as_datetime(other)?)
            }
            (Int(_) | UInt(_) | Decimal(_), Date(b) | DateTime(b)) if number_as_datetime(self).is_some() => {
                number_as_datetime(self)?.cmp(b)
            }
            (Double(_), _) | (_, Double(_)) | (Bytes(_), _) | (_, Bytes(_)) => {
                return self.as_f64()?.partial_cmp(&other.as_f64()?);
            }
            _ => self.as_decimal()?.cmp(&other.as_decimal()?),
        })
    }

    /// A total order for sorting and grouping: NULL first, then by `sql_cmp`.
    pub fn sort_cmp(&self, other: &Value) -> Ordering {
        match (self.is_null(), other.is_null()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            _ => self.sql_cmp(other).unwrap_or(Ordering::Equal),
        }
    }
}

impl PartialEq for Value {
    /// Equality as used for grouping: NULLs are equal to each other.
    fn eq(&self, other: &Value) -> bool {
        self.sort_cmp(other) == Ordering::Equal
    }
}

/// An integral number read as a date (YYYYMMDD) or date-time (YYYYMMDDhhmmss).
fn number_as_datetime(v: &Value) -> Option<DateTime> {
    let n = match v {
        Value::Int(i) => *i,
        Value::UInt(u) => i64::try_from(*u).ok()?,
        Value::Decimal(d) if d.fract().is_zero() => d.to_i64()?,
        _ => return None,
    };
    if n <= 0 {
        return None;
    }
    DateTime::parse(&n.to_string())
}

/// Formats a double the way MySQL prints it: shortest round-trip digits, exponent for very
/// large or small magnitudes.
pub fn format_double(f: f64) -> String {
    if f.is_nan() || f.is_infinite() {
        return "NULL".to_string();
    }
    if f == 0.0 {
        return "0".to_string();
    }
    let abs = f.abs();
    if !(1e-15..1e15).contains(&abs) {
        let s = format!("{:e}", f);
        // Rust prints 1e20 / 1.5e-20; MySQL prints 1e20 / 1.5e-20 too.
        return s;
    }
    let s = format!("{}", f);
    s
}

fn trim_pad(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|c| *c != b' ').map(|i| i + 1).unwrap_or(0);
    &b[..end]
}

fn parse_datetime_bytes(b: &[u8]) -> Option<DateTime> {
    DateTime::parse(std::str::from_utf8(b).ok()?)
}

fn numeric_prefix_len(b: &[u8]) -> usize {
    let mut i = 0;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    let digits_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i < b.len() && b[i] == b'.' {
        i += 1;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
    }
    if i == digits_start {
        return 0;
    }
    i
}

/// Parses the longest numeric prefix of a string as MySQL does (`'12abc'` is 12, `'abc'` is 0).
pub fn parse_f64_prefix(b: &[u8]) -> f64 {
    let s = std::str::from_utf8(b).unwrap_or("").trim_start();
    let bytes = s.as_bytes();
    let mut end = numeric_prefix_len(bytes);
    if end > 0 && end < bytes.len() && (bytes[end] == b'e' || bytes[end] == b'E') {
        let mut j = end + 1;
        if j < bytes.len() && (bytes[j] == b'-' || bytes[j] == b'+') {
            j += 1;
        }
        let exp_start = j;
        while j < bytes.len() && bytes[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_start {
            end = j;
        }
    }
    s[..end].parse().unwrap_or(0.0)
}

fn datetime_as_number(d: &DateTime) -> i64 {
    let date = d.year as i64 * 10000 + d.month as i64 * 100 + d.day as i64;
    if d.hour == 0 && d.minute == 0 && d.second == 0 {
        date
    } else {
        date * 1_000_000 + d.hour as i64 * 10000 + d.minute as i64 * 100 + d.second as i64
    }
}

fn duration_as_number(us: i64) -> i64 {
    let s = us.abs() / 1_000_000;
    let n = (s / 3600) * 10000 + ((s / 60) % 60) * 100 + s % 60;
    if us < 0 {
        -n
    } else {
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixed_comparisons_follow_mysql() {
        assert_eq!(Value::Int(-1).sql_cmp(&Value::UInt(1)), Some(Ordering::Less));
        assert_eq!(Value::str("10").sql_cmp(&Value::Int(9)), Some(Ordering::Greater));
        assert_eq!(Value::str("abc ").sql_cmp(&Value::str("abc")), Some(Ordering::Equal));
        assert_eq!(Value::Null.sql_cmp(&Value::Int(1)), None);
        let d = Value::Decimal("1.50".parse().expect("decimal"));
        assert_eq!(d.sql_cmp(&Value::Int(1)), Some(Ordering::Greater));
        assert_eq!(Value::str("12abc").as_i64(), Some(12));
    }
}
