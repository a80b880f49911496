//! Encoding and decoding of protocol payloads: length-encoded integers and strings, OK/ERR/
//! EOF packets, column definitions, text and binary rows, the handshake response, and the
//! client commands. Decoding never panics: malformed input is an `Err`, which the connection
//! reports as ER_MALFORMED_PACKET (a fuzz test holds this).

use rust_decimal::Decimal;
use strata_common::time::DateTime;
use strata_common::{Code, Error, Result, Value};
use strata_sql::result::Column;

/// Capability flags.
pub mod caps {
    /// Long passwords.
    pub const LONG_PASSWORD: u32 = 1;
    /// Report found (matched) rows instead of changed rows.
    pub const FOUND_ROWS: u32 = 2;
    /// Long column flags.
    pub const LONG_FLAG: u32 = 4;
    /// Database in the handshake response.
    pub const CONNECT_WITH_DB: u32 = 8;
    /// 4.1 protocol.
    pub const PROTOCOL_41: u32 = 512;
    /// Interactive client.
    pub const INTERACTIVE: u32 = 1024;
    /// TLS requested.
    pub const SSL: u32 = 2048;
    /// Transactions.
    pub const TRANSACTIONS: u32 = 8192;
    /// 4.1 authentication.
    pub const SECURE_CONNECTION: u32 = 32768;
    /// The client can send files for LOAD DATA LOCAL INFILE.
    pub const LOCAL_FILES: u32 = 128;
    /// Several statements per COM_QUERY.
    pub const MULTI_STATEMENTS: u32 = 1 << 16;
    /// Several result sets.
    pub const MULTI_RESULTS: u32 = 1 << 17;
    /// Several result sets from prepared statements.
    pub const PS_MULTI_RESULTS: u32 = 1 << 18;
    /// Authentication plugins.
    pub const PLUGIN_AUTH: u32 = 1 << 19;
    /// Connection attributes.
    pub const CONNECT_ATTRS: u32 = 1 << 20;
    /// Length-encoded auth response.
    pub const PLUGIN_AUTH_LENENC: u32 = 1 << 21;
    /// What the server offers.
    pub const SERVER: u32 = LONG_PASSWORD
        | FOUND_ROWS
        | LONG_FLAG
        | CONNECT_WITH_DB
        | LOCAL_FILES
        | PROTOCOL_41
        | INTERACTIVE
        | TRANSACTIONS
        | SECURE_CONNECTION
        | MULTI_STATEMENTS
        | MULTI_RESULTS
        | PS_MULTI_RESULTS
        | PLUGIN_AUTH
        | CONNECT_ATTRS
        | PLUGIN_AUTH_LENENC;
}

/// Server status flags.
pub mod status {
    /// A transaction is open.
    pub const IN_TRANS: u16 = 1;
    /// Autocommit is on.
    pub const AUTOCOMMIT: u16 = 2;
    /// More result sets follow.
    pub const MORE_RESULTS: u16 = 8;
}

fn malformed(what: &str) -> Error {
    Error::user(Code::MalformedPacket, format!("Malformed communication packet ({what})"))
}

/// A cursor over a payload.
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads from `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf }
    }
    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }
    /// Takes `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.buf.len() < n {
            return Err(malformed("truncated"));
        }
        let (h, t) = self.buf.split_at(n);
        self.buf = t;
        Ok(h)
    }
    /// One byte.
    pub fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    /// Little-endian u16.
    pub fn u16(&mut self) -> Result<u16> {
        let b = self.take(2)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }
    /// Little-endian u32.
    pub fn u32(&mut self) -> Result<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    /// Little-endian u64.
    pub fn u64(&mut self) -> Result<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }
    /// Length-encoded integer.
    pub fn lenenc(&mut self) -> Result<u64> {
        Ok(match self.u8()? {
            n @ 0..=0xfa => n as u64,
            0xfc => self.u16()? as u64,
            0xfd => {
                let b = self.take(3)?;
                u32::from_le_bytes([b[0], b[1], b[2], 0]) as u64
            }
            0xfe => self.u64()?,
            _ => return Err(malformed("bad length prefix")),
        })
    }
    /// Length-encoded string.
    pub fn lenenc_bytes(&mut self) -> Result<&'a [u8]> {
        let n = self.lenenc()?;
        if n > self.buf.len() as u64 {
            return Err(malformed("string longer than packet"));
        }
        self.take(n as usize)
    }
    /// NUL-terminated string.
    pub fn nul_bytes(&mut self) -> Result<&'a [u8]> {
        let pos = self.buf.iter().position(|b| *b == 0).ok_or_else(|| malformed("missing terminator"))?;
        let s = &self.buf[..pos];
        self.buf = &self.buf[pos + 1..];
        Ok(s)
    }
    /// Everything left.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }
}

/// Appends a length-encoded integer.
pub fn put_lenenc(out: &mut Vec<u8>, n: u64) {
    match n {
        0..=0xfa => out.push(n as u8),
        0xfb..=0xffff => {
            out.push(0xfc);
            out.extend_from_slice(&(n as u16).to_le_bytes());
        }
        0x1_0000..=0xff_ffff => {
            out.push(0xfd);
            out.extend_from_slice(&(n as u32).to_le_bytes()[..3]);
        }
        _ => {
            out.push(0xfe);
            out.extend_from_slice(&n.to_le_bytes());
        }
    }
}

/// Appends a length-encoded string.
pub fn put_lenenc_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_lenenc(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// An OK packet payload.
pub fn ok_packet(affected: u64, last_insert_id: u64, status: u16, warnings: u16, info: &str) -> Vec<u8> {
    let mut out = vec![0x00];
    put_lenenc(&mut out, affected);
    put_lenenc(&mut out, last_insert_id);
    out.extend_from_slice(&status.to_le_bytes());
    out.extend_from_slice(&warnings.to_le_bytes());
    // Servers send the info text length-encoded (net_store_data), and clients read it so.
    if !info.is_empty() {
        put_lenenc_bytes(&mut out, info.as_bytes());
    }
    out
}

/// An ERR packet payload.
pub fn err_packet(code: u16, sqlstate: &str, message: &str) -> Vec<u8> {
    let mut out = vec![0xff];
    out.extend_from_slice(&code.to_le_bytes());
    out.push(b'#');
    let mut state = sqlstate.as_bytes().to_vec();
    state.resize(5, b'0');
    out.extend_from_slice(&state);
    let msg: String = message.chars().take(512).collect();
    out.extend_from_slice(msg.as_bytes());
    out
}

/// An EOF packet payload.
pub fn eof_packet(status: u16, warnings: u16) -> Vec<u8> {
    let mut out = vec![0xfe];
    out.extend_from_slice(&warnings.to_le_bytes());
    out.extend_from_slice(&status.to_le_bytes());
    out
}

/// A column definition payload (Protocol::ColumnDefinition41).
pub fn column_def(c: &Column, field_list: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    put_lenenc_bytes(&mut out, b"def");
    put_lenenc_bytes(&mut out, c.db.as_bytes());
    put_lenenc_bytes(&mut out, c.table.as_bytes());
    put_lenenc_bytes(&mut out, c.org_table.as_bytes());
    put_lenenc_bytes(&mut out, c.name.as_bytes());
    put_lenenc_bytes(&mut out, c.org_name.as_bytes());
    out.push(0x0c);
    out.extend_from_slice(&c.charset.to_le_bytes());
    out.extend_from_slice(&c.length.to_le_bytes());
    out.push(c.ty);
    out.extend_from_slice(&c.flags.to_le_bytes());
    out.push(c.decimals);
    out.extend_from_slice(&[0, 0]);
    if field_list {
        out.push(0xfb);
    }
    out
}

/// MYSQL_TYPE_NEWDECIMAL.
const NEWDECIMAL: u8 = 0xf6;

/// The text form of `v` as a value of column `c`: a DECIMAL shows the column's digits after
/// the point (`0.00`, not `0`, for DECIMAL(p,2): arithmetic may give a value of a smaller
/// scale, such as an exact zero).
fn column_text(c: Option<&Column>, v: &Value) -> Option<Vec<u8>> {
    if let (Some(c), Value::Decimal(d)) = (c, v) {
        if c.ty == NEWDECIMAL && u32::from(c.decimals) > d.scale() && c.decimals <= 28 {
            let mut d = *d;
            d.rescale(u32::from(c.decimals));
            return Some(d.to_string().into_bytes());
        }
    }
    v.to_text()
}

/// The text form of `v` as a value of column `c`, length-encoded into `out` (0xFB for
/// NULL): strings and integers without an intermediate copy.
fn put_column_text(out: &mut Vec<u8>, c: Option<&Column>, v: &Value) {
    match v {
        Value::Bytes(b) => put_lenenc_bytes(out, b),
        Value::Int(i) => put_decimal_digits(out, *i < 0, i.unsigned_abs()),
        Value::UInt(u) => put_decimal_digits(out, false, *u),
        other => match column_text(c, other) {
            Some(b) => put_lenenc_bytes(out, &b),
            None => out.push(0xfb),
        },
    }
}

/// An integer's decimal digits, length-encoded (at most 20 digits and a sign: one length
/// byte).
fn put_decimal_digits(out: &mut Vec<u8>, negative: bool, mut n: u64) {
    let mut buf = [0u8; 21];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if negative {
        at -= 1;
        buf[at] = b'-';
    }
    out.push((buf.len() - at) as u8);
    out.extend_from_slice(&buf[at..]);
}

/// About how many bytes a row's encoding takes, to size its buffer once.
fn row_size_hint(values: &[Value]) -> usize {
    values.iter().map(|v| if let Value::Bytes(b) = v { b.len() + 9 } else { 12 }).sum::<usize>() + 4
}

/// A text-protocol row for `columns`.
pub fn text_row(columns: &[Column], values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    text_row_into(&mut out, columns, values);
    out
}

/// [`text_row`], appended to `out`.
pub fn text_row_into(out: &mut Vec<u8>, columns: &[Column], values: &[Value]) {
    out.reserve(row_size_hint(values));
    for (i, v) in values.iter().enumerate() {
        put_column_text(out, columns.get(i), v);
    }
}

fn put_datetime(out: &mut Vec<u8>, d: &DateTime, date_only: bool) {
    if date_only || (d.hour == 0 && d.minute == 0 && d.second == 0 && d.micro == 0) {
        if d.year == 0 && d.month == 0 && d.day == 0 {
            out.push(0);
            return;
        }
        out.push(4);
        out.extend_from_slice(&d.year.to_le_bytes());
        out.extend_from_slice(&[d.month, d.day]);
        return;
    }
    out.push(if d.micro > 0 { 11 } else { 7 });
    out.extend_from_slice(&d.year.to_le_bytes());
    out.extend_from_slice(&[d.month, d.day, d.hour, d.minute, d.second]);
    if d.micro > 0 {
        out.extend_from_slice(&d.micro.to_le_bytes());
    }
}

/// A binary-protocol row for `columns`.
pub fn binary_row(columns: &[Column], values: &[Value]) -> Vec<u8> {
    let mut out = Vec::new();
    binary_row_into(&mut out, columns, values);
    out
}

/// [`binary_row`], appended to `out`.
pub fn binary_row_into(out: &mut Vec<u8>, columns: &[Column], values: &[Value]) {
    let n = values.len();
    out.reserve(1 + (n + 9) / 8 + row_size_hint(values));
    out.push(0x00);
    let bitmap_start = out.len();
    out.extend(std::iter::repeat_n(0, (n + 7 + 2) / 8));
    for (i, (c, v)) in columns.iter().zip(values).enumerate() {
        if v.is_null() {
            let bit = i + 2;
            out[bitmap_start + bit / 8] |= 1 << (bit % 8);
            continue;
        }
        match c.ty {
            1 => out.push(v.as_i64().unwrap_or(0) as u8),
            2 | 13 => out.extend_from_slice(&(v.as_i64().unwrap_or(0) as u16).to_le_bytes()),
            3 | 9 => out.extend_from_slice(&(v.as_i64().unwrap_or(0) as u32).to_le_bytes()),
            8 => match v {
                Value::UInt(u) => out.extend_from_slice(&u.to_le_bytes()),
                other => out.extend_from_slice(&other.as_i64().unwrap_or(0).to_le_bytes()),
            },
            4 => out.extend_from_slice(&(v.as_f64().unwrap_or(0.0) as f32).to_le_bytes()),
            5 => out.extend_from_slice(&v.as_f64().unwrap_or(0.0).to_le_bytes()),
            7 | 10 | 12 => match v {
                Value::Date(d) | Value::DateTime(d) => put_datetime(out, d, c.ty == 10),
                other => match DateTime::parse(&other.to_display()) {
                    Some(d) => put_datetime(out, &d, c.ty == 10),
                    None => out.push(0),
                },
            },
            11 => {
                let us = match v {
                    Value::Time(t) => *t,
                    _ => 0,
                };
                if us == 0 {
                    out.push(0);
                } else {
                    let a = us.unsigned_abs();
                    let secs = a / 1_000_000;
                    let micro = (a % 1_000_000) as u32;
                    out.push(if micro > 0 { 12 } else { 8 });
                    out.push((us < 0) as u8);
                    out.extend_from_slice(&((secs / 86_400) as u32).to_le_bytes());
                    out.extend_from_slice(&[((secs / 3600) % 24) as u8, ((secs / 60) % 60) as u8, (secs % 60) as u8]);
                    if micro > 0 {
                        out.extend_from_slice(&micro.to_le_bytes());
                    }
                }
            }
            6 => {}
            _ => match v {
                Value::Bytes(b) => put_lenenc_bytes(out, b),
                other => put_lenenc_bytes(out, &column_text(Some(c), other).unwrap_or_default()),
            },
        }
    }
}

/// The client's handshake response.
#[derive(Debug, Default)]
pub struct HandshakeResponse {
    /// Capabilities.
    pub caps: u32,
    /// User name.
    pub user: String,
    /// Auth response bytes.
    pub auth: Vec<u8>,
    /// Database to use.
    pub db: Option<String>,
    /// The auth plugin the client used.
    pub plugin: Option<String>,
}

/// Parses Protocol::HandshakeResponse41.
pub fn parse_handshake_response(payload: &[u8]) -> Result<HandshakeResponse> {
    let mut r = Reader::new(payload);
    let caps = r.u32()?;
    if caps & caps::PROTOCOL_41 == 0 {
        return Err(malformed("client does not speak protocol 4.1"));
    }
    let _max_packet = r.u32()?;
    let _charset = r.u8()?;
    r.take(23)?;
    let user = String::from_utf8_lossy(r.nul_bytes()?).into_owned();
    let auth = if caps & caps::PLUGIN_AUTH_LENENC != 0 {
        r.lenenc_bytes()?.to_vec()
    } else if caps & caps::SECURE_CONNECTION != 0 {
        let n = r.u8()? as usize;
        r.take(n)?.to_vec()
    } else {
        r.nul_bytes()?.to_vec()
    };
    let mut db = None;
    if caps & caps::CONNECT_WITH_DB != 0 && r.remaining() > 0 {
        let d = String::from_utf8_lossy(r.nul_bytes()?).into_owned();
        if !d.is_empty() {
            db = Some(d);
        }
    }
    let mut plugin = None;
    if caps & caps::PLUGIN_AUTH != 0 && r.remaining() > 0 {
        plugin = Some(String::from_utf8_lossy(r.nul_bytes().unwrap_or_default()).into_owned());
    }
    Ok(HandshakeResponse { caps, user, auth, db, plugin })
}

/// A client command.
#[derive(Debug, PartialEq)]
pub enum Command<'a> {
    /// COM_QUIT.
    Quit,
    /// COM_INIT_DB.
    InitDb(&'a [u8]),
    /// COM_QUERY.
    Query(&'a [u8]),
    /// COM_FIELD_LIST (table, wildcard).
    FieldList(&'a [u8]),
    /// COM_PING.
    Ping,
    /// COM_STATISTICS.
    Statistics,
    /// COM_STMT_PREPARE.
    Prepare(&'a [u8]),
    /// COM_STMT_EXECUTE (statement id, rest of the payload).
    Execute(u32, &'a [u8]),
    /// COM_STMT_SEND_LONG_DATA.
    LongData(u32, u16, &'a [u8]),
    /// COM_STMT_CLOSE.
    Close(u32),
    /// COM_STMT_RESET.
    Reset(u32),
    /// COM_SET_OPTION.
    SetOption(u16),
    /// COM_RESET_CONNECTION.
    ResetConnection,
    /// Anything else (by command byte).
    Unknown(u8),
}

/// Parses a command packet.
pub fn parse_command(payload: &[u8]) -> Result<Command<'_>> {
    let mut r = Reader::new(payload);
    let cmd = r.u8()?;
    Ok(match cmd {
        0x01 => Command::Quit,
        0x02 => Command::InitDb(r.rest()),
        0x03 => Command::Query(r.rest()),
        0x04 => Command::FieldList(r.nul_bytes().unwrap_or_else(|_| r.rest())),
        0x09 => Command::Statistics,
        0x0e => Command::Ping,
        0x16 => Command::Prepare(r.rest()),
        0x17 => {
            let id = r.u32()?;
            Command::Execute(id, r.rest())
        }
        0x18 => {
            let id = r.u32()?;
            let param = r.u16()?;
            Command::LongData(id, param, r.rest())
        }
        0x19 => Command::Close(r.u32()?),
        0x1a => Command::Reset(r.u32()?),
        0x1b => Command::SetOption(r.u16()?),
        0x1f => Command::ResetConnection,
        other => Command::Unknown(other),
    })
}

/// Decodes COM_STMT_EXECUTE parameters. `types` carries the parameter types bound by an
/// earlier execution (updated when the client sends new ones); `long_data` holds values
/// sent with COM_STMT_SEND_LONG_DATA.
pub fn parse_execute_params(
    body: &[u8],
    count: usize,
    types: &mut Vec<(u8, bool)>,
    long_data: &mut [Option<Vec<u8>>],
) -> Result<Vec<Value>> {
    let mut r = Reader::new(body);
    let _flags = r.u8()?;
    let _iterations = r.u32()?;
    if count == 0 {
        return Ok(Vec::new());
    }
    let bitmap = r.take(count.div_ceil(8))?.to_vec();
    let new_bound = r.u8()?;
    if new_bound == 1 {
        types.clear();
        for _ in 0..count {
            let t = r.u8()?;
            let f = r.u8()?;
            types.push((t, f & 0x80 != 0));
        }
    }
    if types.len() != count {
        return Err(malformed("parameter types were never sent"));
    }
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        if bitmap[i / 8] & (1 << (i % 8)) != 0 {
            out.push(Value::Null);
            continue;
        }
        if let Some(data) = long_data.get_mut(i).and_then(|d| d.take()) {
            out.push(Value::Bytes(data));
            continue;
        }
        let (t, unsigned) = types[i];
        out.push(match t {
            0x06 => Value::Null,
            0x01 => {
                let b = r.u8()?;
                if unsigned {
                    Value::UInt(b as u64)
                } else {
                    Value::Int(b as i8 as i64)
                }
            }
            0x02 | 0x0d => {
                let v = r.u16()?;
                if unsigned {
                    Value::UInt(v as u64)
                } else {
                    Value::Int(v as i16 as i64)
                }
            }
            0x03 | 0x09 => {
                let v = r.u32()?;
                if unsigned {
                    Value::UInt(v as u64)
                } else {
                    Value::Int(v as i32 as i64)
                }
            }
            0x08 => {
                let v = r.u64()?;
                if unsigned {
                    Value::UInt(v)
                } else {
                    Value::Int(v as i64)
                }
            }
            0x04 => Value::Double(f32::from_le_bytes(r.take(4)?.try_into().map_err(|_| malformed("float"))?) as f64),
            0x05 => Value::Double(f64::from_le_bytes(r.take(8)?.try_into().map_err(|_| malformed("double"))?)),
            0x07 | 0x0a | 0x0c => {
                let n = r.u8()? as usize;
                let b = r.take(n)?;
                let mut d = DateTime::default();
                if n >= 4 {
                    d.year = u16::from_le_bytes([b[0], b[1]]);
                    d.month = b[2];
                    d.day = b[3];
                }
                if n >= 7 {
                    (d.hour, d.minute, d.second) = (b[4], b[5], b[6]);
                }
                if n >= 11 {
                    d.micro = u32::from_le_bytes([b[7], b[8], b[9], b[10]]);
                }
                if t == 0x0a {
                    Value::Date(d)
                } else {
                    Value::DateTime(d)
                }
            }
            0x0b => {
                let n = r.u8()? as usize;
                let b = r.take(n)?;
                if n >= 8 {
                    let neg = b[0] == 1;
                    let days = u32::from_le_bytes([b[1], b[2], b[3], b[4]]) as i64;
                    let secs = days * 86_400 + b[5] as i64 * 3600 + b[6] as i64 * 60 + b[7] as i64;
                    let micro = if n >= 12 { u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as i64 } else { 0 };
                    // A TIME holds at most 838:59:59; a larger value from the wire is clamped
                    // to it, as MySQL clamps an out-of-range TIME (and so the arithmetic
                    // cannot overflow: days is at most 2^32, micro below 2^32).
                    let us = (secs.min(TIME_MAX_SECS) * 1_000_000 + micro).min(TIME_MAX_SECS * 1_000_000);
                    Value::Time(if neg { -us } else { us })
                } else {
                    Value::Time(0)
                }
            }
            0xf6 | 0x00 => {
                let b = r.lenenc_bytes()?;
                let s = std::str::from_utf8(b).map_err(|_| malformed("decimal"))?;
                Value::Decimal(s.parse::<Decimal>().map_err(|_| malformed("decimal"))?)
            }
            _ => Value::Bytes(r.lenenc_bytes()?.to_vec()),
        });
    }
    Ok(out)
}

/// The largest TIME MySQL holds, 838:59:59, in seconds.
const TIME_MAX_SECS: i64 = 838 * 3600 + 59 * 60 + 59;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lenenc_round_trips() {
        for n in [0u64, 250, 251, 65535, 65536, 16_777_215, 16_777_216, u64::MAX] {
            let mut b = Vec::new();
            put_lenenc(&mut b, n);
            assert_eq!(Reader::new(&b).lenenc().expect("decodes"), n);
        }
    }

    /// Text rows write strings and integers straight into the packet; every value reads
    /// back as its text form.
    #[test]
    fn text_rows_hold_each_value_as_text() {
        let values = vec![
            Value::Int(0),
            Value::Int(-7),
            Value::Int(i64::MIN),
            Value::UInt(u64::MAX),
            Value::str("héllo"),
            Value::Bytes(vec![b'x'; 300]),
            Value::Null,
            Value::Decimal("1.50".parse().expect("decimal")),
        ];
        let columns: Vec<Column> = values.iter().map(|_| Column::text("c")).collect();
        let row = text_row(&columns, &values);
        let mut r = Reader::new(&row);
        for v in &values {
            match v.to_text() {
                Some(text) => assert_eq!(r.lenenc_bytes().expect("value"), &text[..], "{v:?}"),
                None => assert_eq!(r.u8().expect("null"), 0xfb),
            }
        }
        assert_eq!(r.remaining(), 0);
        // Appending to a buffer that holds something already leaves that in place.
        let mut out = b"head".to_vec();
        text_row_into(&mut out, &columns, &values);
        assert_eq!(&out[..4], b"head");
        assert_eq!(&out[4..], &row[..]);
    }

    #[test]
    fn execute_params_decode_and_reject_truncation() {
        // flags, iterations, bitmap (param 1 null), new-bound, types (longlong, varstring)
        let mut body = vec![0, 1, 0, 0, 0, 0b10, 1, 8, 0, 253, 0];
        body.extend_from_slice(&42i64.to_le_bytes());
        let mut types = Vec::new();
        let mut long = vec![None, None];
        let v = parse_execute_params(&body, 2, &mut types, &mut long).expect("decodes");
        assert_eq!(v[0].to_display(), "42");
        assert!(v[1].is_null());
        assert!(parse_execute_params(&body[..body.len() - 3], 2, &mut types, &mut long).is_err());
    }
}
