//! Statement summary: TiDB's `information_schema.statements_summary`, the server's answer to
//! "which statements take the time". Every statement a client sends is reduced to its
//! *digest* — its text with literals and parameters replaced by `?`, lists of them folded
//! into `( ... )`, keywords in lower case, comments and spacing dropped — and its execution
//! is added to the row of that digest (and current database): count, errors, warnings,
//! total / max / min latency, parse and compile and execute time, rows, plan cache hits.
//!
//! ```text
//!   SELECT c FROM t WHERE id = 7     ─┐
//!   select c from t where id=42      ─┼─ digest text `select c from t where id = ?`
//!   SELECT c FROM t WHERE id = ?     ─┘  (sha256 → DIGEST) → one row, EXEC_COUNT 3
//! ```
//!
//! Rows live in windows of `tidb_stmt_summary_refresh_interval` seconds (aligned to
//! multiples of it, as SUMMARY_BEGIN_TIME / SUMMARY_END_TIME show); a finished window moves
//! to `statements_summary_history`, which keeps `tidb_stmt_summary_history_size` of them.
//! Memory is bounded three ways: at most `tidb_stmt_summary_max_stmt_count` rows per window
//! (the least recently executed row goes to make room), sample and digest texts cut at
//! `tidb_stmt_summary_max_sql_length` bytes, and at most [`MAX_TEXT_BYTES`] of text across
//! every window (the oldest history goes first). `tidb_enable_stmt_summary=OFF` stops
//! recording and empties the tables.
//!
//! Recording is one hash lookup under a mutex per statement; a prepared statement's digest
//! is computed once, at its first execution, and reused.

use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use sha2::{Digest as _, Sha256};
use sqlparser::tokenizer::{Token, TokenWithSpan, Tokenizer};
use strata_common::time::DateTime;
use strata_common::Value;

/// Text (samples and digest texts) all windows together may hold.
pub const MAX_TEXT_BYTES: usize = 64 << 20;

/// Only this much of a statement's text is tokenized for its digest: the rest of a huge
/// multi-row INSERT would fold into the `( ... )` already seen.
const DIGEST_SCAN_BYTES: usize = 8 << 10;

/// A long statement's text is first tokenized this far: a multi-row INSERT whose rows have
/// folded by then is done (tokenizing 8 KiB of each bulk INSERT was 2.6% of the server's
/// CPU loading TPC-C).
const DIGEST_FIRST_SCAN_BYTES: usize = 1 << 10;

/// Users remembered per row (who may see it without PROCESS).
const MAX_USERS_PER_ROW: usize = 16;

/// A statement's normalized form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Digest {
    /// SHA-256 of `text`, in hex.
    pub hex: Arc<str>,
    /// The normalized text.
    pub text: Arc<str>,
    /// The statement's type (`Select`, `Insert`, `CreateTable`, ...).
    pub kind: Arc<str>,
}

/// The digest of a statement text.
pub fn digest(sql: &str) -> Digest {
    let words = if sql.len() > DIGEST_FIRST_SCAN_BYTES {
        match normalized(sql, DIGEST_FIRST_SCAN_BYTES) {
            w if matches!(w.as_slice(), [.., rows, cut] if rows == FOLDED && cut == ELLIPSIS) => w,
            _ => normalized(sql, DIGEST_SCAN_BYTES),
        }
    } else {
        normalized(sql, DIGEST_SCAN_BYTES)
    };
    let text = words.join(" ");
    let kind = statement_kind(&words);
    let mut hex = String::with_capacity(64);
    for b in Sha256::digest(text.as_bytes()) {
        let _ = write!(hex, "{b:02x}");
    }
    Digest { hex: hex.into(), text: text.into(), kind: kind.into() }
}

/// A folded list (`fold_lists`).
const FOLDED: &str = "( ... )";
/// The mark of a text digested in part.
const ELLIPSIS: &str = "...";

/// The normalized words of `sql`'s first `scan` bytes, ending in `...` if that is not all
/// of it. A text cut inside a row of a multi-row INSERT ends at the rows before, which
/// fold into one `( ... )`: where the cut falls does not change the digest.
fn normalized(sql: &str, scan: usize) -> Vec<String> {
    let cut = if sql.len() > scan {
        let mut end = scan;
        while !sql.is_char_boundary(end) {
            end -= 1;
        }
        &sql[..end]
    } else {
        sql
    };
    let dialect = sqlparser::dialect::MySqlDialect {};
    let mut tokens: Vec<TokenWithSpan> = Vec::new();
    // A text cut in the middle of a token, or one that does not tokenize, keeps the tokens
    // before the failure.
    let complete = Tokenizer::new(&dialect, cut).tokenize_with_location_into_buf(&mut tokens).is_ok();
    let mut words: Vec<String> = Vec::with_capacity(tokens.len());
    for t in tokens {
        let w = match t.token {
            Token::Whitespace(_) | Token::EOF => continue,
            Token::Word(w) => match w.quote_style {
                None => w.value.to_ascii_lowercase(),
                Some(_) => format!("`{}`", w.value.to_ascii_lowercase()),
            },
            Token::Number(..)
            | Token::SingleQuotedString(_)
            | Token::DoubleQuotedString(_)
            | Token::NationalStringLiteral(_)
            | Token::EscapedStringLiteral(_)
            | Token::HexStringLiteral(_)
            | Token::SingleQuotedByteStringLiteral(_)
            | Token::DoubleQuotedByteStringLiteral(_)
            | Token::Placeholder(_) => "?".to_string(),
            Token::SemiColon => continue,
            other => other.to_string(),
        };
        words.push(w);
    }
    let mut words = fold_lists(words);
    if !complete || cut.len() < sql.len() {
        // `( ... ) , ( ? , ?` (a row cut short): the rows so far.
        if let Some(last_rows) = words.iter().rposition(|w| w == FOLDED) {
            let rest = &words[last_rows + 1..];
            let depth: isize = rest.iter().map(|w| (w == "(") as isize - (w == ")") as isize).sum();
            let unclosed = depth > 0;
            if rest.first().is_some_and(|w| w == ",") && rest.get(1).is_some_and(|w| w == "(") && unclosed {
                words.truncate(last_rows + 1);
            }
        }
        words.push(ELLIPSIS.to_string());
    }
    words
}

/// Folds parenthesized lists of `?` into `( ... )` (an IN list or a VALUES row, whatever
/// its length) and runs of such rows separated by commas into one.
fn fold_lists(words: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        if words[i] == "(" {
            // `( ? , ? , ... )`?
            let (mut j, mut n, mut closed) = (i + 1, 0, false);
            while words.get(j).is_some_and(|w| w == "?") {
                n += 1;
                j += 1;
                match words.get(j).map(String::as_str) {
                    Some(",") => j += 1,
                    Some(")") => {
                        j += 1;
                        closed = true;
                        break;
                    }
                    _ => break,
                }
            }
            let after_list_word = out.last().is_some_and(|w| w == "in" || w == "values" || w == "value");
            let after_row = out.len() >= 2 && out[out.len() - 1] == "," && out[out.len() - 2] == FOLDED;
            if closed && (n > 1 || after_list_word || after_row) {
                if after_row {
                    out.pop(); // `( ... ) , ( ... )` is one `( ... )`
                } else {
                    out.push(FOLDED.to_string());
                }
                i = j;
                continue;
            }
        }
        out.push(words[i].clone());
        i += 1;
    }
    out
}

/// The statement type TiDB's STMT_TYPE shows, from the normalized words.
fn statement_kind(words: &[String]) -> String {
    let first = words.iter().map(String::as_str).find(|w| *w != "(").unwrap_or("");
    let cap = |w: &str| {
        let mut c = w.chars();
        c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
    };
    match first {
        "select" | "with" | "table" | "values" => "Select".into(),
        "start" | "begin" => "Begin".into(),
        "desc" | "describe" | "explain" => "Explain".into(),
        "create" | "drop" | "alter" | "truncate" | "rename" => {
            let object = words
                .iter()
                .skip(1)
                .map(String::as_str)
                .find(|w| !matches!(*w, "unique" | "or" | "replace" | "temporary" | "definer" | "=" | "algorithm"))
                .filter(|w| {
                    matches!(*w, "table" | "index" | "database" | "schema" | "view" | "user" | "role" | "sequence")
                })
                .unwrap_or("table");
            let object = if object == "schema" { "database" } else { object };
            cap(first) + &cap(object)
        }
        "" => "Other".into(),
        w if w.chars().all(|c| c.is_ascii_alphabetic()) => cap(w),
        _ => "Other".into(),
    }
}

/// One statement's execution, as the session saw it.
pub struct Execution<'a> {
    /// The database the statement ran in.
    pub schema: Option<&'a str>,
    /// The account's user name.
    pub user: &'a str,
    /// The statement's text as the client sent it.
    pub text: &'a str,
    /// Its digest.
    pub digest: &'a Digest,
    /// The tables it names (`db.t`), computed only for a digest seen for the first time.
    pub tables: &'a dyn Fn() -> String,
    /// From receipt to result.
    pub latency: Duration,
    /// Parsing.
    pub parse: Duration,
    /// Planning a query (or finding its cached plan).
    pub compile: Duration,
    /// Time in pessimistic lock requests.
    pub lock: Duration,
    /// Whether the plan came from the prepared plan cache.
    pub plan_from_cache: bool,
    /// Whether it failed.
    pub failed: bool,
    /// Warnings it raised.
    pub warnings: u64,
    /// Rows changed (DML).
    pub affected_rows: u64,
    /// Rows returned.
    pub result_rows: u64,
    /// Rows read from the store.
    pub examined_rows: u64,
    /// When it ended, microseconds since the Unix epoch.
    pub now_us: i64,
}

/// One row of the summary: a digest's executions in one window.
#[derive(Debug, Clone)]
struct Row {
    kind: Arc<str>,
    schema: Option<String>,
    digest: Arc<str>,
    digest_text: String,
    table_names: String,
    sample_user: String,
    users: Vec<String>,
    sample_text: String,
    exec_count: u64,
    sum_errors: u64,
    sum_warnings: u64,
    sum_latency: u64,
    max_latency: u64,
    min_latency: u64,
    sum_parse: u64,
    max_parse: u64,
    sum_compile: u64,
    max_compile: u64,
    max_execute: u64,
    sum_lock: u64,
    max_lock: u64,
    sum_affected: u64,
    sum_result_rows: u64,
    max_result_rows: u64,
    min_result_rows: u64,
    sum_examined: u64,
    plan_in_cache: bool,
    plan_cache_hits: u64,
    first_seen_us: i64,
    last_seen_us: i64,
    /// Recording sequence number of the last execution (least recently used goes first).
    used: u64,
}

impl Row {
    fn text_bytes(&self) -> usize {
        self.digest_text.len() + self.sample_text.len() + self.table_names.len()
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Cuts `s` to at most `max` bytes (on a character boundary).
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

/// The rows of one window.
#[derive(Debug, Default)]
struct Window {
    begin_us: i64,
    end_us: i64,
    rows: HashMap<RowKey, Row, foldhash::fast::RandomState>,
    text_bytes: usize,
}

/// A window's row key: the schema and the digest. Every execution looks its row up, so the
/// lookup borrows (`dyn KeyView`) instead of building an owned key.
#[derive(Debug, Clone, PartialEq, Eq)]
struct RowKey {
    schema: Option<String>,
    digest: Arc<str>,
}

/// The parts of a [`RowKey`], owned or borrowed.
trait KeyView {
    fn parts(&self) -> (Option<&str>, &str);
}

impl KeyView for RowKey {
    fn parts(&self) -> (Option<&str>, &str) {
        (self.schema.as_deref(), &self.digest)
    }
}

impl KeyView for (Option<&str>, &str) {
    fn parts(&self) -> (Option<&str>, &str) {
        *self
    }
}

impl<'a> std::borrow::Borrow<dyn KeyView + 'a> for RowKey {
    fn borrow(&self) -> &(dyn KeyView + 'a) {
        self
    }
}

impl std::hash::Hash for dyn KeyView + '_ {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl std::hash::Hash for RowKey {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        // The same as the borrowed form's, as `Borrow` requires.
        (self as &dyn KeyView).hash(state);
    }
}

impl PartialEq for dyn KeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyView + '_ {}

/// Settings (the `tidb_stmt_summary_*` globals).
#[derive(Debug)]
struct Settings {
    enabled: AtomicBool,
    refresh_secs: AtomicU64,
    history_size: AtomicU64,
    max_stmt_count: AtomicU64,
    max_sql_length: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    current: Window,
    history: VecDeque<Window>,
    seq: u64,
}

/// The server's statement summary.
#[derive(Debug)]
pub struct StmtSummary {
    settings: Settings,
    state: Mutex<State>,
}

impl Default for StmtSummary {
    fn default() -> StmtSummary {
        StmtSummary {
            settings: Settings {
                enabled: AtomicBool::new(true),
                refresh_secs: AtomicU64::new(1800),
                history_size: AtomicU64::new(24),
                max_stmt_count: AtomicU64::new(3000),
                max_sql_length: AtomicU64::new(4096),
            },
            state: Mutex::default(),
        }
    }
}

/// Which rows a reader may see: all (PROCESS), or those its user executed.
pub enum Visibility<'a> {
    /// Every row.
    All,
    /// Rows `user` executed.
    User(&'a str),
}

impl StmtSummary {
    /// Applies a global variable's new value, if it is one of the summary's.
    pub fn set(&self, name: &str, value: &Value) {
        let n = value.as_i64().unwrap_or(0).max(0) as u64;
        let s = &self.settings;
        match name {
            "tidb_enable_stmt_summary" => {
                s.enabled.store(n != 0, Ordering::Relaxed);
                if n == 0 {
                    *self.state.lock() = State::default();
                }
            }
            "tidb_stmt_summary_refresh_interval" => s.refresh_secs.store(n.max(1), Ordering::Relaxed),
            "tidb_stmt_summary_history_size" => s.history_size.store(n, Ordering::Relaxed),
            "tidb_stmt_summary_max_stmt_count" => s.max_stmt_count.store(n.max(1), Ordering::Relaxed),
            "tidb_stmt_summary_max_sql_length" => s.max_sql_length.store(n, Ordering::Relaxed),
            _ => {}
        }
    }

    /// Whether statements are being recorded.
    pub fn enabled(&self) -> bool {
        self.settings.enabled.load(Ordering::Relaxed)
    }

    /// Adds one execution.
    pub fn record(&self, e: &Execution<'_>) {
        if !self.enabled() {
            return;
        }
        let s = &self.settings;
        let refresh_us = (s.refresh_secs.load(Ordering::Relaxed).max(1) as i64).saturating_mul(1_000_000);
        let history_size = s.history_size.load(Ordering::Relaxed) as usize;
        let max_rows = s.max_stmt_count.load(Ordering::Relaxed).max(1) as usize;
        let max_len = s.max_sql_length.load(Ordering::Relaxed) as usize;
        let mut state = self.state.lock();
        let state = &mut *state;
        state.seq += 1;
        let seq = state.seq;
        // A new window when the current one has ended (or none has started).
        if e.now_us >= state.current.end_us || e.now_us < state.current.begin_us {
            let begin = e.now_us - e.now_us.rem_euclid(refresh_us);
            let done = std::mem::replace(
                &mut state.current,
                Window { begin_us: begin, end_us: begin + refresh_us, ..Default::default() },
            );
            if !done.rows.is_empty() {
                state.history.push_back(done);
            }
        }
        while state.history.len() > history_size {
            state.history.pop_front();
        }
        let window = &mut state.current;
        let latency = nanos(e.latency);
        let execute = latency.saturating_sub(nanos(e.parse)).saturating_sub(nanos(e.compile));
        let lookup: (Option<&str>, &str) = (e.schema, &e.digest.hex);
        if let Some(row) = window.rows.get_mut(&lookup as &dyn KeyView) {
            row.exec_count += 1;
            row.sum_errors += u64::from(e.failed);
            row.sum_warnings += e.warnings;
            row.sum_latency += latency;
            row.max_latency = row.max_latency.max(latency);
            row.min_latency = row.min_latency.min(latency);
            row.sum_parse += nanos(e.parse);
            row.max_parse = row.max_parse.max(nanos(e.parse));
            row.sum_compile += nanos(e.compile);
            row.max_compile = row.max_compile.max(nanos(e.compile));
            row.max_execute = row.max_execute.max(execute);
            row.sum_lock += nanos(e.lock);
            row.max_lock = row.max_lock.max(nanos(e.lock));
            row.sum_affected += e.affected_rows;
            row.sum_result_rows += e.result_rows;
            row.max_result_rows = row.max_result_rows.max(e.result_rows);
            row.min_result_rows = row.min_result_rows.min(e.result_rows);
            row.sum_examined += e.examined_rows;
            row.plan_in_cache = e.plan_from_cache;
            row.plan_cache_hits += u64::from(e.plan_from_cache);
            row.last_seen_us = e.now_us;
            row.used = seq;
            if row.users.len() < MAX_USERS_PER_ROW && !row.users.iter().any(|u| u == e.user) {
                row.users.push(e.user.to_string());
            }
            return;
        }
        if window.rows.len() >= max_rows {
            if let Some(oldest) = window.rows.iter().min_by_key(|(_, r)| r.used).map(|(k, _)| k.clone()) {
                if let Some(r) = window.rows.remove(&oldest) {
                    window.text_bytes -= r.text_bytes();
                }
            }
        }
        let key = RowKey { schema: e.schema.map(str::to_string), digest: e.digest.hex.clone() };
        let row = Row {
            kind: e.digest.kind.clone(),
            schema: key.schema.clone(),
            digest: e.digest.hex.clone(),
            digest_text: cut(&e.digest.text, max_len),
            table_names: cut(&(e.tables)(), max_len),
            sample_user: e.user.to_string(),
            users: vec![e.user.to_string()],
            sample_text: cut(e.text, max_len),
            exec_count: 1,
            sum_errors: u64::from(e.failed),
            sum_warnings: e.warnings,
            sum_latency: latency,
            max_latency: latency,
            min_latency: latency,
            sum_parse: nanos(e.parse),
            max_parse: nanos(e.parse),
            sum_compile: nanos(e.compile),
            max_compile: nanos(e.compile),
            max_execute: execute,
            sum_lock: nanos(e.lock),
            max_lock: nanos(e.lock),
            sum_affected: e.affected_rows,
            sum_result_rows: e.result_rows,
            max_result_rows: e.result_rows,
            min_result_rows: e.result_rows,
            sum_examined: e.examined_rows,
            plan_in_cache: e.plan_from_cache,
            plan_cache_hits: u64::from(e.plan_from_cache),
            first_seen_us: e.now_us,
            last_seen_us: e.now_us,
            used: seq,
        };
        window.text_bytes += row.text_bytes();
        window.rows.insert(key, row);
        // The bound on text across windows: the oldest history goes first, then the least
        // recently executed rows of this window.
        let mut total: usize = window.text_bytes + state.history.iter().map(|w| w.text_bytes).sum::<usize>();
        while total > MAX_TEXT_BYTES {
            if let Some(w) = state.history.pop_front() {
                total -= w.text_bytes;
                continue;
            }
            let window = &mut state.current;
            let Some(oldest) = window.rows.iter().min_by_key(|(_, r)| r.used).map(|(k, _)| k.clone()) else { break };
            if let Some(r) = window.rows.remove(&oldest) {
                window.text_bytes -= r.text_bytes();
                total -= r.text_bytes();
            }
        }
    }

    /// The rows of `statements_summary` (the current window) or, with `history`, of
    /// `statements_summary_history` (the finished windows, then the current one, as TiDB
    /// shows it), in [`COLUMNS`] order.
    pub fn rows(&self, history: bool, who: Visibility<'_>) -> Vec<Vec<Value>> {
        let state = self.state.lock();
        let windows: Vec<&Window> =
            if history { state.history.iter().chain([&state.current]).collect() } else { vec![&state.current] };
        let mut out = Vec::new();
        for w in windows {
            let mut rows: Vec<&Row> = w
                .rows
                .values()
                .filter(|r| match who {
                    Visibility::All => true,
                    Visibility::User(u) => r.users.iter().any(|x| x == u),
                })
                .collect();
            rows.sort_by(|a, b| b.sum_latency.cmp(&a.sum_latency).then_with(|| a.digest.cmp(&b.digest)));
            out.extend(rows.into_iter().map(|r| row_values(w, r)));
        }
        out
    }
}

/// The columns of both tables (TiDB's names; AVG/MAX_EXECUTE_LATENCY and the lock and
/// examined-row columns are Strata's, latencies in nanoseconds).
pub const COLUMNS: [&str; 36] = [
    "SUMMARY_BEGIN_TIME",
    "SUMMARY_END_TIME",
    "STMT_TYPE",
    "SCHEMA_NAME",
    "DIGEST",
    "DIGEST_TEXT",
    "TABLE_NAMES",
    "INDEX_NAMES",
    "SAMPLE_USER",
    "EXEC_COUNT",
    "SUM_ERRORS",
    "SUM_WARNINGS",
    "SUM_LATENCY",
    "MAX_LATENCY",
    "MIN_LATENCY",
    "AVG_LATENCY",
    "AVG_PARSE_LATENCY",
    "MAX_PARSE_LATENCY",
    "AVG_COMPILE_LATENCY",
    "MAX_COMPILE_LATENCY",
    "AVG_EXECUTE_LATENCY",
    "MAX_EXECUTE_LATENCY",
    "AVG_LOCK_WAIT_TIME",
    "MAX_LOCK_WAIT_TIME",
    "AVG_AFFECTED_ROWS",
    "AVG_RESULT_ROWS",
    "MAX_RESULT_ROWS",
    "MIN_RESULT_ROWS",
    "AVG_ROWS_EXAMINED",
    "FIRST_SEEN",
    "LAST_SEEN",
    "PLAN_IN_CACHE",
    "PLAN_CACHE_HITS",
    "QUERY_SAMPLE_TEXT",
    "PREV_SAMPLE_TEXT",
    "PLAN_DIGEST",
];

fn datetime(us: i64) -> Value {
    let epoch = DateTime::from_ymd(1970, 1, 1).to_micros();
    Value::DateTime(DateTime::from_micros(epoch + us))
}

fn row_values(w: &Window, r: &Row) -> Vec<Value> {
    let n = r.exec_count.max(1);
    let avg = |sum: u64| Value::UInt(sum / n);
    vec![
        datetime(w.begin_us),
        datetime(w.end_us),
        Value::str(r.kind.to_string()),
        r.schema.clone().map_or(Value::Null, Value::str),
        Value::str(r.digest.to_string()),
        Value::str(r.digest_text.clone()),
        Value::str(r.table_names.clone()),
        Value::Null,
        Value::str(r.sample_user.clone()),
        Value::UInt(r.exec_count),
        Value::UInt(r.sum_errors),
        Value::UInt(r.sum_warnings),
        Value::UInt(r.sum_latency),
        Value::UInt(r.max_latency),
        Value::UInt(r.min_latency),
        avg(r.sum_latency),
        avg(r.sum_parse),
        Value::UInt(r.max_parse),
        avg(r.sum_compile),
        Value::UInt(r.max_compile),
        avg(r.sum_latency.saturating_sub(r.sum_parse).saturating_sub(r.sum_compile)),
        Value::UInt(r.max_execute),
        avg(r.sum_lock),
        Value::UInt(r.max_lock),
        Value::Double(r.sum_affected as f64 / n as f64),
        Value::Double(r.sum_result_rows as f64 / n as f64),
        Value::UInt(r.max_result_rows),
        Value::UInt(r.min_result_rows),
        Value::Double(r.sum_examined as f64 / n as f64),
        datetime(r.first_seen_us),
        datetime(r.last_seen_us),
        Value::Int(i64::from(r.plan_in_cache)),
        Value::UInt(r.plan_cache_hits),
        Value::str(r.sample_text.clone()),
        Value::str(""),
        Value::str(""),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals_parameters_case_and_spacing_share_a_digest() {
        let a = digest("SELECT c FROM t WHERE id = 7");
        let b = digest("select  c\nfrom t where id=42 -- comment");
        let c = digest("SELECT c FROM t WHERE id = ?");
        assert_eq!(a, b);
        assert_eq!(a, c);
        assert_eq!(&*a.text, "select c from t where id = ?");
        assert_eq!(&*a.kind, "Select");
        assert_eq!(a.hex.len(), 64);
        assert_ne!(a.hex, digest("SELECT c FROM t WHERE k = 7").hex);
        assert_eq!(&*digest("SELECT 'x', \"y\", x'0a', 1.5e3").text, "select ? , ? , ? , ?");
    }

    #[test]
    fn lists_fold_whatever_their_length() {
        let one = digest("SELECT * FROM t WHERE id IN (1)");
        let three = digest("select * from t where id in (1, 2, 3)");
        assert_eq!(one.hex, three.hex);
        assert_eq!(&*one.text, "select * from t where id in ( ... )");
        let rows = digest("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')");
        assert_eq!(&*rows.text, "insert into t values ( ... )");
        assert_eq!(rows.hex, digest("insert into t values (?, ?)").hex);
        assert_eq!(&*rows.kind, "Insert");
        // A call with one argument is not a list.
        assert_eq!(&*digest("SELECT abs(-3)").text, "select abs ( - ? )");
    }

    #[test]
    fn statement_types() {
        let kind = |s: &str| digest(s).kind.to_string();
        assert_eq!(kind("WITH x AS (SELECT 1) SELECT * FROM x"), "Select");
        assert_eq!(kind("(SELECT 1) UNION (SELECT 2)"), "Select");
        assert_eq!(kind("CREATE UNIQUE INDEX i ON t (a)"), "CreateIndex");
        assert_eq!(kind("create table t (a int)"), "CreateTable");
        assert_eq!(kind("DROP SCHEMA d"), "DropDatabase");
        assert_eq!(kind("TRUNCATE t"), "TruncateTable");
        assert_eq!(kind("START TRANSACTION"), "Begin");
        assert_eq!(kind("commit"), "Commit");
        assert_eq!(kind("show tables"), "Show");
        assert_eq!(kind(""), "Other");
    }

    #[test]
    fn huge_and_broken_texts_digest_their_beginning() {
        let mut big = String::from("INSERT INTO t VALUES ");
        for i in 0..50_000 {
            big.push_str(&format!("({i}, 'row {i}'),"));
        }
        big.push_str("(0, 'end')");
        let d = digest(&big);
        assert_eq!(&*d.text, "insert into t values ( ... ) ...");
        // Wherever the scan stops inside a row, bulk INSERTs of one shape share a digest.
        for width in [1, 7, 100, 3000] {
            let mut other = String::from("insert into t values ");
            for i in 0..1000 {
                other.push_str(&format!("({i}, '{}'),", "x".repeat(width)));
            }
            other.push_str("(1, 'end')");
            assert_eq!(digest(&other).hex, d.hex, "rows of {width} bytes");
        }
        // A long text that is not rows is scanned further.
        let long_select = format!("SELECT {} FROM t WHERE a = 1", "c + ".repeat(600) + "c");
        let text = digest(&long_select).text;
        assert_eq!(text.matches('+').count(), 600, "{text}");
        assert!(text.ends_with("from t where a = ?"), "{text}");
        assert_eq!(&*digest("SELECT 'unterminated").text, "select ...");
    }

    fn exec<'a>(
        d: &'a Digest,
        user: &'a str,
        latency_us: u64,
        now_us: i64,
        tables: &'a dyn Fn() -> String,
    ) -> Execution<'a> {
        Execution {
            schema: Some("db"),
            user,
            text: "SELECT c FROM t WHERE id = 1",
            digest: d,
            tables,
            latency: Duration::from_micros(latency_us),
            parse: Duration::from_micros(10),
            compile: Duration::from_micros(20),
            lock: Duration::ZERO,
            plan_from_cache: latency_us < 100,
            failed: false,
            warnings: 0,
            affected_rows: 0,
            result_rows: 1,
            examined_rows: 1,
            now_us,
        }
    }

    fn col(row: &[Value], name: &str) -> Value {
        row[COLUMNS.iter().position(|c| *c == name).expect("column")].clone()
    }

    #[test]
    fn executions_aggregate_per_digest_and_windows_roll_into_history() {
        let s = StmtSummary::default();
        let d = digest("SELECT c FROM t WHERE id = 1");
        let tables = || "db.t".to_string();
        let t0 = 1_800_000_000 * 3; // on a window boundary
        s.record(&exec(&d, "app", 50, t0 + 1, &tables));
        s.record(&exec(&d, "app", 150, t0 + 2, &tables));
        s.record(&exec(&d, "other", 100, t0 + 3, &tables));
        let rows = s.rows(false, Visibility::All);
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(col(r, "EXEC_COUNT"), Value::UInt(3));
        assert_eq!(col(r, "SUM_LATENCY"), Value::UInt(300_000));
        assert_eq!(col(r, "MAX_LATENCY"), Value::UInt(150_000));
        assert_eq!(col(r, "MIN_LATENCY"), Value::UInt(50_000));
        assert_eq!(col(r, "AVG_LATENCY"), Value::UInt(100_000));
        assert_eq!(col(r, "AVG_PARSE_LATENCY"), Value::UInt(10_000));
        assert_eq!(col(r, "AVG_EXECUTE_LATENCY"), Value::UInt(70_000));
        assert_eq!(col(r, "PLAN_CACHE_HITS"), Value::UInt(1));
        assert_eq!(col(r, "TABLE_NAMES"), Value::str("db.t"));
        assert_eq!(col(r, "SAMPLE_USER"), Value::str("app"));
        // A user without PROCESS sees the rows it executed.
        assert_eq!(s.rows(false, Visibility::User("other")).len(), 1);
        assert_eq!(s.rows(false, Visibility::User("nobody")).len(), 0);
        // The next window: the old one is history.
        s.record(&exec(&d, "app", 70, t0 + 1_800_000_000 + 5, &tables));
        let now = s.rows(false, Visibility::All);
        assert_eq!(col(&now[0], "EXEC_COUNT"), Value::UInt(1));
        let history = s.rows(true, Visibility::All);
        assert_eq!(history.len(), 2);
        assert_eq!(col(&history[0], "EXEC_COUNT"), Value::UInt(3));
        // History is bounded.
        s.set("tidb_stmt_summary_history_size", &Value::Int(0));
        s.record(&exec(&d, "app", 70, t0 + 2 * 1_800_000_000 + 5, &tables));
        assert_eq!(s.rows(true, Visibility::All).len(), 1);
        // Off: nothing kept, nothing recorded.
        s.set("tidb_enable_stmt_summary", &Value::Int(0));
        s.record(&exec(&d, "app", 70, t0 + 2 * 1_800_000_000 + 6, &tables));
        assert!(s.rows(true, Visibility::All).is_empty());
    }

    #[test]
    fn rows_per_window_are_bounded_least_recently_used_first() {
        let s = StmtSummary::default();
        s.set("tidb_stmt_summary_max_stmt_count", &Value::Int(2));
        s.set("tidb_stmt_summary_max_sql_length", &Value::Int(10));
        let tables = String::new;
        let (a, b, c) = (digest("SELECT 1 FROM a"), digest("SELECT 1 FROM b"), digest("SELECT 1 FROM c"));
        s.record(&exec(&a, "u", 1, 10, &tables));
        s.record(&exec(&b, "u", 1, 11, &tables));
        s.record(&exec(&a, "u", 1, 12, &tables));
        s.record(&exec(&c, "u", 1, 13, &tables));
        let texts: Vec<Value> = s.rows(false, Visibility::All).iter().map(|r| col(r, "DIGEST")).collect();
        assert_eq!(texts.len(), 2);
        assert!(texts.contains(&Value::str(a.hex.to_string())) && texts.contains(&Value::str(c.hex.to_string())));
        let sample = col(&s.rows(false, Visibility::All)[0], "QUERY_SAMPLE_TEXT");
        assert_eq!(sample, Value::str("SELECT c F"));
    }
}
