//! Connections to the server under test and one way to run a statement in either protocol.
//!
//! A [`Session`] runs every statement either as a server-side prepared statement (the binary
//! protocol, statements cached per connection) or, with `--text`, as a query whose parameters
//! are rendered into the SQL text (the text protocol), so the same transaction code measures
//! both paths.

use mysql_async::prelude::{FromRow, Queryable};
use mysql_async::{Conn, OptsBuilder, Params, Value};

/// Where the server is and who to log in as.
#[derive(Clone, Debug, clap::Args)]
pub struct Target {
    /// Server host.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Server port (Strata's default 4000, MySQL/MariaDB 3306).
    #[arg(long, short = 'P', default_value_t = 4000)]
    pub port: u16,
    /// User name.
    #[arg(long, short = 'u', default_value = "root")]
    pub user: String,
    /// Password.
    #[arg(long, short = 'p', default_value = "")]
    pub password: String,
    /// Database holding the benchmark's tables (created by `prepare`).
    #[arg(long, short = 'D')]
    pub db: Option<String>,
}

impl Target {
    /// The database name, or `default` when none was given.
    pub fn db_or(&self, default: &str) -> String {
        self.db.clone().unwrap_or_else(|| default.to_string())
    }

    /// Connection options for `db` (none: no default database).
    pub fn opts(&self, db: Option<&str>) -> OptsBuilder {
        OptsBuilder::default()
            .ip_or_hostname(self.host.clone())
            .tcp_port(self.port)
            .user(Some(self.user.clone()))
            .pass(if self.password.is_empty() { None } else { Some(self.password.clone()) })
            .db_name(db.map(str::to_string))
            .prefer_socket(false)
            .stmt_cache_size(256)
    }

    /// Opens one connection to `db`.
    pub async fn connect(&self, db: Option<&str>) -> Result<Conn, mysql_async::Error> {
        Conn::new(self.opts(db)).await
    }

    /// `host:port`, for messages.
    pub fn addr(&self) -> String {
        format!("{}:{}", self.host, self.port)
    }
}

/// Which protocol statements go through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Server-side prepared statements (COM_STMT_PREPARE / COM_STMT_EXECUTE).
    Binary,
    /// Plain queries with parameters rendered as literals (COM_QUERY).
    Text,
}

/// A connection plus the protocol its statements use.
pub struct Session {
    /// The connection.
    pub conn: Conn,
    /// The protocol.
    pub protocol: Protocol,
}

/// Renders `params` into the `?` placeholders of `sql` (which must not contain `?` inside
/// string literals; the benchmark's statements do not).
pub fn interpolate(sql: &str, params: &[Value]) -> String {
    let mut out = String::with_capacity(sql.len() + params.len() * 8);
    let mut next = params.iter();
    for c in sql.chars() {
        if c == '?' {
            match next.next() {
                Some(v) => out.push_str(&v.as_sql(false)),
                None => out.push('?'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

impl Session {
    /// All rows of a query.
    pub async fn rows<T: FromRow + Send + 'static>(
        &mut self,
        sql: &str,
        params: Vec<Value>,
    ) -> Result<Vec<T>, mysql_async::Error> {
        match self.protocol {
            Protocol::Binary => self.conn.exec(sql, Params::Positional(params)).await,
            Protocol::Text => self.conn.query(interpolate(sql, &params)).await,
        }
    }

    /// The first row of a query, if any.
    pub async fn first<T: FromRow + Send + 'static>(
        &mut self,
        sql: &str,
        params: Vec<Value>,
    ) -> Result<Option<T>, mysql_async::Error> {
        match self.protocol {
            Protocol::Binary => self.conn.exec_first(sql, Params::Positional(params)).await,
            Protocol::Text => self.conn.query_first(interpolate(sql, &params)).await,
        }
    }

    /// Runs a statement; returns the affected row count.
    pub async fn exec(&mut self, sql: &str, params: Vec<Value>) -> Result<u64, mysql_async::Error> {
        match self.protocol {
            Protocol::Binary => self.conn.exec_drop(sql, Params::Positional(params)).await?,
            Protocol::Text => self.conn.query_drop(interpolate(sql, &params)).await?,
        }
        Ok(self.conn.affected_rows())
    }

    /// Runs a statement without parameters in the text protocol (BEGIN, COMMIT, ROLLBACK).
    pub async fn simple(&mut self, sql: &str) -> Result<(), mysql_async::Error> {
        self.conn.query_drop(sql).await
    }
}

/// The MySQL error number of a server error.
pub fn server_code(e: &mysql_async::Error) -> Option<u16> {
    match e {
        mysql_async::Error::Server(s) => Some(s.code),
        _ => None,
    }
}

/// Whether an error means "try the transaction again": lock wait timeout (1205), deadlock
/// (1213), TiDB/Strata write conflict (9007), schema changed during the transaction (8028),
/// and TiDB's "can not retry select for update statement" (8002).
pub fn is_retryable(e: &mysql_async::Error) -> bool {
    matches!(server_code(e), Some(1205 | 1213 | 9007 | 8028 | 8002))
}

/// Whether the connection itself is gone (as opposed to a statement failing).
pub fn is_connection_lost(e: &mysql_async::Error) -> bool {
    matches!(e, mysql_async::Error::Io(_) | mysql_async::Error::Driver(_))
}

/// A short description of an error for reports: `1213 (40001): Deadlock found ...`.
pub fn describe(e: &mysql_async::Error) -> String {
    match e {
        mysql_async::Error::Server(s) => format!("{} ({}): {}", s.code, s.state, s.message),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_are_rendered_as_literals() {
        let sql = interpolate(
            "SELECT a FROM t WHERE b = ? AND c = ? AND d = ?",
            &[Value::Int(7), Value::Bytes(b"it's".to_vec()), Value::NULL],
        );
        assert_eq!(sql, "SELECT a FROM t WHERE b = 7 AND c = 'it\\'s' AND d = NULL");
    }
}
