//! SQL column types and the conversion of values into them (MySQL's rules for storing a
//! value in a column: range checks, truncation, string to number and date parsing).

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};
use serde::{Deserialize, Serialize};
use strata_common::time::{parse_duration, DateTime};
use strata_common::{Code, Error, Result, Value};

/// A column's type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ColumnType {
    /// TINYINT (1), SMALLINT (2), MEDIUMINT (3), INT (4), BIGINT (8) bytes.
    Int {
        /// Storage size in bytes.
        bytes: u8,
        /// UNSIGNED.
        unsigned: bool,
    },
    /// DECIMAL(precision, scale).
    Decimal {
        /// Total digits.
        precision: u8,
        /// Digits after the point.
        scale: u8,
    },
    /// FLOAT (single precision).
    Float,
    /// DOUBLE.
    Double,
    /// CHAR(n).
    Char(u32),
    /// VARCHAR(n).
    Varchar(u32),
    /// TEXT family (max bytes).
    Text(u32),
    /// BLOB / BINARY / VARBINARY family (max bytes).
    Blob(u32),
    /// DATE.
    Date,
    /// DATETIME(fsp).
    DateTime(u8),
    /// TIMESTAMP(fsp).
    Timestamp(u8),
    /// TIME(fsp).
    Time(u8),
}

/// The smallest and largest values of an integer type of `bytes` bytes.
pub fn int_range(bytes: u8, unsigned: bool) -> (i128, i128) {
    let bits = bytes as u32 * 8;
    if unsigned {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    }
}

impl ColumnType {
    /// Whether values of this type are strings.
    pub fn is_string(&self) -> bool {
        matches!(self, ColumnType::Char(_) | ColumnType::Varchar(_) | ColumnType::Text(_) | ColumnType::Blob(_))
    }

    /// The type as SHOW CREATE TABLE / information_schema print it.
    pub fn sql_name(&self) -> String {
        match self {
            ColumnType::Int { bytes, unsigned } => {
                let base = match bytes {
                    1 => "tinyint",
                    2 => "smallint",
                    3 => "mediumint",
                    4 => "int",
                    _ => "bigint",
                };
                if *unsigned {
                    format!("{base} unsigned")
                } else {
                    base.to_string()
                }
            }
            ColumnType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
            ColumnType::Float => "float".into(),
            ColumnType::Double => "double".into(),
            ColumnType::Char(n) => format!("char({n})"),
            ColumnType::Varchar(n) => format!("varchar({n})"),
            ColumnType::Text(n) => match n {
                255 => "tinytext".into(),
                65535 => "text".into(),
                16_777_215 => "mediumtext".into(),
                _ => "longtext".into(),
            },
            ColumnType::Blob(n) => match n {
                255 => "tinyblob".into(),
                65535 => "blob".into(),
                16_777_215 => "mediumblob".into(),
                _ => "longblob".into(),
            },
            ColumnType::Date => "date".into(),
            ColumnType::DateTime(0) => "datetime".into(),
            ColumnType::DateTime(f) => format!("datetime({f})"),
            ColumnType::Timestamp(0) => "timestamp".into(),
            ColumnType::Timestamp(f) => format!("timestamp({f})"),
            ColumnType::Time(0) => "time".into(),
            ColumnType::Time(f) => format!("time({f})"),
        }
    }

    /// The MySQL protocol type code for result set metadata.
    pub fn protocol_type(&self) -> u8 {
        match self {
            ColumnType::Int { bytes: 1, .. } => 1,
            ColumnType::Int { bytes: 2, .. } => 2,
            ColumnType::Int { bytes: 3, .. } => 9,
            ColumnType::Int { bytes: 4, .. } => 3,
            ColumnType::Int { .. } => 8,
            ColumnType::Decimal { .. } => 246,
            ColumnType::Float => 4,
            ColumnType::Double => 5,
            ColumnType::Char(_) => 254,
            ColumnType::Varchar(_) => 253,
            ColumnType::Text(_) | ColumnType::Blob(_) => 252,
            ColumnType::Date => 10,
            ColumnType::DateTime(_) => 12,
            ColumnType::Timestamp(_) => 7,
            ColumnType::Time(_) => 11,
        }
    }

    /// Display width for result metadata.
    pub fn display_len(&self) -> u32 {
        match self {
            ColumnType::Int { bytes, .. } => match bytes {
                1 => 4,
                2 => 6,
                3 => 9,
                4 => 11,
                _ => 20,
            },
            ColumnType::Decimal { precision, .. } => *precision as u32 + 2,
            ColumnType::Float => 12,
            ColumnType::Double => 22,
            ColumnType::Char(n) | ColumnType::Varchar(n) => n * 4,
            ColumnType::Text(n) | ColumnType::Blob(n) => *n,
            ColumnType::Date => 10,
            ColumnType::DateTime(f) | ColumnType::Timestamp(f) => 19 + if *f > 0 { *f as u32 + 1 } else { 0 },
            ColumnType::Time(f) => 10 + if *f > 0 { *f as u32 + 1 } else { 0 },
        }
    }

    /// Digits after the point (decimals field of the protocol).
    pub fn decimals(&self) -> u8 {
        match self {
            ColumnType::Decimal { scale, .. } => *scale,
            ColumnType::Float | ColumnType::Double => 31,
            ColumnType::DateTime(f) | ColumnType::Timestamp(f) | ColumnType::Time(f) => *f,
            _ => 0,
        }
    }

    /// Whether the column is binary (BLOB/BINARY) rather than text.
    pub fn is_binary(&self) -> bool {
        matches!(self, ColumnType::Blob(_))
    }

    /// Converts `v` for storage in a column of this type, with MySQL's strict-mode errors.
    pub fn coerce(&self, v: Value, column: &str) -> Result<Value> {
        if v.is_null() {
            return Ok(Value::Null);
        }
        let bad = |v: &Value| {
            Error::user(
                Code::TruncatedWrongValueForField,
                format!("Incorrect {} value: '{}' for column '{}' at row 1", self.kind_name(), v.to_display(), column),
            )
        };
        let out_of_range =
            || Error::user(Code::DataOutOfRange, format!("Out of range value for column '{column}' at row 1"));
        match self {
            ColumnType::Int { bytes, unsigned } => {
                if let Value::Bytes(b) = &v {
                    let s = std::str::from_utf8(b).unwrap_or("").trim();
                    if s.parse::<f64>().is_err() {
                        return Err(bad(&v));
                    }
                }
                let bits = *bytes as u32 * 8;
                if *unsigned {
                    let max: u64 = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
                    let n: u64 = match &v {
                        Value::UInt(u) => *u,
                        Value::Int(i) if *i < 0 => return Err(out_of_range()),
                        Value::Int(i) => *i as u64,
                        other => {
                            let d = other
                                .as_decimal()
                                .ok_or_else(out_of_range)?
                                .round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero);
                            if d.is_sign_negative() && !d.is_zero() {
                                return Err(out_of_range());
                            }
                            d.to_u64().ok_or_else(out_of_range)?
                        }
                    };
                    if n > max {
                        return Err(out_of_range());
                    }
                    Ok(Value::UInt(n))
                } else {
                    let (min, max) = if bits == 64 {
                        (i64::MIN, i64::MAX)
                    } else {
                        (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
                    };
                    let n: i64 = match &v {
                        Value::Int(i) => *i,
                        Value::UInt(u) => i64::try_from(*u).map_err(|_| out_of_range())?,
                        other => {
                            let d = other
                                .as_decimal()
                                .ok_or_else(out_of_range)?
                                .round_dp_with_strategy(0, RoundingStrategy::MidpointAwayFromZero);
                            d.to_i64().ok_or_else(out_of_range)?
                        }
                    };
                    if n < min || n > max {
                        return Err(out_of_range());
                    }
                    Ok(Value::Int(n))
                }
            }
            ColumnType::Decimal { precision, scale } => {
                if let Value::Bytes(b) = &v {
                    let s = std::str::from_utf8(b).unwrap_or("").trim();
                    if s.parse::<f64>().is_err() {
                        return Err(bad(&v));
                    }
                }
                let d = v.as_decimal().ok_or_else(out_of_range)?;
                let int_digits = (*precision - *scale) as u32;
                // The mantissa at the column's scale, when that is exact (no digit dropped
                // but zeros: `12.340000` from a client's float formatting): then the range
                // is a bound on it, what the general path below checks, in integers.
                let m = match d.scale().checked_sub(*scale as u32) {
                    None => 10i128.checked_pow(*scale as u32 - d.scale()).and_then(|p| d.mantissa().checked_mul(p)),
                    Some(extra) => {
                        let p = 10i128.pow(extra);
                        (d.mantissa() % p == 0).then(|| d.mantissa() / p)
                    }
                };
                if let Some(m) = m {
                    let fits = int_digits >= 28
                        || 10u128.checked_pow(*precision as u32).is_none_or(|bound| m.unsigned_abs() < bound);
                    if !fits {
                        return Err(out_of_range());
                    }
                    if let Ok(d) = Decimal::try_from_i128_with_scale(m, *scale as u32) {
                        return Ok(Value::Decimal(d));
                    }
                }
                let d = d.round_dp_with_strategy(*scale as u32, RoundingStrategy::MidpointAwayFromZero);
                let limit = Decimal::from_i128_with_scale(10i128.pow(int_digits.min(28)), 0);
                if int_digits < 28 && d.abs() >= limit {
                    return Err(out_of_range());
                }
                let mut d = d;
                d.rescale(*scale as u32);
                Ok(Value::Decimal(d))
            }
            ColumnType::Float | ColumnType::Double => {
                if let Value::Bytes(b) = &v {
                    let s = std::str::from_utf8(b).unwrap_or("").trim();
                    if s.parse::<f64>().is_err() {
                        return Err(bad(&v));
                    }
                }
                let f = v.as_f64().unwrap_or(0.0);
                Ok(Value::Double(if *self == ColumnType::Float { f as f32 as f64 } else { f }))
            }
            ColumnType::Char(n) | ColumnType::Varchar(n) | ColumnType::Text(n) | ColumnType::Blob(n) => {
                let bytes = match v {
                    Value::Bytes(b) => b,
                    other => other.to_text().unwrap_or_default(),
                };
                // Characters are never more than bytes: most values need no count.
                let len = if self.is_binary() || matches!(self, ColumnType::Text(_)) || bytes.len() <= *n as usize {
                    bytes.len()
                } else {
                    String::from_utf8_lossy(&bytes).chars().count()
                };
                if len > *n as usize {
                    return Err(Error::user(
                        Code::DataTooLong,
                        format!("Data too long for column '{column}' at row 1"),
                    ));
                }
                let mut bytes = bytes;
                if let ColumnType::Char(_) = self {
                    let end = bytes.iter().rposition(|c| *c != b' ').map(|i| i + 1).unwrap_or(0);
                    bytes.truncate(end);
                }
                Ok(Value::Bytes(bytes))
            }
            ColumnType::Date | ColumnType::DateTime(_) | ColumnType::Timestamp(_) => {
                let dt = match &v {
                    Value::Date(d) | Value::DateTime(d) => *d,
                    Value::Bytes(b) => DateTime::parse(std::str::from_utf8(b).unwrap_or(""))
                        .ok_or_else(|| date_err(self, &v, column))?,
                    Value::Int(_) | Value::UInt(_) | Value::Decimal(_) => {
                        DateTime::parse(&v.as_i64().unwrap_or(0).to_string())
                            .ok_or_else(|| date_err(self, &v, column))?
                    }
                    _ => return Err(date_err(self, &v, column)),
                };
                Ok(match self {
                    ColumnType::Date => Value::Date(DateTime::from_ymd(dt.year, dt.month, dt.day)),
                    ColumnType::DateTime(f) | ColumnType::Timestamp(f) => Value::DateTime(round_fsp(dt, *f)),
                    _ => Value::DateTime(dt),
                })
            }
            ColumnType::Time(_) => match &v {
                Value::Time(t) => Ok(Value::Time(*t)),
                Value::DateTime(d) => Ok(Value::Time(
                    ((d.hour as i64 * 60 + d.minute as i64) * 60 + d.second as i64) * 1_000_000 + d.micro as i64,
                )),
                Value::Bytes(b) => parse_duration(std::str::from_utf8(b).unwrap_or(""))
                    .map(Value::Time)
                    .ok_or_else(|| date_err(self, &v, column)),
                other => parse_duration(&other.to_display()).map(Value::Time).ok_or_else(|| date_err(self, &v, column)),
            },
        }
    }

    fn kind_name(&self) -> &'static str {
        match self {
            ColumnType::Int { .. } => "integer",
            ColumnType::Decimal { .. } => "decimal",
            ColumnType::Float | ColumnType::Double => "double",
            ColumnType::Date => "date",
            ColumnType::DateTime(_) => "datetime",
            ColumnType::Timestamp(_) => "timestamp",
            ColumnType::Time(_) => "time",
            _ => "string",
        }
    }
}

fn round_fsp(mut dt: DateTime, fsp: u8) -> DateTime {
    let unit = 10u32.pow(6 - fsp.min(6) as u32);
    dt.micro = (dt.micro / unit) * unit;
    dt
}

fn date_err(t: &ColumnType, v: &Value, column: &str) -> Error {
    Error::user(
        Code::TruncatedWrongValue,
        format!("Incorrect {} value: '{}' for column '{}' at row 1", t.kind_name(), v.to_display(), column),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coercion_follows_strict_mode() {
        let tiny = ColumnType::Int { bytes: 1, unsigned: false };
        assert!(matches!(tiny.coerce(Value::Int(127), "c"), Ok(Value::Int(127))));
        assert_eq!(tiny.coerce(Value::Int(128), "c").map_err(|e| e.code().number()).err(), Some(1264));
        let dec = ColumnType::Decimal { precision: 5, scale: 2 };
        assert_eq!(dec.coerce(Value::str("123.456"), "c").expect("fits").to_display(), "123.46");
        assert!(dec.coerce(Value::Int(1000), "c").is_err());
        let vc = ColumnType::Varchar(3);
        assert_eq!(vc.coerce(Value::str("abcd"), "c").map_err(|e| e.code().number()).err(), Some(1406));
        assert_eq!(
            ColumnType::Date.coerce(Value::str("2020-01-02 10:00:00"), "d").expect("date").to_display(),
            "2020-01-02"
        );
    }

    /// A decimal moved to the column's scale exactly (fewer digits, or extra zeros) skips
    /// rounding; its results and range check must agree with the general path's.
    #[test]
    fn decimals_moved_to_the_column_scale_exactly_are_checked_alike() {
        let dec = |p, s| ColumnType::Decimal { precision: p, scale: s };
        let at = |text: &str| Value::Decimal(text.parse::<Decimal>().expect("decimal"));
        let shown = |r: Result<Value>| r.map(|v| v.to_display()).map_err(|e| e.code().number());
        assert_eq!(shown(dec(5, 2).coerce(at("999.99"), "c")), Ok("999.99".into()));
        assert_eq!(shown(dec(5, 2).coerce(at("-999.99"), "c")), Ok("-999.99".into()));
        assert_eq!(shown(dec(5, 2).coerce(at("1000.00"), "c")), Err(1264));
        assert_eq!(shown(dec(5, 2).coerce(at("-1000.00"), "c")), Err(1264));
        // Below the column's scale: scaled up exactly, the same bounds.
        assert_eq!(shown(dec(5, 2).coerce(at("12.3"), "c")), Ok("12.30".into()));
        assert_eq!(shown(dec(5, 2).coerce(at("-999.9"), "c")), Ok("-999.90".into()));
        assert_eq!(shown(dec(5, 2).coerce(Value::Int(999), "c")), Ok("999.00".into()));
        assert_eq!(shown(dec(5, 2).coerce(Value::Int(-1000), "c")), Err(1264));
        assert_eq!(shown(dec(5, 2).coerce(at("1000.0"), "c")), Err(1264));
        // One whose mantissa overflows at the column's scale: the general path keeps what fits.
        assert_eq!(
            shown(dec(40, 20).coerce(Value::Int(1_700_000_000_000_000_000), "c")),
            Ok("1700000000000000000.0000000000".into())
        );
        // Above it with zeros only: exact, the same bounds.
        assert_eq!(shown(dec(5, 2).coerce(at("12.340000"), "c")), Ok("12.34".into()));
        assert_eq!(shown(dec(5, 2).coerce(at("-999.990000"), "c")), Ok("-999.99".into()));
        assert_eq!(shown(dec(5, 2).coerce(at("1000.000000"), "c")), Err(1264));
        assert_eq!(shown(dec(4, 4).coerce(at("0.100000"), "c")), Ok("0.1000".into()));
        assert_eq!(shown(dec(5, 2).coerce(at("-0.000"), "c")), Ok("0.00".into()));
        // Above it with other digits: rounded first (the general path).
        assert_eq!(shown(dec(5, 2).coerce(at("999.994"), "c")), Ok("999.99".into()));
        assert_eq!(shown(dec(5, 2).coerce(at("999.995"), "c")), Err(1264));
        assert_eq!(shown(dec(5, 2).coerce(at("1000"), "c")), Err(1264));
        assert_eq!(shown(dec(5, 0).coerce(at("99999"), "c")), Ok("99999".into()));
        assert_eq!(shown(dec(5, 0).coerce(at("100000"), "c")), Err(1264));
        assert_eq!(shown(dec(4, 4).coerce(at("0.9999"), "c")), Ok("0.9999".into()));
        assert_eq!(shown(dec(4, 4).coerce(at("1.0000"), "c")), Err(1264));
        // Wide columns: no bound a 96-bit mantissa can reach.
        assert!(dec(65, 2).coerce(at("12345678901234567890123456.78"), "c").is_ok());
        assert!(dec(30, 2).coerce(at("12345678901234567890123456.78"), "c").is_ok());
    }
}
