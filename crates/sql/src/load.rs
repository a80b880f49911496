//! `LOAD DATA [LOCAL] INFILE`: rows read from a delimited text file (the client's, sent
//! over the connection, or one in the server's `secure_file_priv` directory) and inserted
//! as one statement.
//!
//! The statement is parsed from tokens (sqlparser knows only Hive's `LOAD DATA INPATH`).
//! The file is read as a stream: [`FieldReader`] splits what has arrived into rows with
//! MySQL's FIELDS/LINES rules, and rows are converted, completed and stored in batches
//! through the same path as INSERT (defaults, AUTO_INCREMENT, generated columns, CHECK,
//! unique keys locked and checked one batch at a time). The whole load is one statement of
//! one transaction, so it is all or nothing, and what it buffers is charged to the
//! statement's memory quota.
//!
//! As in MySQL, `LOCAL` (or `IGNORE`) turns data errors into warnings: a duplicate key
//! skips the row, a value the column cannot hold is adjusted (numbers clipped, strings cut),
//! missing fields get defaults and extra fields are dropped. Without them, strict mode makes
//! each of these an error that rolls the whole load back.

use std::sync::Arc;

use async_trait::async_trait;
use sqlparser::ast;
use sqlparser::dialect::MySqlDialect;
use sqlparser::parser::Parser;
use sqlparser::tokenizer::Token;
use strata_common::{Code, Error, Result, Value};
use strata_txn::Transaction;

use crate::binder::{Binder, ScopeColumn};
use crate::catalog::{ColumnInfo, TableInfo};
use crate::dml::{DmlCtx, OnDuplicate};
use crate::exec::ExecCtx;
use crate::grants::TokenCursor;
use crate::plan::OutputColumn;
use crate::result::QueryResult;
use crate::types::ColumnType;

/// The table name user variables of a LOAD DATA column list are bound under in SET
/// expressions (only reachable qualified, which SQL text cannot spell).
pub const VARS_TABLE: &str = "__load_vars__";

/// Rows converted and stored per batch.
const BATCH_ROWS: usize = 1024;

/// Bytes of fields a batch read ahead may hold (it is not charged to the statement until
/// its rows are completed), whatever the line count.
const BATCH_BYTES: usize = 8 << 20;

/// Where a file's bytes come from: the client (LOCAL) or the server's file system.
#[async_trait]
pub trait FileSource: Send {
    /// Starts reading `name` (for LOCAL, asks the client to send it).
    async fn open(&mut self, name: &str) -> Result<()>;
    /// The next piece of the file; None at its end.
    async fn read(&mut self) -> Result<Option<Vec<u8>>>;
}

/// The client of a connection that cannot send files nor take a streamed result.
pub struct NoClientFiles;

#[async_trait]
impl FileSource for NoClientFiles {
    async fn open(&mut self, _name: &str) -> Result<()> {
        Err(local_disabled())
    }

    async fn read(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(None)
    }
}

impl crate::result::ClientPort for NoClientFiles {
    fn files(&mut self) -> &mut dyn FileSource {
        self
    }

    fn results(&mut self) -> Option<&mut dyn crate::result::ResultSink> {
        None
    }
}

/// 3948: LOAD DATA LOCAL refused.
pub fn local_disabled() -> Error {
    Error::user(
        Code::ClientLocalFilesDisabled,
        "Loading local data is disabled; this must be enabled on both the client and server sides",
    )
}

/// A file in the server's file system (its path already checked by [`server_path`]), read
/// in pieces.
#[derive(Default)]
pub struct ServerFile {
    file: Option<tokio::fs::File>,
}

#[async_trait]
impl FileSource for ServerFile {
    async fn open(&mut self, name: &str) -> Result<()> {
        let f = tokio::fs::File::open(name).await.map_err(|e| {
            Error::user(
                Code::FileNotFound,
                format!("File '{name}' not found (Errcode: {} - {e})", e.raw_os_error().unwrap_or(0)),
            )
        })?;
        self.file = Some(f);
        Ok(())
    }

    async fn read(&mut self) -> Result<Option<Vec<u8>>> {
        use tokio::io::AsyncReadExt;
        let Some(f) = self.file.as_mut() else { return Ok(None) };
        let mut buf = vec![0u8; 256 * 1024];
        let n = f.read(&mut buf).await.map_err(|e| Error::internal(format!("reading the file: {e}")))?;
        if n == 0 {
            self.file = None;
            return Ok(None);
        }
        buf.truncate(n);
        Ok(Some(buf))
    }
}

/// The path of a server-side file LOAD DATA may read, under `secure_file_priv` (`dir`):
/// NULL refuses every file (1290), '' allows any, a directory allows the files in it (a
/// relative name is taken inside it).
pub fn server_path(name: &str, dir: &Value) -> Result<String> {
    let refused = || {
        Error::user(
            Code::OptionPreventsStatement,
            "The MySQL server is running with the --secure-file-priv option so it cannot execute this statement",
        )
    };
    let Some(dir) = dir.to_text() else { return Err(refused()) };
    let dir = String::from_utf8_lossy(&dir).into_owned();
    let path = std::path::Path::new(&dir).join(name);
    let not_found = |e: std::io::Error| {
        Error::user(
            Code::FileNotFound,
            format!("File '{}' not found (Errcode: {} - {e})", path.display(), e.raw_os_error().unwrap_or(0)),
        )
    };
    let real = std::fs::canonicalize(&path).map_err(not_found)?;
    if !dir.is_empty() {
        let base = std::fs::canonicalize(&dir).map_err(|_| refused())?;
        if !real.starts_with(&base) {
            return Err(refused());
        }
    }
    Ok(real.to_string_lossy().into_owned())
}

/// What to do with a row that duplicates a unique key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Duplicates {
    /// Neither REPLACE nor IGNORE was given.
    Default,
    /// REPLACE.
    Replace,
    /// IGNORE.
    Ignore,
}

/// Where one field of a line goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A column, by name.
    Column(String),
    /// A user variable (`@name`, lower case), usable in SET.
    Var(String),
}

/// How a file is split into lines and fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Format {
    /// FIELDS TERMINATED BY (default tab).
    pub field_term: Vec<u8>,
    /// FIELDS `[OPTIONALLY] ENCLOSED BY` (default none).
    pub enclosed: Option<u8>,
    /// FIELDS ESCAPED BY (default backslash; `''` for none).
    pub escaped: Option<u8>,
    /// LINES STARTING BY (default none).
    pub line_start: Vec<u8>,
    /// LINES TERMINATED BY (default newline).
    pub line_term: Vec<u8>,
}

impl Default for Format {
    fn default() -> Self {
        Format {
            field_term: b"\t".to_vec(),
            enclosed: None,
            escaped: Some(b'\\'),
            line_start: Vec::new(),
            line_term: b"\n".to_vec(),
        }
    }
}

/// A parsed LOAD DATA statement.
#[derive(Clone, Debug, PartialEq)]
pub struct LoadSpec {
    /// LOCAL: the client sends the file.
    pub local: bool,
    /// The file name as written.
    pub file: String,
    /// REPLACE / IGNORE.
    pub duplicates: Duplicates,
    /// The table.
    pub table: ast::ObjectName,
    /// Field and line syntax.
    pub format: Format,
    /// IGNORE n LINES.
    pub skip_lines: u64,
    /// The column list (None: every column in order).
    pub targets: Option<Vec<Target>>,
    /// SET assignments.
    pub set: Vec<ast::Assignment>,
}

impl LoadSpec {
    /// Whether data errors are warnings (IGNORE, or LOCAL without REPLACE).
    pub fn lenient(&self) -> bool {
        self.duplicates == Duplicates::Ignore || (self.local && self.duplicates == Duplicates::Default)
    }
}

/// Parses LOAD DATA; None when `sql` is not one.
pub fn parse(sql: &str) -> Option<Result<LoadSpec>> {
    let head = crate::grants::leading_words(sql, 2);
    if head.first().map(String::as_str) != Some("LOAD") {
        return None;
    }
    let mut p = TokenCursor::new(sql)?;
    p.expect("LOAD").ok()?;
    if p.eat("XML") {
        return Some(Err(Error::unsupported("LOAD XML")));
    }
    if !p.eat("DATA") {
        return None;
    }
    Some(parse_rest(p))
}

fn parse_rest(mut p: TokenCursor) -> Result<LoadSpec> {
    let _ = p.eat("LOW_PRIORITY") || p.eat("CONCURRENT");
    let local = p.eat("LOCAL");
    p.expect("INFILE")?;
    let file = p.string()?;
    let duplicates = if p.eat("REPLACE") {
        Duplicates::Replace
    } else if p.eat("IGNORE") {
        Duplicates::Ignore
    } else {
        Duplicates::Default
    };
    p.expect("INTO")?;
    p.expect("TABLE")?;
    let table = p.object_name()?;
    if p.eat("PARTITION") {
        return Err(Error::unsupported("LOAD DATA ... PARTITION"));
    }
    if p.eat_seq(&["CHARACTER", "SET"]) || p.eat("CHARSET") {
        let cs = p.name()?.to_ascii_lowercase();
        if !matches!(cs.as_str(), "utf8mb4" | "utf8" | "utf8mb3" | "binary" | "ascii") {
            return Err(Error::user(Code::UnknownCharacterSet, format!("Unknown character set: '{cs}'")));
        }
    }
    let mut format = Format::default();
    if p.eat("FIELDS") || p.eat("COLUMNS") {
        let mut any = false;
        loop {
            if p.eat_seq(&["TERMINATED", "BY"]) {
                format.field_term = p.string()?.into_bytes();
            } else if p.eat_seq(&["OPTIONALLY", "ENCLOSED", "BY"]) || p.eat_seq(&["ENCLOSED", "BY"]) {
                format.enclosed = one_char(&p.string()?)?;
            } else if p.eat_seq(&["ESCAPED", "BY"]) {
                format.escaped = one_char(&p.string()?)?;
            } else {
                break;
            }
            any = true;
        }
        if !any {
            return Err(p.error());
        }
    }
    if p.eat("LINES") {
        let mut any = false;
        loop {
            if p.eat_seq(&["STARTING", "BY"]) {
                format.line_start = p.string()?.into_bytes();
            } else if p.eat_seq(&["TERMINATED", "BY"]) {
                format.line_term = p.string()?.into_bytes();
            } else {
                break;
            }
            any = true;
        }
        if !any {
            return Err(p.error());
        }
    }
    if format.field_term.is_empty() || format.line_term.is_empty() {
        // MySQL's fixed-width rows (both terminators and the enclosure empty) are not read.
        return Err(Error::user(
            Code::WrongFieldTerminators,
            "Field separator argument is not what is expected; check the manual",
        ));
    }
    let mut skip_lines = 0;
    if p.eat("IGNORE") {
        skip_lines = p.number()?;
        if !(p.eat("LINES") || p.eat("ROWS")) {
            return Err(p.error());
        }
    }
    let mut targets = None;
    if p.eat_token(&Token::LParen) {
        let mut list = Vec::new();
        if !p.eat_token(&Token::RParen) {
            loop {
                list.push(p.load_target()?);
                if p.eat_token(&Token::RParen) {
                    break;
                }
                if !p.eat_token(&Token::Comma) {
                    return Err(p.error());
                }
            }
        }
        targets = Some(list);
    }
    let mut set = Vec::new();
    if p.eat("SET") {
        let rest = p.rest();
        let mut parser = Parser::new(&MySqlDialect {}).with_tokens(rest);
        set = parser
            .parse_comma_separated(Parser::parse_assignment)
            .and_then(|s| parser.expect_token(&Token::EOF).map(|_| s))
            .map_err(|e| Error::parse(format!("You have an error in your SQL syntax: {e}")))?;
        crate::depth::check_parts(&mut set)?;
    } else {
        p.done()?;
    }
    Ok(LoadSpec { local, file, duplicates, table, format, skip_lines, targets, set })
}

/// ENCLOSED BY / ESCAPED BY take one character or none.
fn one_char(s: &str) -> Result<Option<u8>> {
    match s.as_bytes() {
        [] => Ok(None),
        [c] => Ok(Some(*c)),
        _ => Err(Error::user(
            Code::WrongFieldTerminators,
            "Field separator argument is not what is expected; check the manual",
        )),
    }
}

/// One field of a line: its bytes, or None for NULL (`\N`, or an unquoted `NULL` when
/// fields may be enclosed).
pub type Field = Option<Vec<u8>>;

/// Splits a stream of bytes into lines of fields. Bytes are added as they arrive; a line
/// is returned once its terminator (or the end of the input) has been seen.
pub struct FieldReader {
    format: Format,
    buf: Vec<u8>,
    pos: usize,
    eof: bool,
    /// Do not try again before this many unread bytes are buffered: a line that did not fit
    /// is retried when the buffer has doubled, so a long line costs linear time.
    retry_at: usize,
    /// The longest line accepted.
    max_line: usize,
}

enum Step<T> {
    Done(T),
    More,
}

impl FieldReader {
    /// A reader of lines in `format`, none longer than `max_line` bytes.
    pub fn new(format: Format, max_line: usize) -> FieldReader {
        FieldReader { format, buf: Vec::new(), pos: 0, eof: false, retry_at: 0, max_line }
    }

    /// Adds bytes that arrived.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Marks the end of the input.
    pub fn finish(&mut self) {
        self.eof = true;
    }

    /// Bytes buffered and not yet returned as lines.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next line, or None when more input is needed (or, after `finish`, at the end).
    pub fn next_line(&mut self) -> Result<Option<Vec<Field>>> {
        let avail = self.pending();
        if !self.eof && avail < self.retry_at {
            return Ok(None);
        }
        match self.line(&self.buf[self.pos..]) {
            Step::Done(Some((fields, used))) => {
                self.pos += used;
                self.retry_at = 0;
                Ok(Some(fields))
            }
            Step::Done(None) => {
                self.pos = self.buf.len();
                Ok(None)
            }
            Step::More => {
                if avail > self.max_line {
                    return Err(Error::user(
                        Code::NetPacketTooLarge,
                        "Got a packet bigger than 'max_allowed_packet' bytes (a line of the file)",
                    ));
                }
                self.retry_at = avail.saturating_mul(2).max(1);
                Ok(None)
            }
        }
    }

    /// Parses one line at the start of `b`: its fields and the bytes it used, None at the
    /// end of the input.
    fn line(&self, b: &[u8]) -> Step<Option<(Vec<Field>, usize)>> {
        let mut p = 0;
        if !self.format.line_start.is_empty() {
            // Text before the prefix (and lines without it) is skipped.
            match find(b, &self.format.line_start) {
                Some(i) => p = i + self.format.line_start.len(),
                None if self.eof => return Step::Done(None),
                None => return Step::More,
            }
        }
        if p == b.len() && self.eof {
            return Step::Done(None);
        }
        let mut fields = Vec::new();
        loop {
            let (field, next, line_end) = match self.field(b, p) {
                Step::Done(x) => x,
                Step::More => return Step::More,
            };
            fields.push(field);
            p = next;
            if line_end {
                return Step::Done(Some((fields, p)));
            }
        }
    }

    /// Whether `pat` is at `b[i..]` (More: the input ends inside a possible match).
    fn at(&self, b: &[u8], i: usize, pat: &[u8]) -> Step<bool> {
        let rest = &b[i.min(b.len())..];
        if rest.len() >= pat.len() {
            Step::Done(rest.starts_with(pat))
        } else if !self.eof && pat.starts_with(rest) {
            Step::More
        } else {
            Step::Done(false)
        }
    }

    /// One field starting at `p`: the field, where the next one starts, and whether it
    /// ended the line.
    fn field(&self, b: &[u8], p: usize) -> Step<(Field, usize, bool)> {
        let f = &self.format;
        let mut out = Vec::new();
        let mut escaped_n = false;
        if let Some(q) = f.enclosed.filter(|q| b.get(p) == Some(q)) {
            let mut i = p + 1;
            loop {
                let Some(&c) = b.get(i) else {
                    return if self.eof { Step::Done((Some(out), i, true)) } else { Step::More };
                };
                if Some(c) == f.escaped && c != q {
                    let Some(&d) = b.get(i + 1) else {
                        if !self.eof {
                            return Step::More;
                        }
                        out.push(c);
                        i += 1;
                        continue;
                    };
                    escaped_n |= d == b'N';
                    out.push(unescape(d));
                    i += 2;
                    continue;
                }
                if c == q {
                    if i + 1 == b.len() && !self.eof {
                        return Step::More;
                    }
                    if b.get(i + 1) == Some(&q) {
                        out.push(q);
                        i += 2;
                        continue;
                    }
                    match self.at(b, i + 1, &f.field_term) {
                        Step::More => return Step::More,
                        Step::Done(true) => {
                            return Step::Done((null_or(out, escaped_n), i + 1 + f.field_term.len(), false))
                        }
                        Step::Done(false) => {}
                    }
                    match self.at(b, i + 1, &f.line_term) {
                        Step::More => return Step::More,
                        Step::Done(true) => {
                            return Step::Done((null_or(out, escaped_n), i + 1 + f.line_term.len(), true))
                        }
                        Step::Done(false) => {}
                    }
                    if i + 1 == b.len() {
                        return Step::Done((null_or(out, escaped_n), i + 1, true));
                    }
                }
                out.push(c);
                i += 1;
            }
        }
        let mut i = p;
        let (next, line_end) = loop {
            if i >= b.len() {
                if self.eof {
                    break (i, true);
                }
                return Step::More;
            }
            match self.at(b, i, &f.line_term) {
                Step::More => return Step::More,
                Step::Done(true) => break (i + f.line_term.len(), true),
                Step::Done(false) => {}
            }
            match self.at(b, i, &f.field_term) {
                Step::More => return Step::More,
                Step::Done(true) => break (i + f.field_term.len(), false),
                Step::Done(false) => {}
            }
            let c = b[i];
            if Some(c) == f.escaped {
                match b.get(i + 1) {
                    Some(&d) => {
                        escaped_n |= d == b'N';
                        out.push(unescape(d));
                        i += 2;
                    }
                    None if self.eof => {
                        out.push(c);
                        i += 1;
                    }
                    None => return Step::More,
                }
                continue;
            }
            out.push(c);
            i += 1;
        };
        if f.enclosed.is_some() && &b[p..i.min(b.len())] == b"NULL" {
            return Step::Done((None, next, line_end));
        }
        Step::Done((null_or(out, escaped_n), next, line_end))
    }
}

/// `\N` (the field is just the escaped N) is NULL.
fn null_or(out: Vec<u8>, escaped_n: bool) -> Field {
    if escaped_n && out == b"N" {
        None
    } else {
        Some(out)
    }
}

/// The byte an escape sequence stands for.
fn unescape(d: u8) -> u8 {
    match d {
        b'0' => 0,
        b'b' => 8,
        b'n' => b'\n',
        b'r' => b'\r',
        b't' => b'\t',
        b'Z' => 26,
        other => other,
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// A column's value when a lenient load cannot store what the file says: the nearest
/// value the type holds (numbers clipped to the range, strings cut), or the type's
/// implicit default.
fn adjusted(col: &ColumnInfo, v: &Value) -> Value {
    let implicit = || implicit_default(col);
    match &col.ty {
        ColumnType::Int { bytes, unsigned } => {
            let unsigned = *unsigned || col.unsigned;
            let (min, max) = crate::types::int_range(*bytes, unsigned);
            let f = v.as_f64().unwrap_or(0.0).round().clamp(min as f64, max as f64);
            let n = if unsigned { Value::UInt(f as u64) } else { Value::Int(f as i64) };
            col.coerce(n).unwrap_or_else(|_| implicit())
        }
        ColumnType::Decimal { precision, scale } => {
            let f = v.as_f64().unwrap_or(0.0);
            let int_digits = i32::from(*precision) - i32::from(*scale);
            let max = 10f64.powi(int_digits) - 10f64.powi(-i32::from(*scale));
            let lo = if col.unsigned { 0.0 } else { -max };
            col.coerce(Value::Double(f.clamp(lo, max))).unwrap_or_else(|_| implicit())
        }
        ColumnType::Float | ColumnType::Double => {
            let f = v.as_f64().unwrap_or(0.0);
            let f = if col.unsigned { f.max(0.0) } else { f };
            col.coerce(Value::Double(f)).unwrap_or_else(|_| implicit())
        }
        ColumnType::Char(n) | ColumnType::Varchar(n) | ColumnType::Text(n) | ColumnType::Blob(n) => {
            let bytes = v.to_text().unwrap_or_default();
            let cut = if col.ty.is_binary() || matches!(col.ty, ColumnType::Text(_)) {
                bytes[..bytes.len().min(*n as usize)].to_vec()
            } else {
                String::from_utf8_lossy(&bytes).chars().take(*n as usize).collect::<String>().into_bytes()
            };
            col.coerce(Value::Bytes(cut)).unwrap_or_else(|_| implicit())
        }
        _ => implicit(),
    }
}

/// The value MySQL stores for a column given no usable value: 0, '' or the zero of a
/// temporal type (here the earliest value Strata's types hold).
fn implicit_default(col: &ColumnInfo) -> Value {
    let zero = match &col.ty {
        ColumnType::Char(_) | ColumnType::Varchar(_) | ColumnType::Text(_) | ColumnType::Blob(_) => Value::str(""),
        ColumnType::Date | ColumnType::DateTime(_) | ColumnType::Timestamp(_) => Value::str("1970-01-01 00:00:00"),
        _ => Value::Int(0),
    };
    col.coerce(zero).unwrap_or(Value::Null)
}

/// MySQL's messages say which line; the type layer's say row 1.
fn at_row(e: Error, row: u64) -> Error {
    match e {
        Error::User { code, message } if message.ends_with(" at row 1") => {
            Error::User { code, message: format!("{}{row}", &message[..message.len() - 1]) }
        }
        other => other,
    }
}

/// Where each field of a line goes, resolved against the table.
enum Slot {
    Column(usize),
    Var(usize),
}

/// Runs a parsed LOAD DATA inside `txn`, reading the file from `source`; the user
/// variables it set go to `vars_out`, with their last values.
pub async fn run(
    dml: &DmlCtx<'_>,
    txn: &mut Transaction,
    spec: &LoadSpec,
    source: &mut dyn FileSource,
    max_line: usize,
    vars_out: &mut Vec<(String, Value)>,
) -> Result<QueryResult> {
    let mut binder = Binder::new(dml.catalog, dml.session);
    let table: Arc<TableInfo> = binder.table(&spec.table)?;
    let mut vars: Vec<String> = Vec::new();
    let slots: Vec<Slot> = match &spec.targets {
        None => (0..table.columns.len()).map(Slot::Column).collect(),
        Some(list) => {
            let mut out = Vec::with_capacity(list.len());
            let mut seen = Vec::new();
            for t in list {
                out.push(match t {
                    Target::Column(n) => {
                        let i = table.column_index(n).ok_or_else(|| crate::binder::unknown_column(n, "field list"))?;
                        if seen.contains(&i) {
                            return Err(Error::user(
                                Code::FieldSpecifiedTwice,
                                format!("Column '{n}' specified twice"),
                            ));
                        }
                        seen.push(i);
                        Slot::Column(i)
                    }
                    Target::Var(v) => match vars.iter().position(|x| x == v) {
                        Some(i) => Slot::Var(i),
                        None => {
                            vars.push(v.clone());
                            Slot::Var(vars.len() - 1)
                        }
                    },
                });
            }
            out
        }
    };
    // SET expressions see the row's columns, then the variables (as VARS_TABLE.name).
    let mut scope = Binder::table_scope(&table, &table.name);
    for v in &vars {
        scope.columns.push(ScopeColumn { table: VARS_TABLE.into(), name: v.clone(), meta: OutputColumn::default() });
    }
    let mut sets = Vec::with_capacity(spec.set.len());
    for a in &spec.set {
        let col = crate::dml::assignment_column(&table, a)?;
        let value = vars_as_columns(&a.value, &vars);
        sets.push((
            col,
            if crate::dml::is_default_keyword(&a.value) { None } else { Some(binder.expr(&value, &scope)?) },
        ));
    }
    let subqueries = binder.take_subqueries()?;
    let on_dup = match spec.duplicates {
        Duplicates::Replace => OnDuplicate::Replace,
        _ if spec.lenient() => OnDuplicate::Ignore,
        _ => OnDuplicate::Error,
    };

    source.open(&spec.file).await?;
    let mut lines = Lines {
        source,
        reader: FieldReader::new(spec.format.clone(), max_line),
        done: false,
        to_skip: spec.skip_lines,
        records: 0,
        warnings: 0,
        table: &table,
        slots: &slots,
        nvars: vars.len(),
        lenient: spec.lenient(),
    };
    let mut charge = crate::context::Charge::new();
    let mut first_auto = None;
    let (mut deleted, mut skipped, mut dup_warnings) = (0u64, 0u64, 0u64);
    let mut var_values: Vec<Value> = vec![Value::Null; vars.len()];
    // The next batch of lines is read and converted while the previous batch's rows are
    // stored (the store's commands run on other threads), so the two overlap.
    let (mut pending, mut stop) = lines.next_batch(BATCH_ROWS).await;
    loop {
        let mut rows = Vec::with_capacity(pending.len());
        for line in pending {
            let n = line.n;
            for (code, msg) in line.warnings {
                crate::context::warn(code, msg);
            }
            let mut given = line.given;
            var_values = line.vars;
            if !sets.is_empty() {
                let now = Value::DateTime(dml.session.now());
                let mut input: Vec<Value> = Vec::with_capacity(table.columns.len() + vars.len());
                for (c, g) in table.columns.iter().zip(&given) {
                    input.push(match g {
                        Some(v) => v.clone(),
                        None => crate::catalog::default_value(c, &now).unwrap_or(Value::Null),
                    });
                }
                input.extend(var_values.iter().cloned());
                let mut ctx = ExecCtx::new(txn, dml.params, subqueries.clone());
                for (col, e) in &sets {
                    given[*col] = match e {
                        Some(e) => {
                            let v = ctx.eval(e, &input).await.map_err(|e| at_row(e, n))?;
                            let c = &table.columns[*col];
                            // Like the file's values, converted here (complete_row does not).
                            Some(if c.generated.is_some() { v } else { c.coerce(v).map_err(|e| at_row(e, n))? })
                        }
                        None => None,
                    };
                }
            }
            let row = dml.complete_row(txn, &table, given, true, &mut first_auto).await.map_err(|e| at_row(e, n))?;
            charge.add_row(&row.0)?;
            rows.push(row);
        }
        if let Some(e) = stop {
            // The lines before the one that failed go first: an earlier row's error wins.
            if !rows.is_empty() {
                dml.store_rows(txn, &table, rows, &on_dup).await?;
            }
            return Err(e);
        }
        if rows.is_empty() {
            break;
        }
        let (stored, next) = tokio::join!(dml.store_rows(txn, &table, rows, &on_dup), lines.next_batch(BATCH_ROWS));
        (deleted, skipped, dup_warnings) = tally(stored?, deleted, skipped, dup_warnings);
        (pending, stop) = next;
        crate::interrupt::checkpoint().await?;
    }
    let records = lines.records;
    let warnings = lines.warnings + dup_warnings;
    let affected = records - skipped + deleted;
    let result = QueryResult::Ok {
        affected,
        matched: affected,
        last_insert_id: first_auto.unwrap_or(0),
        warnings: Vec::new(),
        info: format!("Records: {records}  Deleted: {deleted}  Skipped: {skipped}  Warnings: {warnings}"),
    };
    *vars_out = vars.into_iter().zip(var_values).collect();
    Ok(result)
}

/// One line of the file, converted: the values given for the table's columns and for the
/// user variables, and the warnings it raised (raised when its row is stored, so they come
/// in line order).
struct Line {
    n: u64,
    given: Vec<Option<Value>>,
    vars: Vec<Value>,
    warnings: Vec<(Code, String)>,
}

/// Reads the file and converts its lines, a batch ahead of the rows being stored.
struct Lines<'a> {
    source: &'a mut dyn FileSource,
    reader: FieldReader,
    done: bool,
    to_skip: u64,
    /// Lines read (not counting skipped ones).
    records: u64,
    /// Data warnings raised so far.
    warnings: u64,
    table: &'a TableInfo,
    slots: &'a [Slot],
    nvars: usize,
    lenient: bool,
}

impl Lines<'_> {
    /// Up to `max` converted lines or `BATCH_BYTES` of fields (fewer only at the end of the
    /// file), and the error that stopped it early, if one did: the lines before it are still
    /// to be stored.
    async fn next_batch(&mut self, max: usize) -> (Vec<Line>, Option<Error>) {
        let mut out = Vec::with_capacity(max);
        let mut bytes = 0usize;
        loop {
            while out.len() < max && bytes < BATCH_BYTES {
                match self.reader.next_line() {
                    Ok(Some(fields)) => {
                        if self.to_skip > 0 {
                            self.to_skip -= 1;
                            continue;
                        }
                        bytes += fields.iter().map(|f| f.as_ref().map_or(0, Vec::len) + 32).sum::<usize>();
                        match self.convert(fields) {
                            Ok(line) => out.push(line),
                            Err(e) => return (out, Some(e)),
                        }
                    }
                    Ok(None) => break,
                    Err(e) => return (out, Some(e)),
                }
            }
            if out.len() >= max || bytes >= BATCH_BYTES || self.done {
                return (out, None);
            }
            match self.source.read().await {
                Ok(Some(bytes)) => self.reader.feed(&bytes),
                Ok(None) => {
                    self.reader.finish();
                    self.done = true;
                }
                Err(e) => return (out, Some(e)),
            }
        }
    }

    /// A data problem: a warning on the line when the load is lenient, an error if not.
    fn problem(&mut self, warnings: &mut Vec<(Code, String)>, code: Code, msg: String) -> Result<()> {
        if !self.lenient {
            return Err(Error::user(code, msg));
        }
        warnings.push((code, msg));
        self.warnings += 1;
        Ok(())
    }

    /// Converts one line's fields to the columns' types (or the variables' values).
    fn convert(&mut self, fields: Vec<Field>) -> Result<Line> {
        self.records += 1;
        let n = self.records;
        let mut warnings = Vec::new();
        if fields.len() < self.slots.len() {
            self.problem(
                &mut warnings,
                Code::WarnTooFewRecords,
                format!("Row {n} doesn't contain data for all columns"),
            )?;
        } else if fields.len() > self.slots.len() {
            self.problem(
                &mut warnings,
                Code::WarnTooManyRecords,
                format!("Row {n} was truncated; it contained more data than there were input columns"),
            )?;
        }
        let table = self.table;
        let mut given: Vec<Option<Value>> = vec![None; table.columns.len()];
        let mut vars = vec![Value::Null; self.nvars];
        for (slot, field) in self.slots.iter().zip(fields) {
            let value = field.map_or(Value::Null, Value::Bytes);
            match slot {
                Slot::Var(i) => vars[*i] = value,
                Slot::Column(c) => {
                    let col = &table.columns[*c];
                    given[*c] = Some(if value.is_null() && !col.nullable && !col.auto_increment {
                        self.problem(
                            &mut warnings,
                            Code::WarnNullToNotNull,
                            format!(
                                "Column set to default value; NULL supplied to NOT NULL column '{}' at row {n}",
                                col.name
                            ),
                        )?;
                        implicit_default(col)
                    } else if col.generated.is_some() {
                        value
                    } else {
                        match col.coerce(value.clone()) {
                            Ok(v) => v,
                            Err(e) if self.lenient => {
                                if let Error::User { code, message } = at_row(e, n) {
                                    warnings.push((code, message));
                                }
                                self.warnings += 1;
                                adjusted(col, &value)
                            }
                            Err(e) => return Err(at_row(e, n)),
                        }
                    });
                }
            }
        }
        Ok(Line { n, given, vars, warnings })
    }
}

/// Adds one batch's counts (its duplicate warnings are raised on the statement).
fn tally(stored: crate::dml::Stored, deleted: u64, skipped: u64, warnings: u64) -> (u64, u64, u64) {
    for (code, msg) in stored.warnings {
        crate::context::warn(code, msg);
    }
    // One warning per skipped duplicate, kept or not.
    (deleted + stored.deleted, skipped + stored.skipped, warnings + stored.skipped)
}

/// `@v` in a SET expression becomes a reference to the variable's slot of the row.
fn vars_as_columns(e: &ast::Expr, vars: &[String]) -> ast::Expr {
    use sqlparser::ast::VisitMut;
    use std::ops::ControlFlow;
    struct V<'a>(&'a [String]);
    impl ast::VisitorMut for V<'_> {
        type Break = ();
        fn post_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
            if let ast::Expr::Identifier(id) = e {
                if let Some(name) = id.value.strip_prefix('@').filter(|n| !n.starts_with('@')) {
                    let name = name.to_ascii_lowercase();
                    if self.0.contains(&name) {
                        *e = ast::Expr::CompoundIdentifier(vec![ast::Ident::new(VARS_TABLE), ast::Ident::new(name)]);
                    }
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut c = e.clone();
    let _ = c.visit(&mut V(vars));
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(format: Format, chunks: &[&[u8]]) -> Vec<Vec<Field>> {
        let mut r = FieldReader::new(format, 1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            r.feed(c);
            while let Some(l) = r.next_line().expect("line") {
                out.push(l);
            }
        }
        r.finish();
        while let Some(l) = r.next_line().expect("line") {
            out.push(l);
        }
        out
    }

    fn f(s: &str) -> Field {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn default_format_splits_tabs_and_newlines_with_escapes() {
        let got = lines(Format::default(), &[b"1\ta\\tb\n2\t\\N\n3\tx\\\ty"]);
        assert_eq!(got, vec![vec![f("1"), f("a\tb")], vec![f("2"), None], vec![f("3"), f("x\ty")]]);
    }

    #[test]
    fn chunk_boundaries_do_not_change_the_lines() {
        let csv = Format {
            field_term: b",".to_vec(),
            enclosed: Some(b'"'),
            line_term: b"\r\n".to_vec(),
            ..Format::default()
        };
        let text: &[u8] = b"1,\"a,b\"\r\n2,\"say \"\"hi\"\"\",NULL\r\n3,\"\"\r\n";
        let whole = lines(csv.clone(), &[text]);
        assert_eq!(whole, vec![vec![f("1"), f("a,b")], vec![f("2"), f("say \"hi\""), None], vec![f("3"), f("")]]);
        for cut in 0..text.len() {
            assert_eq!(lines(csv.clone(), &[&text[..cut], &text[cut..]]), whole, "cut at {cut}");
        }
        let bytes: Vec<&[u8]> = text.chunks(1).collect();
        assert_eq!(lines(csv, &bytes), whole);
    }

    #[test]
    fn line_prefixes_skip_other_text() {
        let fmt = Format { line_start: b"xxx".to_vec(), field_term: b",".to_vec(), ..Format::default() };
        let got = lines(fmt, &[b"xxx1,a\nnoise\nyyyxxx2,b\n"]);
        assert_eq!(got, vec![vec![f("1"), f("a")], vec![f("2"), f("b")]]);
    }

    #[test]
    fn a_line_longer_than_the_limit_is_an_error() {
        let mut r = FieldReader::new(Format::default(), 16);
        r.feed(&[b'a'; 40]);
        assert!(r.next_line().is_err());
    }

    #[test]
    fn parses_the_options() {
        let spec = parse(
            "LOAD DATA LOCAL INFILE '/tmp/x.csv' REPLACE INTO TABLE db.t CHARACTER SET utf8mb4 \
             FIELDS TERMINATED BY ',' OPTIONALLY ENCLOSED BY '\"' ESCAPED BY '' \
             LINES STARTING BY '>' TERMINATED BY '\\r\\n' IGNORE 1 LINES (a, @b, `c`) SET d = @b + 1",
        )
        .expect("a LOAD DATA")
        .expect("parses");
        assert!(spec.local);
        assert_eq!(spec.file, "/tmp/x.csv");
        assert_eq!(spec.duplicates, Duplicates::Replace);
        assert_eq!(spec.table.to_string(), "db.t");
        assert_eq!(spec.format.field_term, b",");
        assert_eq!(spec.format.enclosed, Some(b'"'));
        assert_eq!(spec.format.escaped, None);
        assert_eq!(spec.format.line_start, b">");
        assert_eq!(spec.format.line_term, b"\r\n");
        assert_eq!(spec.skip_lines, 1);
        assert_eq!(
            spec.targets,
            Some(vec![Target::Column("a".into()), Target::Var("b".into()), Target::Column("c".into())])
        );
        assert_eq!(spec.set.len(), 1);
        assert!(parse("SELECT 1").is_none());
        assert!(parse("LOAD DATA INFILE 'x' INTO TABLE t FIELDS ENCLOSED BY 'ab'").expect("load").is_err());
        assert!(parse("LOAD DATA INFILE 'x' INTO TABLE t garbage").expect("load").is_err());
    }
}
