//! Statement results as the protocol layer needs them: result sets with column metadata, or
//! OK packets with affected rows, last insert id and warnings.

use async_trait::async_trait;
use strata_common::{Code, Result, Value};

use crate::context::Charge;
use crate::expr::Row;
use crate::plan::OutputColumn;
use crate::types::ColumnType;

/// Column flags of the MySQL protocol.
pub mod flags {
    /// NOT NULL.
    pub const NOT_NULL: u16 = 1;
    /// Part of the primary key.
    pub const PRI_KEY: u16 = 2;
    /// BINARY collation.
    pub const BINARY: u16 = 128;
    /// UNSIGNED.
    pub const UNSIGNED: u16 = 32;
    /// Numeric column.
    pub const NUM: u16 = 32768;
}

/// A result set's column definitions, with a place for the client protocol's encoding of
/// them: the same for every execution of a cached plan, so the connection encodes them once
/// (`strata_server`'s result writer fills `wire`).
#[derive(Debug, Default)]
pub struct ResultColumns {
    /// The definitions.
    pub columns: Vec<Column>,
    /// Their encoding, as the packets that carry them (count, then one per column).
    pub wire: std::sync::OnceLock<Vec<Vec<u8>>>,
}

impl ResultColumns {
    /// Definitions not yet encoded.
    pub fn new(columns: Vec<Column>) -> ResultColumns {
        ResultColumns { columns, wire: Default::default() }
    }
}

/// A result column's metadata.
#[derive(Clone, Debug)]
pub struct Column {
    /// Database.
    pub db: String,
    /// Table alias.
    pub table: String,
    /// Table name.
    pub org_table: String,
    /// Column alias.
    pub name: String,
    /// Column name.
    pub org_name: String,
    /// Protocol type code.
    pub ty: u8,
    /// Flags.
    pub flags: u16,
    /// Digits after the point.
    pub decimals: u8,
    /// Display length.
    pub length: u32,
    /// Character set id (33 utf8, 63 binary).
    pub charset: u16,
}

/// Protocol type codes.
pub mod types {
    /// DECIMAL
    pub const NEWDECIMAL: u8 = 246;
    /// BIGINT
    pub const LONGLONG: u8 = 8;
    /// DOUBLE
    pub const DOUBLE: u8 = 5;
    /// VARCHAR
    pub const VAR_STRING: u8 = 253;
    /// DATE
    pub const DATE: u8 = 10;
    /// DATETIME
    pub const DATETIME: u8 = 12;
    /// TIME
    pub const TIME: u8 = 11;
    /// NULL
    pub const NULL: u8 = 6;
}

impl Column {
    /// A plain VARCHAR column (SHOW statements, variables).
    pub fn text(name: &str) -> Column {
        Column {
            db: String::new(),
            table: String::new(),
            org_table: String::new(),
            name: name.to_string(),
            org_name: name.to_string(),
            ty: types::VAR_STRING,
            flags: 0,
            decimals: 0,
            length: 1024,
            charset: 33,
        }
    }

    /// A BIGINT column.
    pub fn int(name: &str) -> Column {
        Column { ty: types::LONGLONG, flags: flags::NUM, length: 21, charset: 63, ..Column::text(name) }
    }

    /// A DOUBLE column.
    pub fn double(name: &str) -> Column {
        Column { ty: types::DOUBLE, flags: flags::NUM, length: 22, decimals: 31, charset: 63, ..Column::text(name) }
    }

    /// Metadata for a planned output column: its type comes from the plan.
    pub fn from_output(c: &OutputColumn) -> Column {
        let mut col = Column {
            db: c.db.clone(),
            table: c.table.clone(),
            org_table: c.org_table.clone(),
            name: c.name.clone(),
            org_name: c.org_name.clone(),
            ..Column::text(&c.name)
        };
        match &c.ty {
            Some(t) => {
                col.ty = t.protocol_type();
                col.decimals = t.decimals();
                col.length = t.display_len();
                if let ColumnType::Int { unsigned: true, .. } = t {
                    col.flags |= flags::UNSIGNED;
                }
                if !t.is_string() || t.is_binary() {
                    col.charset = 63;
                    col.flags |= flags::BINARY;
                }
                if matches!(
                    t,
                    ColumnType::Int { .. } | ColumnType::Decimal { .. } | ColumnType::Float | ColumnType::Double
                ) {
                    col.flags |= flags::NUM;
                }
                if c.not_null {
                    col.flags |= flags::NOT_NULL;
                }
                if c.primary {
                    col.flags |= flags::PRI_KEY;
                }
            }
            // The type of a bare NULL.
            None => {
                col.ty = types::NULL;
                col.length = 0;
                col.charset = 63;
                col.flags |= flags::BINARY;
            }
        }
        col
    }
}

/// A statement's outcome.
#[derive(Clone, Debug)]
pub enum QueryResult {
    /// A result set.
    Rows {
        /// Columns.
        columns: Vec<Column>,
        /// Rows.
        rows: Vec<Vec<Value>>,
    },
    /// A result set whose columns and rows went to the statement's [`ResultSink`] as they
    /// were produced; only its end (EOF) is still to send.
    Streamed {
        /// Rows sent.
        rows: u64,
    },
    /// Success without rows.
    Ok {
        /// Changed rows (or matched rows, see `matched`).
        affected: u64,
        /// Rows matched by an UPDATE (reported instead of `affected` to clients that set
        /// CLIENT_FOUND_ROWS).
        matched: u64,
        /// LAST_INSERT_ID of this statement.
        last_insert_id: u64,
        /// Warnings produced.
        warnings: Vec<(Code, String)>,
        /// Info text (`Rows matched: 1  Changed: 1  Warnings: 0`).
        info: String,
    },
}

impl QueryResult {
    /// OK with `affected` rows.
    pub fn ok(affected: u64) -> QueryResult {
        QueryResult::Ok { affected, matched: affected, last_insert_id: 0, warnings: Vec::new(), info: String::new() }
    }

    /// OK with one warning.
    pub fn ok_with_warning(affected: u64, code: Code, msg: String) -> QueryResult {
        QueryResult::Ok {
            affected,
            matched: affected,
            last_insert_id: 0,
            warnings: vec![(code, msg)],
            info: String::new(),
        }
    }

    /// A result set of text columns.
    pub fn text_rows(names: &[&str], rows: Vec<Vec<Value>>) -> QueryResult {
        QueryResult::Rows { columns: names.iter().map(|n| Column::text(n)).collect(), rows }
    }
}

/// Where a query's result set goes while it is computed: the connection writes each batch
/// of rows to the client before the next is produced, so a result never has to fit in the
/// server's memory (`mysqldump` of a large table). Without one the rows are collected into
/// [`QueryResult::Rows`].
#[async_trait]
pub trait ResultSink: Send {
    /// The result's columns: once, before any row.
    async fn columns(&mut self, columns: &ResultColumns) -> Result<()>;
    /// The next rows, in order.
    async fn rows(&mut self, columns: &[Column], rows: &[Row]) -> Result<()>;
}

/// What a statement can reach of its client's connection besides the statement text: the
/// files the client sends (LOAD DATA LOCAL INFILE) and, when it takes them, where result
/// rows stream to.
pub trait ClientPort: Send {
    /// The client's files.
    fn files(&mut self) -> &mut dyn crate::load::FileSource;
    /// Where a result set streams to; None: results are collected.
    fn results(&mut self) -> Option<&mut dyn ResultSink>;
}

/// A top-level query's rows on their way out: collected (charged to the statement's memory
/// quota) or streamed to a [`ResultSink`]; capped at `sql_select_limit`.
pub struct QueryOutput<'s> {
    columns: std::sync::Arc<ResultColumns>,
    sink: Option<&'s mut dyn ResultSink>,
    /// Rows still allowed (sql_select_limit); None: no cap.
    left: Option<usize>,
    started: bool,
    sent: u64,
    rows: Vec<Row>,
    charge: Charge,
}

impl<'s> QueryOutput<'s> {
    /// An output of these columns, streaming to `sink` when there is one, keeping at most
    /// `cap` rows.
    pub fn new(
        columns: std::sync::Arc<ResultColumns>,
        sink: Option<&'s mut dyn ResultSink>,
        cap: Option<usize>,
    ) -> QueryOutput<'s> {
        QueryOutput { columns, sink, left: cap, started: false, sent: 0, rows: Vec::new(), charge: Charge::new() }
    }

    /// Forgets the rows given so far, so that another engine can produce the result; false
    /// when some have gone to the client already.
    pub fn take_back(&mut self) -> bool {
        if self.started {
            return false;
        }
        if let Some(left) = &mut self.left {
            *left += self.sent as usize;
        }
        self.sent = 0;
        self.rows.clear();
        self.charge = Charge::new();
        true
    }

    /// Whether the cap is reached: the producer may stop.
    pub fn full(&self) -> bool {
        self.left == Some(0)
    }

    /// Adds rows to the result.
    pub async fn push(&mut self, mut rows: Vec<Row>) -> Result<()> {
        if let Some(left) = &mut self.left {
            rows.truncate(*left);
            *left -= rows.len();
        }
        if rows.is_empty() {
            return Ok(());
        }
        self.sent += rows.len() as u64;
        match &mut self.sink {
            Some(sink) => {
                if !self.started {
                    self.started = true;
                    sink.columns(&self.columns).await?;
                }
                sink.rows(&self.columns.columns, &rows).await
            }
            None => {
                for r in &rows {
                    self.charge.add_row(r)?;
                }
                self.rows.append(&mut rows);
                Ok(())
            }
        }
    }

    /// The rows collected (none went to a sink).
    pub fn into_rows(self) -> Vec<Row> {
        self.rows
    }

    /// The statement's result: the collected rows, or the streamed result's count (its
    /// columns sent now if no row was).
    pub async fn finish(mut self) -> Result<QueryResult> {
        match self.sink.take() {
            Some(sink) => {
                if !self.started {
                    sink.columns(&self.columns).await?;
                }
                Ok(QueryResult::Streamed { rows: self.sent })
            }
            None => {
                Ok(QueryResult::Rows { columns: self.columns.columns.clone(), rows: std::mem::take(&mut self.rows) })
            }
        }
    }
}
