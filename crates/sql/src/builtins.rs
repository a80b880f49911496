//! More of MySQL's scalar functions: string utilities (FIND_IN_SET, SUBSTRING_INDEX, FORMAT,
//! CHAR, HEX/UNHEX, base64, CONV, ...), hashes (MD5, SHA1, SHA2, CRC32), UUID, trigonometry,
//! bit counting, IPv4/IPv6 address conversion and regular expressions (REGEXP_LIKE and
//! friends; REGEXP / RLIKE bind to REGEXP_LIKE).
//!
//! Like `functions`, every function here is a pure function of its arguments except UUID.
//! Results are bounded by `max_allowed_packet` where an argument sets their length.

use std::cell::RefCell;
use std::collections::HashMap;

use rust_decimal::RoundingStrategy;
use strata_common::{Code, Error, Result, Value};

use crate::functions::finite as double;

const MANY: usize = usize::MAX;

/// Argument counts of the functions in this module (None: not one of them).
pub fn arity(name: &str) -> Option<(usize, usize)> {
    Some(match name {
        "uuid" => (0, 0),
        "crc32" | "unhex" | "to_base64" | "from_base64" | "bin" | "oct" | "ord" | "bit_length" | "quote" | "sha"
        | "sha1" | "md5" | "sin" | "cos" | "tan" | "asin" | "acos" | "cot" | "degrees" | "radians" | "bit_count"
        | "inet_aton" | "inet_ntoa" | "inet6_aton" | "inet6_ntoa" | "is_ipv4" | "is_ipv6" | "soundex" => (1, 1),
        "atan" => (1, 2),
        "find_in_set" | "strcmp" | "sha2" | "atan2" => (2, 2),
        "format" => (2, 3),
        "substring_index" | "conv" => (3, 3),
        "insert" => (4, 4),
        "char" => (1, MANY),
        "elt" => (2, MANY),
        "regexp_like" => (2, 3),
        "regexp_substr" => (2, 5),
        "regexp_instr" => (2, 6),
        "regexp_replace" => (3, 6),
        _ => return None,
    })
}

fn bytes(v: &Value) -> Vec<u8> {
    v.to_text().unwrap_or_default()
}

fn text(v: &Value) -> String {
    String::from_utf8_lossy(&bytes(v)).into_owned()
}

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

fn hex_lower(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Calls `name` if it is one of this module's functions. The binder has checked the
/// argument count against `arity`.
pub fn call(name: &str, args: &[Value]) -> Option<Result<Value>> {
    let any_null = args.iter().any(Value::is_null);
    // Functions that are NULL when any argument is NULL, except the few handled first.
    match name {
        "uuid" => return Some(Ok(Value::str(uuid_v1()))),
        "char" => return Some(Ok(char_fn(args))),
        "elt" => {
            let n = match args[0].as_i64() {
                Some(n) if n >= 1 && (n as usize) < args.len() => n as usize,
                _ => return Some(Ok(Value::Null)),
            };
            return Some(Ok(match &args[n] {
                Value::Null => Value::Null,
                v => Value::Bytes(bytes(v)),
            }));
        }
        "quote" if any_null => return Some(Ok(Value::str("NULL"))),
        "is_ipv4" | "is_ipv6" if any_null => return Some(Ok(Value::Int(0))),
        _ => {}
    }
    arity(name)?;
    if any_null {
        return Some(Ok(Value::Null));
    }
    Some(call_non_null(name, args))
}

fn call_non_null(name: &str, args: &[Value]) -> Result<Value> {
    let f = |i: usize| args[i].as_f64().unwrap_or(0.0);
    Ok(match name {
        "crc32" => Value::UInt(crc32fast::hash(&bytes(&args[0])) as u64),
        "find_in_set" => {
            let needle = bytes(&args[0]);
            if needle.contains(&b',') {
                return Ok(Value::Int(0));
            }
            let list = bytes(&args[1]);
            if list.is_empty() {
                return Ok(Value::Int(0));
            }
            let pos = list.split(|c| *c == b',').position(|item| item == needle.as_slice());
            Value::Int(pos.map(|p| p as i64 + 1).unwrap_or(0))
        }
        "substring_index" => {
            let s = bytes(&args[0]);
            let delim = bytes(&args[1]);
            let count = int(&args[2]);
            Value::Bytes(substring_index(&s, &delim, count))
        }
        "format" => Value::str(format_number(&args[0], int(&args[1]))),
        "unhex" => {
            let s = bytes(&args[0]);
            let s: Vec<u8> = if s.len() % 2 == 1 { std::iter::once(b'0').chain(s).collect() } else { s };
            let mut out = Vec::with_capacity(s.len() / 2);
            for pair in s.chunks(2) {
                let hex = std::str::from_utf8(pair).ok().and_then(|p| u8::from_str_radix(p, 16).ok());
                match hex {
                    Some(b) => out.push(b),
                    None => return Ok(Value::Null),
                }
            }
            Value::Bytes(out)
        }
        "to_base64" => {
            use base64::Engine;
            let raw = bytes(&args[0]);
            if !crate::context::fits_packet(name, raw.len().div_ceil(3) * 4 * 77 / 76) {
                return Ok(Value::Null);
            }
            let enc = base64::engine::general_purpose::STANDARD.encode(raw);
            // MySQL breaks the encoding into lines of 76 characters.
            let lines: Vec<&str> =
                enc.as_bytes().chunks(76).map(|c| std::str::from_utf8(c).unwrap_or_default()).collect();
            Value::str(lines.join("\n"))
        }
        "from_base64" => {
            use base64::Engine;
            let s: Vec<u8> = bytes(&args[0]).into_iter().filter(|c| !c.is_ascii_whitespace()).collect();
            match base64::engine::general_purpose::STANDARD.decode(s) {
                Ok(b) => Value::Bytes(b),
                Err(_) => Value::Null,
            }
        }
        "bin" => Value::str(format!("{:b}", int_bits(&args[0]))),
        "oct" => Value::str(format!("{:o}", int_bits(&args[0]))),
        "conv" => match conv(&text(&args[0]), int(&args[1]), int(&args[2])) {
            Some(s) => Value::str(s),
            None => Value::Null,
        },
        "insert" => {
            let s: Vec<char> = text(&args[0]).chars().collect();
            let pos = int(&args[1]);
            let len = int(&args[2]);
            if pos < 1 || pos as usize > s.len() {
                return Ok(Value::Bytes(bytes(&args[0])));
            }
            let start = pos as usize - 1;
            let end = if len < 0 { s.len() } else { start.saturating_add(len as usize).min(s.len()) };
            let mut out: String = s[..start].iter().collect();
            out += &text(&args[3]);
            out.extend(&s[end..]);
            Value::str(out)
        }
        "strcmp" => {
            let (a, b) = (Value::Bytes(bytes(&args[0])), Value::Bytes(bytes(&args[1])));
            Value::Int(match a.sql_cmp(&b) {
                Some(std::cmp::Ordering::Less) => -1,
                Some(std::cmp::Ordering::Greater) => 1,
                _ => 0,
            })
        }
        "ord" => {
            let s = text(&args[0]);
            match s.chars().next() {
                None => Value::Int(0),
                Some(c) => {
                    let mut buf = [0u8; 4];
                    let enc = c.encode_utf8(&mut buf);
                    Value::Int(enc.bytes().fold(0i64, |acc, b| acc * 256 + b as i64))
                }
            }
        }
        "bit_length" => Value::Int(bytes(&args[0]).len() as i64 * 8),
        "quote" => Value::Bytes(quote(&bytes(&args[0]))),
        "md5" => {
            use md5::Digest;
            Value::str(hex_lower(&md5::Md5::digest(bytes(&args[0]))))
        }
        "sha" | "sha1" => {
            use sha1::Digest;
            Value::str(hex_lower(&sha1::Sha1::digest(bytes(&args[0]))))
        }
        "sha2" => {
            use sha2::Digest;
            let b = bytes(&args[0]);
            match int(&args[1]) {
                0 | 256 => Value::str(hex_lower(&sha2::Sha256::digest(b))),
                224 => Value::str(hex_lower(&sha2::Sha224::digest(b))),
                384 => Value::str(hex_lower(&sha2::Sha384::digest(b))),
                512 => Value::str(hex_lower(&sha2::Sha512::digest(b))),
                _ => Value::Null,
            }
        }
        "soundex" => Value::str(soundex(&text(&args[0]))),
        "sin" => double(name, args, f(0).sin())?,
        "cos" => double(name, args, f(0).cos())?,
        "tan" => double(name, args, f(0).tan())?,
        "asin" | "acos" => {
            let x = f(0);
            if !(-1.0..=1.0).contains(&x) {
                return Ok(Value::Null);
            }
            Value::Double(if name == "asin" { x.asin() } else { x.acos() })
        }
        "atan" if args.len() == 2 => double(name, args, f(0).atan2(f(1)))?,
        "atan" => double(name, args, f(0).atan())?,
        "atan2" => double(name, args, f(0).atan2(f(1)))?,
        "cot" => double(name, args, 1.0 / f(0).tan())?,
        "degrees" => double(name, args, f(0).to_degrees())?,
        "radians" => double(name, args, f(0).to_radians())?,
        "bit_count" => Value::Int(int_bits(&args[0]).count_ones() as i64),
        "inet_aton" => match inet_aton(&text(&args[0])) {
            Some(n) => Value::UInt(n as u64),
            None => Value::Null,
        },
        "inet_ntoa" => match args[0].as_i64() {
            Some(n) if (0..=u32::MAX as i64).contains(&n) => Value::str(std::net::Ipv4Addr::from(n as u32).to_string()),
            _ => Value::Null,
        },
        "inet6_aton" => {
            let s = text(&args[0]);
            if let Ok(a) = s.parse::<std::net::Ipv4Addr>() {
                Value::Bytes(a.octets().to_vec())
            } else if let Ok(a) = s.parse::<std::net::Ipv6Addr>() {
                Value::Bytes(a.octets().to_vec())
            } else {
                Value::Null
            }
        }
        "inet6_ntoa" => {
            let b = bytes(&args[0]);
            match b.len() {
                4 => Value::str(std::net::Ipv4Addr::new(b[0], b[1], b[2], b[3]).to_string()),
                16 => {
                    let mut o = [0u8; 16];
                    o.copy_from_slice(&b);
                    Value::str(std::net::Ipv6Addr::from(o).to_string())
                }
                _ => Value::Null,
            }
        }
        "is_ipv4" => Value::Int(text(&args[0]).parse::<std::net::Ipv4Addr>().is_ok() as i64),
        "is_ipv6" => Value::Int(text(&args[0]).parse::<std::net::Ipv6Addr>().is_ok() as i64),
        "regexp_like" | "regexp_substr" | "regexp_instr" | "regexp_replace" => regexp(name, args)?,
        _ => return Err(Error::user(Code::FunctionNotExists, format!("FUNCTION {name} does not exist"))),
    })
}

/// An integer argument as MySQL's bit functions see it (64 bits, two's complement).
fn int_bits(v: &Value) -> u64 {
    match v {
        Value::UInt(u) => *u,
        other => other.as_i64().unwrap_or(0) as u64,
    }
}

fn substring_index(s: &[u8], delim: &[u8], count: i64) -> Vec<u8> {
    if delim.is_empty() || count == 0 {
        return Vec::new();
    }
    let positions: Vec<usize> = {
        let mut v = Vec::new();
        let mut i = 0;
        while i + delim.len() <= s.len() {
            if &s[i..i + delim.len()] == delim {
                v.push(i);
                i += delim.len();
            } else {
                i += 1;
            }
        }
        v
    };
    if count > 0 {
        match positions.get(count as usize - 1) {
            Some(&p) => s[..p].to_vec(),
            None => s.to_vec(),
        }
    } else {
        let back = count.unsigned_abs() as usize;
        if back > positions.len() {
            return s.to_vec();
        }
        let p = positions[positions.len() - back];
        s[p + delim.len()..].to_vec()
    }
}

/// FORMAT(x, d): rounded to `d` (0..=30) decimals, thousands separated by commas.
fn format_number(x: &Value, d: i64) -> String {
    let places = d.clamp(0, 30) as u32;
    let digits = match x {
        Value::Double(f) => format!("{:.*}", places as usize, f),
        other => match other.as_decimal() {
            Some(dec) if places <= 28 => {
                let mut r = dec.round_dp_with_strategy(places, RoundingStrategy::MidpointAwayFromZero);
                r.rescale(places);
                r.to_string()
            }
            _ => format!("{:.*}", places as usize, other.as_f64().unwrap_or(0.0)),
        },
    };
    let (neg, body) = match digits.strip_prefix('-') {
        Some(b) => (true, b),
        None => (false, digits.as_str()),
    };
    let (int_part, frac) = match body.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (body, None),
    };
    let mut grouped = String::with_capacity(int_part.len() + int_part.len() / 3);
    for (i, c) in int_part.chars().enumerate() {
        if i > 0 && (int_part.len() - i) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(c);
    }
    let mut out = String::new();
    if neg && body.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.push('-');
    }
    out += &grouped;
    if let Some(f) = frac {
        out.push('.');
        out += f;
    }
    out
}

/// CHAR(n, ...): each integer as its big-endian bytes (leading zero bytes dropped); NULLs
/// skipped.
fn char_fn(args: &[Value]) -> Value {
    let mut out = Vec::new();
    for a in args {
        if a.is_null() {
            continue;
        }
        let n = int_bits(a) as u32;
        let b = n.to_be_bytes();
        let first = b.iter().position(|x| *x != 0).unwrap_or(3);
        out.extend_from_slice(&b[first..]);
    }
    Value::Bytes(out)
}

/// CONV(n, from, to): bases 2..36 (negative: signed). None for a bad base.
fn conv(n: &str, from: i64, to: i64) -> Option<String> {
    let (fb, tb) = (from.unsigned_abs(), to.unsigned_abs());
    if !(2..=36).contains(&fb) || !(2..=36).contains(&tb) {
        return None;
    }
    let s = n.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let mut v: u64 = 0;
    for c in digits.chars() {
        let Some(d) = c.to_digit(fb as u32) else { break };
        v = v.checked_mul(fb).and_then(|x| x.checked_add(d as u64)).unwrap_or(u64::MAX);
    }
    let v = if neg { (v as i64).wrapping_neg() as u64 } else { v };
    let (neg_out, mut mag) = if to < 0 && (v as i64) < 0 { (true, (v as i64).unsigned_abs()) } else { (false, v) };
    let mut out = Vec::new();
    loop {
        let d = (mag % tb) as u32;
        out.push(std::char::from_digit(d, tb as u32).unwrap_or('0').to_ascii_uppercase());
        mag /= tb;
        if mag == 0 {
            break;
        }
    }
    if neg_out {
        out.push('-');
    }
    Some(out.into_iter().rev().collect())
}

fn quote(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len() + 2);
    out.push(b'\'');
    for &c in s {
        match c {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\'' => out.extend_from_slice(b"\\'"),
            0 => out.extend_from_slice(b"\\0"),
            0x1a => out.extend_from_slice(b"\\Z"),
            c => out.push(c),
        }
    }
    out.push(b'\'');
    out
}

fn soundex(s: &str) -> String {
    fn code(c: char) -> Option<char> {
        Some(match c.to_ascii_uppercase() {
            'B' | 'F' | 'P' | 'V' => '1',
            'C' | 'G' | 'J' | 'K' | 'Q' | 'S' | 'X' | 'Z' => '2',
            'D' | 'T' => '3',
            'L' => '4',
            'M' | 'N' => '5',
            'R' => '6',
            _ => return None,
        })
    }
    let letters: Vec<char> = s.chars().filter(|c| c.is_alphabetic()).collect();
    let Some(first) = letters.first() else { return String::new() };
    let mut out = String::new();
    out.push(first.to_ascii_uppercase());
    let mut last = code(*first);
    for &c in &letters[1..] {
        let k = code(c);
        if k.is_some() && k != last {
            out.extend(k);
        }
        if !matches!(c.to_ascii_uppercase(), 'H' | 'W') {
            last = k;
        }
    }
    while out.len() < 4 {
        out.push('0');
    }
    out
}

/// INET_ATON: dotted quads, with MySQL's short forms (`127.1` is 127.0.0.1).
fn inet_aton(s: &str) -> Option<u32> {
    let parts: Vec<&str> = s.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut nums = Vec::with_capacity(parts.len());
    for p in &parts {
        if p.is_empty() || p.len() > 3 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u32 = p.parse().ok()?;
        if n > 255 {
            return None;
        }
        nums.push(n);
    }
    let last = *nums.last()?;
    let mut v: u32 = 0;
    for (i, n) in nums[..nums.len() - 1].iter().enumerate() {
        v |= n << (24 - 8 * i);
    }
    Some(v | last)
}

/// UUID(): a version 1 UUID (time-based; the node is random per process, as MySQL does
/// when it has no MAC address to use).
fn uuid_v1() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::OnceLock;
    static NODE: OnceLock<(u64, u16)> = OnceLock::new();
    static LAST: AtomicU64 = AtomicU64::new(0);
    let (node, clock_seq) = *NODE.get_or_init(|| {
        let r = random_u64();
        ((r & 0xffff_ffff_ffff) | 0x0100_0000_0000, ((r >> 48) as u16) & 0x3fff)
    });
    // 100 ns intervals since 1582-10-15, strictly increasing within the process.
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let ticks = now.as_nanos() as u64 / 100 + 0x01b2_1dd2_1381_4000;
    let prev = LAST.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |last| Some(ticks.max(last + 1)));
    let ts = ticks.max(prev.unwrap_or(0) + 1);
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        ts & 0xffff_ffff,
        (ts >> 32) & 0xffff,
        ((ts >> 48) & 0x0fff) | 0x1000,
        clock_seq | 0x8000,
        node
    )
}

fn random_u64() -> u64 {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    let mut h = RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.finish()
}

// ----- regular expressions -----

/// Compiled patterns are bounded in size (a pattern is client input).
const REGEX_SIZE_LIMIT: usize = 8 << 20;
const REGEX_CACHE: usize = 32;

thread_local! {
    static COMPILED: RefCell<HashMap<(String, String), regex::Regex>> = RefCell::new(HashMap::new());
}

fn regex_error(e: regex::Error) -> Error {
    match e {
        regex::Error::CompiledTooBig(_) => {
            Error::user(Code::RegexpPatternTooBig, "Pattern is too big for the regular expression engine")
        }
        other => Error::user(
            Code::RegexpRuleSyntax,
            format!("Syntax error in regular expression: {}", other.to_string().lines().last().unwrap_or("")),
        ),
    }
}

/// The compiled pattern under MySQL's match type letters: c (case sensitive, the default
/// under the binary collation), i (insensitive), m (multi-line), n (`.` matches line ends),
/// u (Unix line endings only; the default here).
fn compiled(name: &str, pattern: &str, match_type: &str) -> Result<regex::Regex> {
    let key = (pattern.to_string(), match_type.to_string());
    if let Some(r) = COMPILED.with(|c| c.borrow().get(&key).cloned()) {
        return Ok(r);
    }
    let mut b = regex::RegexBuilder::new(pattern);
    b.size_limit(REGEX_SIZE_LIMIT).dfa_size_limit(REGEX_SIZE_LIMIT).nest_limit(250);
    for c in match_type.chars() {
        match c {
            'c' => b.case_insensitive(false),
            'i' => b.case_insensitive(true),
            'm' => b.multi_line(true),
            'n' => b.dot_matches_new_line(true),
            'u' => &mut b,
            _ => {
                return Err(Error::user(Code::WrongArguments, format!("Incorrect arguments to {name}")));
            }
        };
    }
    let r = b.build().map_err(regex_error)?;
    COMPILED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() >= REGEX_CACHE {
            c.clear();
        }
        c.insert(key, r.clone());
    });
    Ok(r)
}

/// Byte offset of the 1-based character position `pos` in `s` (None past the end + 1).
fn char_offset(s: &str, pos: i64) -> Option<usize> {
    if pos < 1 {
        return None;
    }
    let want = pos as usize - 1;
    if want == 0 {
        return Some(0);
    }
    match s.char_indices().nth(want) {
        Some((i, _)) => Some(i),
        None if s.chars().count() == want => Some(s.len()),
        None => None,
    }
}

fn regexp(name: &str, args: &[Value]) -> Result<Value> {
    let subject = text(&args[0]);
    let pattern = text(&args[1]);
    let (pos_at, occ_at, mt_at) = match name {
        "regexp_like" => (None, None, 2),
        "regexp_substr" => (Some(2), Some(3), 4),
        "regexp_instr" => (Some(2), Some(3), 5),
        _ => (Some(3), Some(4), 5),
    };
    let match_type = args.get(mt_at).map(text).unwrap_or_default();
    let re = compiled(name, &pattern, &match_type)?;
    let pos = pos_at.and_then(|i| args.get(i)).map(int).unwrap_or(1);
    let bad_pos = || Error::user(Code::RegexpIndexOutOfBounds, "Index out of bounds in regular expression search.");
    let start = if pos_at.is_some() { char_offset(&subject, pos).ok_or_else(bad_pos)? } else { 0 };
    let default_occ = if name == "regexp_replace" { 0 } else { 1 };
    let occ = occ_at.and_then(|i| args.get(i)).map(int).unwrap_or(default_occ);
    Ok(match name {
        "regexp_like" => Value::Int(re.is_match(&subject) as i64),
        "regexp_substr" => {
            let occ = occ.max(1) as usize;
            match re.find_iter(&subject[start..]).nth(occ - 1) {
                Some(m) => Value::str(m.as_str()),
                None => Value::Null,
            }
        }
        "regexp_instr" => {
            let occ = occ.max(1) as usize;
            let after = args.get(4).map(int).unwrap_or(0);
            if !(0..=1).contains(&after) {
                return Err(Error::user(Code::WrongArguments, "Incorrect arguments to regexp_instr: return_option"));
            }
            match re.find_iter(&subject[start..]).nth(occ - 1) {
                Some(m) => {
                    let end = start + if after == 1 { m.end() } else { m.start() };
                    Value::Int(subject[..end].chars().count() as i64 + 1)
                }
                None => Value::Int(0),
            }
        }
        _ => {
            let repl = text(&args[2]);
            let tail = &subject[start..];
            let replaced = if occ <= 0 {
                re.replace_all(tail, repl.as_str()).into_owned()
            } else {
                let mut out = String::new();
                let mut last = 0;
                if let Some(caps) = re.captures_iter(tail).nth(occ as usize - 1) {
                    let m = caps.get(0).map(|m| (m.start(), m.end())).unwrap_or((0, 0));
                    out += &tail[..m.0];
                    caps.expand(&repl, &mut out);
                    last = m.1;
                }
                if last == 0 && out.is_empty() {
                    tail.to_string()
                } else {
                    out += &tail[last..];
                    out
                }
            };
            if !crate::context::fits_packet(name, start + replaced.len()) {
                return Ok(Value::Null);
            }
            Value::str(format!("{}{}", &subject[..start], replaced))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, args: &[Value]) -> String {
        call(name, args).expect("known").expect("no error").to_display()
    }

    fn s(x: &str) -> Value {
        Value::str(x)
    }

    #[test]
    fn strings() {
        assert_eq!(run("find_in_set", &[s("b"), s("a,b,c")]), "2");
        assert_eq!(run("find_in_set", &[s("d"), s("a,b,c")]), "0");
        assert_eq!(run("substring_index", &[s("www.mysql.com"), s("."), Value::Int(2)]), "www.mysql");
        assert_eq!(run("substring_index", &[s("www.mysql.com"), s("."), Value::Int(-2)]), "mysql.com");
        assert_eq!(run("substring_index", &[s("a.b"), s("."), Value::Int(5)]), "a.b");
        assert_eq!(run("format", &[Value::Double(12332.123456), Value::Int(4)]), "12,332.1235");
        assert_eq!(run("format", &[s("-1234567.891"), Value::Int(2)]), "-1,234,567.89");
        assert_eq!(run("format", &[Value::Int(100), Value::Int(0)]), "100");
        assert_eq!(run("char", &[Value::Int(77), Value::Int(121), Value::Null, s("83")]), "MyS");
        assert_eq!(run("unhex", &[s("4D7953514C")]), "MySQL");
        assert_eq!(run("unhex", &[s("GG")]), "NULL");
        assert_eq!(run("to_base64", &[s("abc")]), "YWJj");
        assert_eq!(run("from_base64", &[s("YWJj")]), "abc");
        assert_eq!(run("conv", &[s("a"), Value::Int(16), Value::Int(2)]), "1010");
        assert_eq!(run("conv", &[s("-17"), Value::Int(10), Value::Int(-18)]), "-H");
        assert_eq!(run("bin", &[Value::Int(12)]), "1100");
        assert_eq!(run("insert", &[s("Quadratic"), Value::Int(3), Value::Int(4), s("What")]), "QuWhattic");
        assert_eq!(run("insert", &[s("Quadratic"), Value::Int(-1), Value::Int(4), s("What")]), "Quadratic");
        assert_eq!(run("quote", &[s("Don't!")]), "'Don\\'t!'");
        assert_eq!(run("quote", &[Value::Null]), "NULL");
        assert_eq!(run("elt", &[Value::Int(2), s("a"), s("b")]), "b");
        assert_eq!(run("elt", &[Value::Int(3), s("a"), s("b")]), "NULL");
        assert_eq!(run("soundex", &[s("Hello")]), "H400");
        assert_eq!(run("strcmp", &[s("a"), s("b")]), "-1");
    }

    #[test]
    fn hashes_numbers_addresses() {
        assert_eq!(run("crc32", &[s("MySQL")]), "3259397556");
        assert_eq!(run("md5", &[s("testing")]), "ae2b1fca515949e5d54fb22b8ed95575");
        assert_eq!(run("sha1", &[s("abc")]), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(run("sha2", &[s("abc"), Value::Int(224)]).len(), 56);
        assert_eq!(run("bit_count", &[Value::Int(7)]), "3");
        assert_eq!(run("asin", &[Value::Int(2)]), "NULL");
        assert_eq!(run("degrees", &[Value::Double(std::f64::consts::PI)]), "180");
        assert!(call("cot", &[Value::Int(0)]).expect("known").is_err());
        assert_eq!(run("inet_aton", &[s("10.0.5.9")]), "167773449");
        assert_eq!(run("inet_aton", &[s("127.1")]), "2130706433");
        assert_eq!(run("inet_aton", &[s("1.2.3.256")]), "NULL");
        assert_eq!(run("inet_ntoa", &[Value::Int(167773449)]), "10.0.5.9");
        assert_eq!(
            run("inet6_ntoa", &[call("inet6_aton", &[s("fdfe::5a55:caff:fefa:9089")]).expect("k").expect("ok")]),
            "fdfe::5a55:caff:fefa:9089"
        );
        assert_eq!(run("is_ipv4", &[s("10.0.0.1")]), "1");
        let u = run("uuid", &[]);
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "1");
        assert_ne!(u, run("uuid", &[]));
    }

    #[test]
    fn regular_expressions() {
        assert_eq!(run("regexp_like", &[s("abc"), s("^a")]), "1");
        assert_eq!(run("regexp_like", &[s("abc"), s("B")]), "0");
        assert_eq!(run("regexp_like", &[s("abc"), s("B"), s("i")]), "1");
        assert_eq!(run("regexp_substr", &[s("abc def ghi"), s("[a-z]+"), Value::Int(1), Value::Int(3)]), "ghi");
        assert_eq!(run("regexp_instr", &[s("dog cat dog"), s("dog"), Value::Int(2)]), "9");
        assert_eq!(run("regexp_instr", &[s("aa aaa"), s("a{3}"), Value::Int(1), Value::Int(1), Value::Int(1)]), "7");
        assert_eq!(run("regexp_replace", &[s("a b c"), s("b"), s("X")]), "a X c");
        assert_eq!(run("regexp_replace", &[s("abc abc"), s("b"), s("X"), Value::Int(1), Value::Int(2)]), "abc aXc");
        assert_eq!(run("regexp_replace", &[s("abc"), s("(b)"), s("[$1]")]), "a[b]c");
        assert!(call("regexp_like", &[s("a"), s("(")]).expect("known").is_err());
        assert!(call("regexp_like", &[s("a"), s("a"), s("z")]).expect("known").is_err());
        assert!(call("regexp_instr", &[s("a"), s("a"), Value::Int(5)]).expect("known").is_err());
    }
}
