//! MySQL's temporal values. They are kept as broken-down fields (not chrono types) because
//! MySQL allows zero dates such as `0000-00-00` that calendar libraries reject.

use std::fmt::Write;

/// A DATE, DATETIME or TIMESTAMP value with microsecond precision. Field order makes the
/// derived ordering chronological.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    /// 0..=9999
    pub year: u16,
    /// 0..=12 (0 only in zero dates)
    pub month: u8,
    /// 0..=31
    pub day: u8,
    /// 0..=23
    pub hour: u8,
    /// 0..=59
    pub minute: u8,
    /// 0..=59
    pub second: u8,
    /// 0..=999_999
    pub micro: u32,
}

fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if (year.is_multiple_of(4) && !year.is_multiple_of(100)) || year.is_multiple_of(400) => 29,
        2 => 28,
        _ => 0,
    }
}

impl DateTime {
    /// A date at midnight.
    pub fn from_ymd(year: u16, month: u8, day: u8) -> DateTime {
        DateTime { year, month, day, ..DateTime::default() }
    }

    /// Parses `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` (also `T` as separator, and `YYYYMMDD(HHMMSS)`).
    /// Returns None when the text is not a valid date.
    pub fn parse(text: &str) -> Option<DateTime> {
        match Self::parse_canonical(text.as_bytes()) {
            Some(dt) => dt.is_valid().then_some(dt),
            None => Self::parse_general(text),
        }
    }

    /// `parse` of any form it accepts.
    fn parse_general(text: &str) -> Option<DateTime> {
        let s = text.trim();
        if s.is_empty() {
            return None;
        }
        if s.bytes().all(|b| b.is_ascii_digit()) {
            return Self::parse_compact(s);
        }
        let (date, time) = match s.find([' ', 'T']) {
            Some(i) => (&s[..i], Some(s[i + 1..].trim())),
            None => (s, None),
        };
        let mut parts = date.split(['-', '/', '.']);
        let year: u16 = parts.next()?.parse().ok()?;
        let month: u8 = parts.next()?.parse().ok()?;
        let day: u8 = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        let mut dt = DateTime::from_ymd(year, month, day);
        if let Some(t) = time.filter(|t| !t.is_empty()) {
            let (hms, frac) = match t.find('.') {
                Some(i) => (&t[..i], Some(&t[i + 1..])),
                None => (t, None),
            };
            let mut p = hms.split(':');
            dt.hour = p.next()?.parse().ok()?;
            dt.minute = p.next().unwrap_or("0").parse().ok()?;
            dt.second = p.next().unwrap_or("0").parse().ok()?;
            if let Some(f) = frac {
                dt.micro = parse_fraction(f)?;
            }
        }
        dt.is_valid().then_some(dt)
    }

    /// `YYYY-MM-DD` or `YYYY-MM-DD HH:MM:SS` exactly, as clients and dumps send values (a
    /// bulk load's every date and time): read by position, without the general path's
    /// splits. None for any other text (not yet validated either way).
    fn parse_canonical(b: &[u8]) -> Option<DateTime> {
        let digits = |from: usize, n: usize| -> Option<u16> {
            b[from..from + n]
                .iter()
                .try_fold(0u16, |acc, &c| c.is_ascii_digit().then(|| acc * 10 + u16::from(c - b'0')))
        };
        let with_time = match b.len() {
            10 => false,
            19 if b[10] == b' ' && b[13] == b':' && b[16] == b':' => true,
            _ => return None,
        };
        if b[4] != b'-' || b[7] != b'-' {
            return None;
        }
        let mut dt = DateTime::from_ymd(digits(0, 4)?, digits(5, 2)? as u8, digits(8, 2)? as u8);
        if with_time {
            (dt.hour, dt.minute, dt.second) = (digits(11, 2)? as u8, digits(14, 2)? as u8, digits(17, 2)? as u8);
        }
        Some(dt)
    }

    fn parse_compact(s: &str) -> Option<DateTime> {
        let num = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<u32>().ok());
        let mut dt = match s.len() {
            8 | 14 => DateTime::from_ymd(num(0..4)? as u16, num(4..6)? as u8, num(6..8)? as u8),
            6 | 12 => {
                let y = num(0..2)?;
                let y = if y < 70 { 2000 + y } else { 1900 + y };
                DateTime::from_ymd(y as u16, num(2..4)? as u8, num(4..6)? as u8)
            }
            _ => return None,
        };
        if s.len() == 14 {
            (dt.hour, dt.minute, dt.second) = (num(8..10)? as u8, num(10..12)? as u8, num(12..14)? as u8);
        } else if s.len() == 12 {
            (dt.hour, dt.minute, dt.second) = (num(6..8)? as u8, num(8..10)? as u8, num(10..12)? as u8);
        }
        dt.is_valid().then_some(dt)
    }

    /// Whether the fields form a MySQL-valid value (zero dates and zero parts allowed).
    pub fn is_valid(&self) -> bool {
        let date_ok = (self.month == 0 && self.day == 0)
            || (self.month >= 1 && self.month <= 12 && self.day <= days_in_month(self.year, self.month));
        date_ok && self.year <= 9999 && self.hour < 24 && self.minute < 60 && self.second < 60 && self.micro < 1_000_000
    }

    /// `YYYY-MM-DD`.
    pub fn format_date(&self) -> String {
        format!("{:04}-{:02}-{:02}", self.year, self.month, self.day)
    }

    /// `YYYY-MM-DD HH:MM:SS[.ffffff]` with `fsp` fractional digits.
    pub fn format_datetime(&self, fsp: u8) -> String {
        let mut s = format!(
            "{:04}-{:02}-{:02} {:02}:{:02}:{:02}",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        );
        if fsp > 0 {
            let frac = format!("{:06}", self.micro);
            let _ = write!(s, ".{}", &frac[..fsp.min(6) as usize]);
        }
        s
    }

    /// Packs into an order-preserving u64 (for keys and rows).
    pub fn to_packed(&self) -> u64 {
        let ymd = ((self.year as u64 * 13 + self.month as u64) << 5) | self.day as u64;
        let hms = ((self.hour as u64) << 12) | ((self.minute as u64) << 6) | self.second as u64;
        (((ymd << 17) | hms) << 24) | self.micro as u64
    }

    /// Inverse of `to_packed`.
    pub fn from_packed(p: u64) -> DateTime {
        let micro = (p & ((1 << 24) - 1)) as u32;
        let rest = p >> 24;
        let hms = rest & ((1 << 17) - 1);
        let ymd = rest >> 17;
        let ym = ymd >> 5;
        DateTime {
            year: (ym / 13) as u16,
            month: (ym % 13) as u8,
            day: (ymd & 31) as u8,
            hour: (hms >> 12) as u8,
            minute: ((hms >> 6) & 63) as u8,
            second: (hms & 63) as u8,
            micro,
        }
    }

    /// Days since year 0 (proleptic Gregorian), for date arithmetic.
    pub fn day_number(&self) -> i64 {
        let (y, m, d) = (self.year as i64, self.month as i64, self.day as i64);
        let (y, m) = if m <= 2 { (y - 1, m + 12) } else { (y, m) };
        365 * y + y / 4 - y / 100 + y / 400 + (153 * (m - 3) + 2) / 5 + d + 59
    }

    /// Inverse of `day_number`, keeping the time of day of `self`.
    pub fn with_day_number(&self, n: i64) -> DateTime {
        // Civil-from-days, shifted so that day_number(0000-03-01) lines up.
        let z = n - 60;
        let era = z.div_euclid(146097);
        let doe = z - era * 146097;
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let d = doy - (153 * mp + 2) / 5 + 1;
        let m = if mp < 10 { mp + 3 } else { mp - 9 };
        let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
        DateTime { year: y.clamp(0, 9999) as u16, month: m as u8, day: d as u8, ..*self }
    }

    /// Microseconds since 0000-01-01 00:00:00 (for differences and intervals).
    pub fn to_micros(&self) -> i64 {
        let secs = self.day_number() * 86_400 + self.hour as i64 * 3600 + self.minute as i64 * 60 + self.second as i64;
        secs * 1_000_000 + self.micro as i64
    }

    /// Inverse of `to_micros`.
    pub fn from_micros(us: i64) -> DateTime {
        let secs = us.div_euclid(1_000_000);
        let micro = us.rem_euclid(1_000_000) as u32;
        let days = secs.div_euclid(86_400);
        let tod = secs.rem_euclid(86_400);
        let base = DateTime {
            hour: (tod / 3600) as u8,
            minute: ((tod / 60) % 60) as u8,
            second: (tod % 60) as u8,
            micro,
            ..DateTime::default()
        };
        base.with_day_number(days)
    }
}

fn parse_fraction(f: &str) -> Option<u32> {
    if f.is_empty() {
        return Some(0);
    }
    if !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let digits: String = f.chars().chain(std::iter::repeat('0')).take(6).collect();
    digits.parse().ok()
}

/// Parses a TIME literal (`[-]HH:MM:SS[.ffffff]` or `[-]HHMMSS`) into microseconds.
pub fn parse_duration(text: &str) -> Option<i64> {
    let s = text.trim();
    let (neg, s) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let (hms, frac) = match s.find('.') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, ""),
    };
    let (h, m, sec): (i64, i64, i64) = if hms.contains(':') {
        let mut p = hms.split(':');
        let h = p.next()?.trim().parse().ok()?;
        let m = p.next().unwrap_or("0").parse().ok()?;
        let sec = p.next().unwrap_or("0").parse().ok()?;
        (h, m, sec)
    } else {
        let n: i64 = hms.parse().ok()?;
        (n / 10000, (n / 100) % 100, n % 100)
    };
    if m >= 60 || sec >= 60 || h > 838 {
        return None;
    }
    let us = ((h * 3600 + m * 60 + sec) * 1_000_000) + parse_fraction(frac)? as i64;
    Some(if neg { -us } else { us })
}

/// Formats microseconds as `[-]HH:MM:SS[.ffffff]`.
pub fn format_duration(us: i64, fsp: u8) -> String {
    let sign = if us < 0 { "-" } else { "" };
    let a = us.unsigned_abs();
    let secs = a / 1_000_000;
    let mut s = format!("{}{:02}:{:02}:{:02}", sign, secs / 3600, (secs / 60) % 60, secs % 60);
    if fsp > 0 {
        let frac = format!("{:06}", a % 1_000_000);
        let _ = write!(s, ".{}", &frac[..fsp.min(6) as usize]);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format_round_trip() {
        let d = DateTime::parse("2024-02-29 13:14:15.5").expect("valid");
        assert_eq!(d.format_datetime(6), "2024-02-29 13:14:15.500000");
        assert_eq!(DateTime::from_packed(d.to_packed()), d);
        assert!(DateTime::parse("2023-02-29").is_none());
        assert_eq!(DateTime::parse("0000-00-00").expect("zero date").format_date(), "0000-00-00");
        assert_eq!(DateTime::parse("20240102").expect("compact").format_date(), "2024-01-02");
    }

    #[test]
    fn canonical_texts_read_as_the_general_path_reads_them() {
        for s in [
            "2024-02-29 13:14:15",
            "2023-02-29 13:14:15",
            "2024-12-31",
            "0000-00-00",
            "0000-00-00 00:00:00",
            "9999-12-31 23:59:59",
            "2024-01-01 24:00:00",
            "2024-01-01 12:60:00",
            "2024-13-01",
            "2024-00-10",
            "2024-1x-01",
            "2024/01/01",
            "2024-01-01T10:11:12",
            " 2024-01-01",
            "2024-01-01 1:2:3",
        ] {
            assert_eq!(DateTime::parse(s), DateTime::parse_general(s), "{s}");
        }
        assert!(DateTime::parse_canonical(b"2024-01-01 10:11:12").is_some());
        assert!(DateTime::parse_canonical(b"2024-01-01T10:11:12").is_none());
    }

    #[test]
    fn day_numbers_invert() {
        for s in ["1970-01-01", "2000-02-29", "1999-12-31", "0001-01-01", "9999-12-31"] {
            let d = DateTime::parse(s).expect("valid");
            assert_eq!(d.with_day_number(d.day_number()), d, "{s}");
            assert_eq!(DateTime::from_micros(d.to_micros()), d);
        }
        let a = DateTime::parse("2024-03-01").expect("valid");
        let b = DateTime::parse("2024-02-28").expect("valid");
        assert_eq!(a.day_number() - b.day_number(), 2);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("-01:02:03"), Some(-3_723_000_000));
        assert_eq!(format_duration(3_723_500_000, 1), "01:02:03.5");
    }
}
