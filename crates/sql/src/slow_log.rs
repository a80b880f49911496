//! The slow query log, as MySQL writes it: with `slow_query_log=ON`, every statement that
//! took at least `long_query_time` seconds (a session or global value; 10 by default, 0 logs
//! everything) is appended to `slow_query_log_file` in MySQL's format, so
//! `mysqldumpslow` and `pt-query-digest` read it:
//!
//! ```text
//! # Time: 2026-11-25T12:34:56.123456Z
//! # User@Host: app[app] @  [127.0.0.1]  Id:     8
//! # Query_time: 2.000327  Lock_time: 0.000000 Rows_sent: 1  Rows_examined: 0
//! # Parse_time: 0.000012  Compile_time: 0.000100  Plan_from_cache: false
//! use shop;
//! SET timestamp=1764074096;
//! SELECT SLEEP(2);
//! ```
//!
//! The `Parse_time` line is TiDB's addition (where the time went inside the server);
//! `Lock_time` is the statement's time in pessimistic lock requests. `Slow_queries` (SHOW
//! STATUS) counts slow statements whether or not the log is on, as in MySQL.
//!
//! The file is opened once and kept open (appending); changing `slow_query_log_file` or
//! `FLUSH SLOW LOGS` reopens it. A write that fails is reported in the server's log, never
//! to the client whose statement was slow.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use strata_common::time::DateTime;

/// One slow statement.
#[derive(Debug)]
pub struct SlowEntry<'a> {
    /// When it ended, microseconds since the Unix epoch.
    pub now_us: i64,
    /// The account's user name.
    pub user: &'a str,
    /// The client's address.
    pub host: &'a str,
    /// The connection id.
    pub conn_id: u32,
    /// Its latency.
    pub query_time: Duration,
    /// Its time in pessimistic lock requests.
    pub lock_time: Duration,
    /// Parsing.
    pub parse_time: Duration,
    /// Planning.
    pub compile_time: Duration,
    /// Whether the plan came from the plan cache.
    pub plan_from_cache: bool,
    /// Rows returned.
    pub rows_sent: u64,
    /// Rows read from the store.
    pub rows_examined: u64,
    /// The current database.
    pub db: Option<&'a str>,
    /// The statement.
    pub sql: &'a str,
}

/// The slow query log file and the `Slow_queries` counter.
#[derive(Debug, Default)]
pub struct SlowLog {
    /// The open file and the path it was opened as.
    file: Mutex<Option<(String, File)>>,
    /// Statements slower than `long_query_time` (SHOW GLOBAL STATUS `Slow_queries`).
    pub slow_queries: AtomicU64,
}

impl SlowLog {
    /// Appends `e` to the file at `path` (opened, with MySQL's header when new, if it is not
    /// the open one).
    pub fn write(&self, path: &str, e: &SlowEntry<'_>) -> std::io::Result<()> {
        let text = format_entry(e);
        let mut file = self.file.lock();
        if file.as_ref().is_none_or(|(p, _)| p != path) {
            *file = None;
            let mut f = OpenOptions::new().create(true).append(true).open(path)?;
            if f.metadata()?.len() == 0 {
                f.write_all(
                    format!(
                        "strata, Version: {} (Strata). started with:\nTcp port: 0  Unix socket: \n\
                         Time                 Id Command    Argument\n",
                        crate::VERSION
                    )
                    .as_bytes(),
                )?;
            }
            *file = Some((path.to_string(), f));
        }
        match file.as_mut() {
            Some((_, f)) => f.write_all(text.as_bytes()),
            None => Ok(()),
        }
    }

    /// Closes the file, so the next entry opens it again (FLUSH SLOW LOGS, after a log
    /// rotation moved it).
    pub fn reopen(&self) {
        *self.file.lock() = None;
    }

    /// Counts a slow statement.
    pub fn count(&self) {
        self.slow_queries.fetch_add(1, Ordering::Relaxed);
    }
}

/// An ISO 8601 UTC time with microseconds, as MySQL's `# Time:` line writes it.
fn iso_time(now_us: i64) -> String {
    let epoch = DateTime::from_ymd(1970, 1, 1).to_micros();
    let d = DateTime::from_micros(epoch + now_us);
    format!("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", d.year, d.month, d.day, d.hour, d.minute, d.second, d.micro)
}

fn format_entry(e: &SlowEntry<'_>) -> String {
    let mut out = String::with_capacity(e.sql.len() + 300);
    out.push_str(&format!("# Time: {}\n", iso_time(e.now_us)));
    out.push_str(&format!("# User@Host: {0}[{0}] @  [{1}]  Id: {2:>5}\n", e.user, e.host, e.conn_id));
    out.push_str(&format!(
        "# Query_time: {:.6}  Lock_time: {:.6} Rows_sent: {}  Rows_examined: {}\n",
        e.query_time.as_secs_f64(),
        e.lock_time.as_secs_f64(),
        e.rows_sent,
        e.rows_examined
    ));
    out.push_str(&format!(
        "# Parse_time: {:.6}  Compile_time: {:.6}  Plan_from_cache: {}\n",
        e.parse_time.as_secs_f64(),
        e.compile_time.as_secs_f64(),
        e.plan_from_cache
    ));
    if let Some(db) = e.db {
        out.push_str(&format!("use {db};\n"));
    }
    out.push_str(&format!("SET timestamp={};\n", e.now_us.div_euclid(1_000_000)));
    let sql = e.sql.trim_end();
    out.push_str(sql);
    if !sql.ends_with(';') {
        out.push(';');
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sql: &str) -> SlowEntry<'_> {
        SlowEntry {
            now_us: 1_764_074_096_123_456,
            user: "app",
            host: "127.0.0.1",
            conn_id: 8,
            query_time: Duration::from_micros(2_000_327),
            lock_time: Duration::from_micros(15),
            parse_time: Duration::from_micros(12),
            compile_time: Duration::from_micros(100),
            plan_from_cache: false,
            rows_sent: 1,
            rows_examined: 10,
            db: Some("shop"),
            sql,
        }
    }

    #[test]
    fn entries_are_in_mysql_format() {
        let text = format_entry(&entry("SELECT SLEEP(2)"));
        assert_eq!(
            text,
            "# Time: 2025-11-25T12:34:56.123456Z\n\
             # User@Host: app[app] @  [127.0.0.1]  Id:     8\n\
             # Query_time: 2.000327  Lock_time: 0.000015 Rows_sent: 1  Rows_examined: 10\n\
             # Parse_time: 0.000012  Compile_time: 0.000100  Plan_from_cache: false\n\
             use shop;\n\
             SET timestamp=1764074096;\n\
             SELECT SLEEP(2);\n"
        );
        assert!(format_entry(&entry("select 1;  ")).ends_with("\nselect 1;\n"));
    }

    #[test]
    fn the_file_gets_a_header_once_and_reopens_on_a_new_path() {
        let dir = tempfile::tempdir().expect("tempdir");
        let a = dir.path().join("a.log").to_string_lossy().into_owned();
        let b = dir.path().join("b.log").to_string_lossy().into_owned();
        let log = SlowLog::default();
        log.write(&a, &entry("select 1")).expect("write");
        log.write(&a, &entry("select 2")).expect("write");
        log.write(&b, &entry("select 3")).expect("write");
        let text = std::fs::read_to_string(&a).expect("read");
        assert_eq!(text.matches("started with:").count(), 1);
        assert!(text.contains("select 1;\n") && text.contains("select 2;\n") && !text.contains("select 3"));
        assert!(std::fs::read_to_string(&b).expect("read").contains("select 3;\n"));
        // After a rotation moved the file away, FLUSH SLOW LOGS starts a new one.
        std::fs::rename(&a, dir.path().join("a.old")).expect("rename");
        log.reopen();
        log.write(&a, &entry("select 4")).expect("write");
        assert!(std::fs::read_to_string(&a).expect("read").contains("select 4;\n"));
    }
}
