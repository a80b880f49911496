//! Scalar functions: strings, math, dates, control flow. Names are lower-case. Functions
//! that depend on the session (NOW, DATABASE, LAST_INSERT_ID, ...) are folded to constants by
//! the binder, so everything here is a pure function of its arguments.

use rust_decimal::prelude::ToPrimitive;
use rust_decimal::{Decimal, RoundingStrategy};
use strata_common::time::DateTime;
use strata_common::{Code, Error, Result, Value};

use crate::expr::compare_values;

fn text(v: &Value) -> String {
    String::from_utf8_lossy(&v.to_text().unwrap_or_default()).into_owned()
}

fn arg_count(name: &str, args: &[Value], min: usize, max: usize) -> Result<()> {
    if args.len() < min || args.len() > max {
        return Err(Error::user(
            Code::WrongParamcountToNativeFct,
            format!("Incorrect parameter count in the call to native function '{name}'"),
        ));
    }
    Ok(())
}

/// Reads a value as a date-time (strings parsed, numbers as YYYYMMDD(HHMMSS)).
pub fn to_datetime(v: &Value) -> Option<DateTime> {
    match v {
        Value::Date(d) | Value::DateTime(d) => Some(*d),
        Value::Bytes(b) => DateTime::parse(std::str::from_utf8(b).ok()?),
        Value::Int(_) | Value::UInt(_) | Value::Decimal(_) => DateTime::parse(&v.as_i64()?.to_string()),
        _ => None,
    }
}

/// Whether a function name is an aggregate.
pub fn is_aggregate(name: &str) -> bool {
    matches!(name, "count" | "sum" | "avg" | "min" | "max" | "group_concat" | "grouping")
}

/// Functions the binder folds from session state.
pub fn is_session_function(name: &str) -> bool {
    matches!(
        name,
        "now"
            | "current_timestamp"
            | "sysdate"
            | "localtime"
            | "localtimestamp"
            | "curdate"
            | "current_date"
            | "curtime"
            | "current_time"
            | "database"
            | "schema"
            | "last_insert_id"
            | "connection_id"
            | "version"
            | "user"
            | "current_user"
            | "session_user"
            | "system_user"
            | "utc_timestamp"
            | "unix_timestamp"
            | "found_rows"
            | "row_count"
    )
}

/// ROUND/TRUNCATE of a decimal to `places` digits after the point (before it if negative).
fn round_decimal(d: Decimal, places: i64, truncate: bool) -> Result<Decimal> {
    let strategy = if truncate { RoundingStrategy::ToZero } else { RoundingStrategy::MidpointAwayFromZero };
    if places >= 0 {
        return Ok(d.round_dp_with_strategy(places.min(28) as u32, strategy));
    }
    // A decimal has at most 29 digits: rounding to more tens than that leaves 0.
    if places < -28 {
        return Ok(Decimal::ZERO);
    }
    let factor = Decimal::from_i128_with_scale(10i128.pow((-places) as u32), 0);
    (d / factor).round_dp_with_strategy(0, strategy).checked_mul(factor).ok_or_else(|| {
        Error::user(Code::DataOutOfRangeBigint, format!("DECIMAL value is out of range in 'round({d},{places})'"))
    })
}

/// Whether `name` is a scalar function this module implements.
pub fn is_known(name: &str) -> bool {
    arity(name).is_some()
}

/// How many arguments a scalar function takes (at least, at most); None when it is not a
/// function this module implements. The binder checks calls against it (1582), so `call`
/// can index its arguments.
pub fn arity(name: &str) -> Option<(usize, usize)> {
    const MANY: usize = usize::MAX;
    Some(match name {
        "pi" => (0, 0),
        "rand" => (0, 1),
        "__unix_timestamp" | "abs" | "ascii" | "ceil" | "ceiling" | "char_length" | "character_length" | "date"
        | "day" | "dayofmonth" | "dayofweek" | "dayofyear" | "exp" | "floor" | "hex" | "hour" | "isnull"
        | "last_day" | "lcase" | "length" | "ln" | "log10" | "log2" | "lower" | "ltrim" | "microsecond" | "minute"
        | "month" | "octet_length" | "quarter" | "reverse" | "rtrim" | "second" | "sign" | "space" | "sqrt"
        | "to_days" | "trim" | "ucase" | "upper" | "weekday" | "year" => (1, 1),
        "log" | "round" => (1, 2),
        "datediff" | "date_format" | "ifnull" | "instr" | "left" | "right" | "mod" | "nullif" | "pow" | "power"
        | "repeat" | "position" | "truncate" => (2, 2),
        "locate" | "substr" | "substring" | "mid" => (2, 3),
        "if" | "lpad" | "rpad" | "replace" | "date_add_interval" | "date_sub_interval" => (3, 3),
        "coalesce" | "concat" => (1, MANY),
        "concat_ws" | "greatest" | "least" | "field" => (2, MANY),
        crate::failpoint::FUNCTION if crate::failpoint::enabled() => (1, 1),
        _ => return crate::builtins::arity(name),
    })
}

/// Calls a scalar function.
pub fn call(name: &str, args: Vec<Value>) -> Result<Value> {
    let null_in = args.iter().any(|v| v.is_null());
    macro_rules! nullable {
        () => {
            if null_in {
                return Ok(Value::Null);
            }
        };
    }
    Ok(match name {
        "coalesce" => args.into_iter().find(|v| !v.is_null()).unwrap_or(Value::Null),
        "ifnull" => {
            arg_count(name, &args, 2, 2)?;
            let mut it = args.into_iter();
            let a = it.next().unwrap_or(Value::Null);
            if a.is_null() {
                it.next().unwrap_or(Value::Null)
            } else {
                a
            }
        }
        "nullif" => {
            arg_count(name, &args, 2, 2)?;
            if compare_values(&args[0], &args[1]) == Some(std::cmp::Ordering::Equal) {
                Value::Null
            } else {
                args[0].clone()
            }
        }
        "if" => {
            arg_count(name, &args, 3, 3)?;
            if args[0].as_bool() == Some(true) {
                args[1].clone()
            } else {
                args[2].clone()
            }
        }
        "greatest" | "least" => {
            nullable!();
            let mut best = args.first().cloned().unwrap_or(Value::Null);
            for v in args.into_iter().skip(1) {
                let ord = compare_values(&v, &best);
                let better = if name == "greatest" {
                    ord == Some(std::cmp::Ordering::Greater)
                } else {
                    ord == Some(std::cmp::Ordering::Less)
                };
                if better {
                    best = v;
                }
            }
            best
        }
        "concat" => {
            nullable!();
            let parts: Vec<Vec<u8>> = args.iter().map(|v| v.to_text().unwrap_or_default()).collect();
            if !crate::context::fits_packet(name, parts.iter().map(Vec::len).sum()) {
                return Ok(Value::Null);
            }
            Value::Bytes(parts.concat())
        }
        "concat_ws" => {
            if args.first().is_none_or(|v| v.is_null()) {
                return Ok(Value::Null);
            }
            let sep = args[0].to_text().unwrap_or_default();
            let parts: Vec<Vec<u8>> = args[1..].iter().filter_map(|v| v.to_text()).collect();
            let len = parts.iter().map(Vec::len).sum::<usize>() + sep.len() * parts.len().saturating_sub(1);
            if !crate::context::fits_packet(name, len) {
                return Ok(Value::Null);
            }
            Value::Bytes(parts.join(sep.as_slice()))
        }
        "length" | "octet_length" => {
            nullable!();
            Value::Int(args[0].to_text().unwrap_or_default().len() as i64)
        }
        "char_length" | "character_length" => {
            nullable!();
            Value::Int(text(&args[0]).chars().count() as i64)
        }
        "upper" | "ucase" => {
            nullable!();
            Value::str(text(&args[0]).to_uppercase())
        }
        "lower" | "lcase" => {
            nullable!();
            Value::str(text(&args[0]).to_lowercase())
        }
        "trim" => {
            nullable!();
            Value::str(text(&args[0]).trim_matches(' ').to_string())
        }
        "__trim_str" | "__ltrim_str" | "__rtrim_str" => {
            nullable!();
            let (s, rem) = (text(&args[0]), text(&args[1]));
            let mut t = s.as_str();
            if !rem.is_empty() {
                if name != "__rtrim_str" {
                    while let Some(rest) = t.strip_prefix(rem.as_str()) {
                        t = rest;
                    }
                }
                if name != "__ltrim_str" {
                    while let Some(rest) = t.strip_suffix(rem.as_str()) {
                        t = rest;
                    }
                }
            }
            Value::str(t.to_string())
        }
        "ltrim" => {
            nullable!();
            Value::str(text(&args[0]).trim_start_matches(' ').to_string())
        }
        "rtrim" => {
            nullable!();
            Value::str(text(&args[0]).trim_end_matches(' ').to_string())
        }
        "substring" | "substr" | "mid" => {
            arg_count(name, &args, 2, 3)?;
            nullable!();
            let chars: Vec<char> = text(&args[0]).chars().collect();
            let n = chars.len() as i64;
            let pos = args[1].as_i64().unwrap_or(0);
            let start = if pos > 0 {
                pos - 1
            } else if pos < 0 {
                n + pos
            } else {
                return Ok(Value::str(""));
            };
            if start < 0 || start >= n {
                return Ok(Value::str(""));
            }
            let len = args.get(2).and_then(|v| v.as_i64()).unwrap_or(n);
            if len <= 0 {
                return Ok(Value::str(""));
            }
            let end = start.saturating_add(len).min(n);
            Value::str(chars[start as usize..end as usize].iter().collect::<String>())
        }
        "left" | "right" => {
            arg_count(name, &args, 2, 2)?;
            nullable!();
            let chars: Vec<char> = text(&args[0]).chars().collect();
            let k = (args[1].as_i64().unwrap_or(0).max(0) as usize).min(chars.len());
            let s: String =
                if name == "left" { chars[..k].iter().collect() } else { chars[chars.len() - k..].iter().collect() };
            Value::str(s)
        }
        "lpad" | "rpad" => {
            arg_count(name, &args, 3, 3)?;
            nullable!();
            let s: Vec<char> = text(&args[0]).chars().collect();
            let len = args[1].as_i64().unwrap_or(0);
            if len < 0 {
                return Ok(Value::Null);
            }
            let len = usize::try_from(len).unwrap_or(usize::MAX);
            let pad: Vec<char> = text(&args[2]).chars().collect();
            if s.len() >= len {
                return Ok(Value::str(s[..len].iter().collect::<String>()));
            }
            if pad.is_empty() {
                return Ok(Value::Null);
            }
            // The result's size is known before it is built: refuse it first if too big.
            let fill_chars = len - s.len();
            let pad_bytes: usize = pad.iter().map(|c| c.len_utf8()).sum();
            let tail_bytes: usize = pad[..fill_chars % pad.len()].iter().map(|c| c.len_utf8()).sum();
            let bytes = (fill_chars / pad.len())
                .saturating_mul(pad_bytes)
                .saturating_add(tail_bytes)
                .saturating_add(s.iter().map(|c| c.len_utf8()).sum());
            if !crate::context::fits_packet(name, bytes) {
                return Ok(Value::Null);
            }
            let fill: String = pad.iter().cycle().take(fill_chars).collect();
            let body: String = s.iter().collect();
            Value::str(if name == "lpad" { fill + &body } else { body + &fill })
        }
        "replace" => {
            arg_count(name, &args, 3, 3)?;
            nullable!();
            let from = text(&args[1]);
            if from.is_empty() {
                return Ok(args[0].clone());
            }
            let (subject, to) = (text(&args[0]), text(&args[2]));
            if to.len() > from.len() {
                let grow = subject.matches(from.as_str()).count().saturating_mul(to.len() - from.len());
                if !crate::context::fits_packet(name, subject.len().saturating_add(grow)) {
                    return Ok(Value::Null);
                }
            }
            Value::str(subject.replace(&from, &to))
        }
        "reverse" => {
            nullable!();
            Value::str(text(&args[0]).chars().rev().collect::<String>())
        }
        "repeat" => {
            nullable!();
            let n = usize::try_from(args[1].as_i64().unwrap_or(0)).unwrap_or(0);
            let s = text(&args[0]);
            if !crate::context::fits_packet(name, s.len().saturating_mul(n)) {
                return Ok(Value::Null);
            }
            Value::str(s.repeat(n))
        }
        "space" => {
            nullable!();
            let n = usize::try_from(args[0].as_i64().unwrap_or(0)).unwrap_or(0);
            if !crate::context::fits_packet(name, n) {
                return Ok(Value::Null);
            }
            Value::str(" ".repeat(n))
        }
        "locate" | "instr" | "position" => {
            nullable!();
            let (needle, hay) =
                if name == "instr" { (text(&args[1]), text(&args[0])) } else { (text(&args[0]), text(&args[1])) };
            let hay_chars: Vec<char> = hay.chars().collect();
            let start = if name == "locate" {
                args.get(2).and_then(|v| v.as_i64()).unwrap_or(1).max(1) as usize - 1
            } else {
                0
            };
            if start > hay_chars.len() {
                return Ok(Value::Int(0));
            }
            let tail: String = hay_chars[start..].iter().collect();
            match tail.find(&needle) {
                Some(byte_pos) => Value::Int((tail[..byte_pos].chars().count() + start + 1) as i64),
                None => Value::Int(0),
            }
        }
        "ascii" => {
            nullable!();
            Value::Int(args[0].to_text().unwrap_or_default().first().copied().unwrap_or(0) as i64)
        }
        "hex" => {
            nullable!();
            match &args[0] {
                Value::Int(_) | Value::UInt(_) => Value::str(format!("{:X}", args[0].as_i64().unwrap_or(0))),
                v => Value::str(v.to_text().unwrap_or_default().iter().map(|b| format!("{b:02X}")).collect::<String>()),
            }
        }
        "abs" => {
            nullable!();
            match &args[0] {
                Value::Int(i) => Value::Int(
                    i.checked_abs()
                        .ok_or_else(|| Error::user(Code::DataOutOfRangeBigint, "BIGINT value is out of range"))?,
                ),
                Value::UInt(u) => Value::UInt(*u),
                Value::Decimal(d) => Value::Decimal(d.abs()),
                v => Value::Double(v.as_f64().unwrap_or(0.0).abs()),
            }
        }
        "ceil" | "ceiling" | "floor" => {
            nullable!();
            let up = name != "floor";
            match &args[0] {
                Value::Int(_) | Value::UInt(_) => args[0].clone(),
                Value::Decimal(d) => {
                    let r = if up { d.ceil() } else { d.floor() };
                    r.to_i64().map(Value::Int).unwrap_or(Value::Decimal(r))
                }
                v => {
                    let f = v.as_f64().unwrap_or(0.0);
                    Value::Double(if up { f.ceil() } else { f.floor() })
                }
            }
        }
        "round" | "truncate" => {
            arg_count(name, &args, 1, 2)?;
            nullable!();
            let places = args.get(1).and_then(|v| v.as_i64()).unwrap_or(0);
            let truncate = name == "truncate";
            match &args[0] {
                Value::Int(i) if places >= 0 => Value::Int(*i),
                Value::UInt(u) if places >= 0 => Value::UInt(*u),
                Value::Int(_) | Value::UInt(_) => {
                    let d = round_decimal(args[0].as_decimal().unwrap_or_default(), places, truncate)?;
                    d.to_i64().map(Value::Int).unwrap_or(Value::Decimal(d))
                }
                Value::Decimal(d) => {
                    let mut r = round_decimal(*d, places, truncate)?;
                    if places >= 0 {
                        r.rescale(places.min(28) as u32);
                    }
                    Value::Decimal(r)
                }
                v => {
                    let f = v.as_f64().unwrap_or(0.0);
                    // Beyond ±400 places a double is unchanged (or 0); clamping keeps powi sane.
                    let m = 10f64.powi(places.clamp(-400, 400) as i32);
                    let r = if truncate { (f * m).trunc() / m } else { (f * m).round() / m };
                    Value::Double(if r.is_finite() { r } else { f })
                }
            }
        }
        "mod" => {
            nullable!();
            crate::expr::binary(crate::expr::BinOp::Mod, args[0].clone(), args[1].clone())?
        }
        "pow" | "power" => {
            nullable!();
            finite(name, &args, args[0].as_f64().unwrap_or(0.0).powf(args[1].as_f64().unwrap_or(0.0)))?
        }
        "sqrt" => {
            nullable!();
            let f = args[0].as_f64().unwrap_or(0.0);
            if f < 0.0 {
                Value::Null
            } else {
                Value::Double(f.sqrt())
            }
        }
        "exp" => {
            nullable!();
            finite(name, &args, args[0].as_f64().unwrap_or(0.0).exp())?
        }
        "ln" | "log" => {
            nullable!();
            let f = args.last().and_then(|v| v.as_f64()).unwrap_or(0.0);
            if f <= 0.0 {
                Value::Null
            } else if args.len() == 2 {
                Value::Double(f.ln() / args[0].as_f64().unwrap_or(0.0).ln())
            } else {
                Value::Double(f.ln())
            }
        }
        "log10" | "log2" => {
            nullable!();
            let f = args[0].as_f64().unwrap_or(0.0);
            if f <= 0.0 {
                Value::Null
            } else if name == "log10" {
                Value::Double(f.log10())
            } else {
                Value::Double(f.log2())
            }
        }
        "sign" => {
            nullable!();
            let f = args[0].as_f64().unwrap_or(0.0);
            Value::Int(if f > 0.0 {
                1
            } else if f < 0.0 {
                -1
            } else {
                0
            })
        }
        "pi" => Value::Double(std::f64::consts::PI),
        "rand" => Value::Double(rand_f64()),
        "date" => {
            nullable!();
            match to_datetime(&args[0]) {
                Some(d) => Value::Date(DateTime::from_ymd(d.year, d.month, d.day)),
                None => Value::Null,
            }
        }
        "year" | "month" | "day" | "dayofmonth" | "hour" | "minute" | "second" | "microsecond" | "dayofweek"
        | "weekday" | "dayofyear" | "quarter" | "to_days" => {
            nullable!();
            let d = match &args[0] {
                Value::Time(t) if matches!(name, "hour" | "minute" | "second" | "microsecond") => {
                    let us = t.abs();
                    let s = us / 1_000_000;
                    return Ok(Value::Int(match name {
                        "hour" => s / 3600,
                        "minute" => (s / 60) % 60,
                        "second" => s % 60,
                        _ => us % 1_000_000,
                    }));
                }
                v => match to_datetime(v) {
                    Some(d) => d,
                    None => return Ok(Value::Null),
                },
            };
            let dow = (d.day_number() + 5).rem_euclid(7); // 0 = Monday
            Value::Int(match name {
                "year" => d.year as i64,
                "month" => d.month as i64,
                "day" | "dayofmonth" => d.day as i64,
                "hour" => d.hour as i64,
                "minute" => d.minute as i64,
                "second" => d.second as i64,
                "microsecond" => d.micro as i64,
                "dayofweek" => (dow + 1) % 7 + 1,
                "weekday" => dow,
                "dayofyear" => d.day_number() - DateTime::from_ymd(d.year, 1, 1).day_number() + 1,
                "quarter" => (d.month as i64 + 2) / 3,
                _ => d.day_number() + 1,
            })
        }
        "datediff" => {
            nullable!();
            match (to_datetime(&args[0]), to_datetime(&args[1])) {
                (Some(a), Some(b)) => Value::Int(a.day_number() - b.day_number()),
                _ => Value::Null,
            }
        }
        "date_format" => {
            nullable!();
            match to_datetime(&args[0]) {
                Some(d) => Value::str(date_format(&d, &text(&args[1]))),
                None => Value::Null,
            }
        }
        "last_day" => {
            nullable!();
            match to_datetime(&args[0]) {
                Some(d) => {
                    let next = if d.month == 12 {
                        DateTime::from_ymd(d.year + 1, 1, 1)
                    } else {
                        DateTime::from_ymd(d.year, d.month + 1, 1)
                    };
                    Value::Date(next.with_day_number(next.day_number() - 1))
                }
                None => Value::Null,
            }
        }
        "date_add_interval" | "date_sub_interval" => {
            // args: date, amount, unit (string)
            nullable!();
            let Some(d) = to_datetime(&args[0]) else { return Ok(Value::Null) };
            let sign = if name == "date_add_interval" { 1 } else { -1 };
            let unit = text(&args[2]);
            let is_date = matches!(args[0], Value::Date(_))
                || (matches!(args[0], Value::Bytes(_)) && !text(&args[0]).contains(':'));
            match add_interval(d, &args[1], &unit, sign) {
                Some(r) if is_date && matches!(unit.as_str(), "day" | "week" | "month" | "quarter" | "year") => {
                    Value::Date(DateTime::from_ymd(r.year, r.month, r.day))
                }
                Some(r) => Value::DateTime(r),
                None => Value::Null,
            }
        }
        "field" => {
            if args.first().is_none_or(|v| v.is_null()) {
                return Ok(Value::Int(0));
            }
            let pos = args[1..].iter().position(|v| compare_values(&args[0], v) == Some(std::cmp::Ordering::Equal));
            Value::Int(pos.map(|p| p as i64 + 1).unwrap_or(0))
        }
        "__unix_timestamp" => {
            nullable!();
            match to_datetime(&args[0]) {
                Some(d) => Value::Int((d.to_micros() - DateTime::from_ymd(1970, 1, 1).to_micros()) / 1_000_000),
                None => Value::Null,
            }
        }
        "isnull" => Value::Int(args.first().is_none_or(|v| v.is_null()) as i64),
        crate::failpoint::FUNCTION if crate::failpoint::enabled() => crate::failpoint::trigger(&args)?,
        _ => match crate::builtins::call(name, &args) {
            Some(r) => r?,
            None => return Err(Error::user(Code::FunctionNotExists, format!("FUNCTION {name} does not exist"))),
        },
    })
}

/// A DOUBLE result, or MySQL's 1690 when it overflowed to infinity (or is not a number).
pub(crate) fn finite(name: &str, args: &[Value], f: f64) -> Result<Value> {
    if f.is_finite() {
        return Ok(Value::Double(f));
    }
    let shown: Vec<String> = args.iter().map(Value::to_display).collect();
    Err(Error::user(
        Code::DataOutOfRangeBigint,
        format!("DOUBLE value is out of range in '{name}({})'", shown.join(",")),
    ))
}

fn rand_f64() -> f64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u64(0);
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Adds `amount` `unit`s to `d` (`sign` = -1 subtracts).
/// None when the result falls outside years 0000-9999 (MySQL returns NULL then).
pub fn add_interval(d: DateTime, amount: &Value, unit: &str, sign: i64) -> Option<DateTime> {
    let n = amount.as_i64()?.checked_mul(sign)?;
    let micros = |per: i64| {
        let us = d.to_micros().checked_add(n.checked_mul(per)?)?;
        let (lo, hi) = (DateTime::from_ymd(0, 1, 1).to_micros(), DateTime::from_ymd(10000, 1, 1).to_micros());
        (lo..hi).contains(&us).then(|| DateTime::from_micros(us))
    };
    match unit {
        "microsecond" => micros(1),
        "second" => micros(1_000_000),
        "minute" => micros(60_000_000),
        "hour" => micros(3_600_000_000),
        "day" => micros(86_400_000_000),
        "week" => micros(7 * 86_400_000_000),
        "month" | "quarter" | "year" => {
            let months = match unit {
                "month" => n,
                "quarter" => n.checked_mul(3)?,
                _ => n.checked_mul(12)?,
            };
            let total = (d.year as i64 * 12 + d.month as i64 - 1).checked_add(months)?;
            if !(0..=9999 * 12 + 11).contains(&total) {
                return None;
            }
            let (year, month) = ((total / 12) as u16, (total % 12 + 1) as u8);
            let mut r = DateTime { year, month, ..d };
            while !r.is_valid() && r.day > 28 {
                r.day -= 1;
            }
            Some(r)
        }
        _ => None,
    }
}

fn date_format(d: &DateTime, fmt: &str) -> String {
    const MONTHS: [&str; 12] = [
        "January",
        "February",
        "March",
        "April",
        "May",
        "June",
        "July",
        "August",
        "September",
        "October",
        "November",
        "December",
    ];
    const DAYS: [&str; 7] = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"];
    let mut out = String::new();
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(f) = chars.next() else { break };
        let dow = (d.day_number() + 5).rem_euclid(7) as usize;
        // Month 0 (a zero date) has no name.
        let month_name = (d.month as usize).checked_sub(1).and_then(|m| MONTHS.get(m)).copied().unwrap_or("");
        match f {
            'Y' => out += &format!("{:04}", d.year),
            'y' => out += &format!("{:02}", d.year % 100),
            'm' => out += &format!("{:02}", d.month),
            'c' => out += &d.month.to_string(),
            'd' => out += &format!("{:02}", d.day),
            'e' => out += &d.day.to_string(),
            'H' => out += &format!("{:02}", d.hour),
            'k' => out += &d.hour.to_string(),
            'h' | 'I' => out += &format!("{:02}", (d.hour + 11) % 12 + 1),
            'i' => out += &format!("{:02}", d.minute),
            's' | 'S' => out += &format!("{:02}", d.second),
            'f' => out += &format!("{:06}", d.micro),
            'p' => out += if d.hour < 12 { "AM" } else { "PM" },
            'M' => out += month_name,
            'b' => out += month_name.get(..3).unwrap_or(""),
            'W' => out += DAYS[dow],
            'a' => out += &DAYS[dow][..3],
            'j' => out += &format!("{:03}", d.day_number() - DateTime::from_ymd(d.year, 1, 1).day_number() + 1),
            'T' => out += &format!("{:02}:{:02}:{:02}", d.hour, d.minute, d.second),
            '%' => out.push('%'),
            other => out.push(other),
        }
    }
    out
}
