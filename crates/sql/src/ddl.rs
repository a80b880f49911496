//! DDL: databases, tables, indexes and columns.
//!
//! Schema changes are online. Every change bumps the catalog version; a transaction that
//! wrote a table whose schema changed after it began fails at commit with 8028 (autocommit
//! statements are re-run), so no write planned against an old definition lands after the
//! change. ADD INDEX goes write-only (maintained by writers, unused by readers), waits out
//! commits in flight, backfills the existing rows in optimistic batches (a batch a writer
//! changed under it runs again), and then turns public; backfills of different indexes run
//! concurrently.
//! Data a change orphans (a dropped table or index, truncated rows) is scheduled for deletion
//! in the same transaction as the change and deleted in the background; an ADD INDEX a crash
//! interrupted is rolled back at the next start (`recover_ddl`).

use std::collections::HashMap;
use std::sync::Arc;

use sqlparser::ast;
use strata_codec::keys::{prefix_end, table_prefix};
use strata_common::{Code, Error, Result, Timestamp, Value};
use strata_kv::LockMode;
use strata_txn::{Isolation, Transaction, TxnOptions};

use crate::binder::split_name;
use crate::catalog::{CheckInfo, ColumnInfo, DefaultValue, IndexInfo, IndexState, TableInfo};
use crate::result::QueryResult;
use crate::session::Engine;
use crate::table::{decode_columns, decode_row, handle_from_row_key, index_entry, is_unique_entry};
use crate::types::ColumnType;

/// Rows per ADD INDEX backfill transaction.
const BACKFILL_BATCH: usize = 2_000;

/// How a run of a backfill ended (`Engine::backfill_run`).
enum Run {
    /// Every row is backfilled.
    Done,
    /// Rows up to the key before this one are.
    Committed(Vec<u8>),
    /// A writer used one of the run's keys since its snapshot: nothing was written.
    KeyInUse,
}

/// The row `(k, v)`'s entry in `index`, with the indexed columns it was made of (a
/// backfill decodes only those).
fn batch_entry(
    table: &TableInfo,
    index: &IndexInfo,
    k: &[u8],
    v: &[u8],
) -> Result<(crate::table::Row, Vec<u8>, Vec<u8>)> {
    let row = decode_columns(table, v, &index.columns)?;
    let (ik, iv) = index_entry(table, index, &row, handle_from_row_key(table, k));
    Ok((row, ik, iv))
}

/// What one collected entry costs beyond its bytes (two vectors, and the sort's tag),
/// counted against `BACKFILL_RUN_BYTES`.
const ENTRY_OVERHEAD: usize = 2 * std::mem::size_of::<Vec<u8>>() + strata_common::keysort::BYTES_PER_ITEM;

/// Memory the entries one run of a non-unique index's backfill collects
/// (read at one snapshot, sorted, committed in one store command). The entries arrive in
/// row order, which is random order in the index: written batch by batch, each landed at
/// a random place in RocksDB's memtable (its skiplist search was a fifth of a backfill's
/// CPU) and went through flushes and compactions; sorted, a run is one table file
/// (`storage::Engine::ingest`).
const BACKFILL_RUN_BYTES: usize = 32 << 20;

/// Write conflicts in a row one backfill batch may meet (each runs it again) before the
/// ADD INDEX gives up.
const MAX_BACKFILL_CONFLICTS: u32 = 1_000;

fn char_len(l: &Option<ast::CharacterLength>, default: u32) -> u32 {
    match l {
        Some(ast::CharacterLength::IntegerLength { length, .. }) => *length as u32,
        Some(ast::CharacterLength::Max) => 65535,
        None => default,
    }
}

/// Maps a parsed data type to a column type.
pub fn column_type(dt: &ast::DataType) -> Result<ColumnType> {
    use ast::DataType as D;
    let int = |bytes: u8, unsigned: bool| ColumnType::Int { bytes, unsigned };
    Ok(match dt {
        D::TinyInt(_) | D::Bool | D::Boolean => int(1, false),
        D::TinyIntUnsigned(_) => int(1, true),
        D::SmallInt(_) => int(2, false),
        D::SmallIntUnsigned(_) => int(2, true),
        D::MediumInt(_) => int(3, false),
        D::MediumIntUnsigned(_) => int(3, true),
        D::Int(_) | D::Integer(_) => int(4, false),
        D::IntUnsigned(_) | D::IntegerUnsigned(_) => int(4, true),
        D::BigInt(_) => int(8, false),
        D::BigIntUnsigned(_) => int(8, true),
        D::Decimal(info) | D::Numeric(info) | D::Dec(info) | D::DecimalUnsigned(info) | D::DecUnsigned(info) => {
            let (p, s) = match info {
                ast::ExactNumberInfo::None => (10, 0),
                ast::ExactNumberInfo::Precision(p) => (*p, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p, *s as u64),
            };
            if p > 65 {
                return Err(Error::user(
                    Code::TooBigPrecision,
                    format!("Too-big precision {p} specified. Maximum is 65."),
                ));
            }
            if s > 30 || s > p {
                return Err(Error::user(Code::TooBigPrecision, format!("Too big scale {s} specified. Maximum is 30.")));
            }
            ColumnType::Decimal { precision: p as u8, scale: s as u8 }
        }
        D::Float(_) | D::Real | D::Float4 | D::FloatUnsigned(_) => ColumnType::Float,
        D::RealUnsigned => ColumnType::Float,
        D::Double(_)
        | D::DoublePrecision
        | D::Float8
        | D::Float64
        | D::DoubleUnsigned(_)
        | D::DoublePrecisionUnsigned => ColumnType::Double,
        D::Char(l) | D::Character(l) => ColumnType::Char(char_len(l, 1)),
        D::Varchar(l) | D::CharacterVarying(l) | D::Nvarchar(l) => ColumnType::Varchar(char_len(l, 255)),
        D::TinyText => ColumnType::Text(255),
        D::Text => ColumnType::Text(65535),
        D::MediumText => ColumnType::Text(16_777_215),
        D::LongText => ColumnType::Text(u32::MAX),
        D::TinyBlob => ColumnType::Blob(255),
        D::Blob(_) => ColumnType::Blob(65535),
        D::MediumBlob => ColumnType::Blob(16_777_215),
        D::LongBlob => ColumnType::Blob(u32::MAX),
        D::Binary(n) => ColumnType::Blob(n.unwrap_or(1) as u32),
        D::Varbinary(n) => ColumnType::Blob(match n {
            Some(ast::BinaryLength::IntegerLength { length }) => *length as u32,
            _ => 65535,
        }),
        D::Date => ColumnType::Date,
        D::Datetime(p) => ColumnType::DateTime(p.unwrap_or(0).min(6) as u8),
        D::Timestamp(p, _) => ColumnType::Timestamp(p.unwrap_or(0).min(6) as u8),
        D::Time(p, _) => ColumnType::Time(p.unwrap_or(0).min(6) as u8),
        other => return Err(Error::unsupported(format!("column type {other}"))),
    })
}

fn default_of(e: &ast::Expr) -> Result<DefaultValue> {
    Ok(match e {
        ast::Expr::Value(v) => match &v.value {
            ast::Value::Null => DefaultValue::Null,
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => DefaultValue::Text(s.clone()),
            ast::Value::Number(n, _) => DefaultValue::Text(n.clone()),
            ast::Value::Boolean(b) => DefaultValue::Text((*b as i64).to_string()),
            other => return Err(Error::user(Code::InvalidDefault, format!("Invalid default value {other}"))),
        },
        ast::Expr::UnaryOp { op: ast::UnaryOperator::Minus, expr } => match default_of(expr)? {
            DefaultValue::Text(t) => DefaultValue::Text(format!("-{t}")),
            other => other,
        },
        ast::Expr::Function(f)
            if matches!(
                f.name.to_string().to_ascii_lowercase().as_str(),
                "current_timestamp" | "now" | "localtimestamp"
            ) =>
        {
            DefaultValue::CurrentTimestamp
        }
        ast::Expr::Identifier(i) if i.value.eq_ignore_ascii_case("current_timestamp") => DefaultValue::CurrentTimestamp,
        other => return Err(Error::user(Code::InvalidDefault, format!("Invalid default value '{other}'"))),
    })
}

fn index_columns(table_cols: &[ColumnInfo], cols: &[ast::IndexColumn], tname: &str) -> Result<Vec<usize>> {
    cols.iter()
        .map(|c| {
            let name = match &c.column.expr {
                ast::Expr::Identifier(i) => i.value.clone(),
                ast::Expr::Function(f) => f.name.to_string(), // prefix index `col(10)` parses as a call
                other => other.to_string(),
            };
            table_cols.iter().position(|x| x.name.eq_ignore_ascii_case(&name)).ok_or_else(|| {
                Error::user(
                    Code::KeyColumnDoesNotExist,
                    format!("Key column '{name}' doesn't exist in table '{tname}'"),
                )
            })
        })
        .collect()
}

/// The text a CHECK constraint (or other stored expression) is kept as: the expression
/// printed with backslashes in string literals doubled, so reading it back under MySQL's
/// escapes gives the same values (printing alone would turn `'a\\b'` into `'a\b'`).
pub fn check_text(e: &ast::Expr) -> String {
    use sqlparser::ast::VisitMut;
    use std::ops::ControlFlow;
    struct Escape;
    impl ast::VisitorMut for Escape {
        type Break = ();
        fn post_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
            if let ast::Expr::Value(v) = e {
                if let ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) = &mut v.value {
                    *s = s.replace('\\', "\\\\");
                }
            }
            ControlFlow::Continue(())
        }
    }
    let mut e = e.clone();
    let _ = e.visit(&mut Escape);
    e.to_string()
}

/// Fails with 3959 when a CHECK constraint of `table` uses column `col`, 3108 when a
/// generated column does (it cannot then be dropped or renamed, as in MySQL).
fn no_check_uses(table: &TableInfo, col: &str) -> Result<()> {
    use sqlparser::tokenizer::{Token, Tokenizer};
    let dialect = crate::dialect::StrataDialect::default();
    for c in &table.checks {
        let tokens = Tokenizer::new(&dialect, &c.expr).tokenize().unwrap_or_default();
        if tokens.iter().any(|t| matches!(t, Token::Word(w) if w.value.eq_ignore_ascii_case(col))) {
            return Err(Error::user(
                Code::CheckConstraintColumn,
                format!(
                    "Check constraint '{}' uses column '{col}', hence column cannot be dropped or renamed.",
                    c.name
                ),
            ));
        }
    }
    for g in table.columns.iter().filter(|g| !g.name.eq_ignore_ascii_case(col)) {
        let Some((text, _)) = &g.generated else { continue };
        let tokens = Tokenizer::new(&dialect, text).tokenize().unwrap_or_default();
        if tokens.iter().any(|t| matches!(t, Token::Word(w) if w.value.eq_ignore_ascii_case(col))) {
            return Err(Error::user(
                Code::DependentByGeneratedColumn,
                format!("Column '{col}' has a generated column dependency."),
            ));
        }
    }
    Ok(())
}

/// Adds a CHECK constraint (named `{table}_chk_{n}` unless named) to `checks`.
fn add_check(checks: &mut Vec<CheckInfo>, table: &str, c: &ast::CheckConstraint) -> Result<()> {
    let name = match &c.name {
        Some(n) => n.value.clone(),
        None => {
            let mut k = checks.len() + 1;
            while checks.iter().any(|x| x.name == format!("{table}_chk_{k}")) {
                k += 1;
            }
            format!("{table}_chk_{k}")
        }
    };
    if checks.iter().any(|x| x.name.eq_ignore_ascii_case(&name)) {
        return Err(Error::user(Code::CheckConstraintDupName, format!("Duplicate check constraint name '{name}'.")));
    }
    checks.push(CheckInfo { name, expr: check_text(&c.expr), enforced: c.enforced != Some(false) });
    Ok(())
}

fn build_column(
    def: &ast::ColumnDef,
    id: u32,
    pk_cols: &mut Vec<String>,
    uniques: &mut Vec<(String, Vec<String>)>,
) -> Result<ColumnInfo> {
    let mut ty = column_type(&def.data_type)?;
    use ast::DataType as D;
    let mut unsigned = matches!(
        def.data_type,
        D::DecimalUnsigned(_)
            | D::DecUnsigned(_)
            | D::FloatUnsigned(_)
            | D::DoubleUnsigned(_)
            | D::RealUnsigned
            | D::DoublePrecisionUnsigned
    );
    // ZEROFILL implies UNSIGNED (its zero padding of shown values is not done).
    let zerofill = def.options.iter().any(|o| {
        matches!(&o.option, ast::ColumnOption::DialectSpecific(t) if t.iter().any(|t| t.to_string().eq_ignore_ascii_case("ZEROFILL")))
    });
    if zerofill {
        match &mut ty {
            ColumnType::Int { unsigned: u, .. } => *u = true,
            ColumnType::Decimal { .. } | ColumnType::Float | ColumnType::Double => unsigned = true,
            _ => {}
        }
    }
    let mut col = ColumnInfo {
        id,
        name: def.name.value.clone(),
        ty,
        nullable: true,
        default: None,
        auto_increment: false,
        on_update_now: false,
        unsigned,
        generated: None,
    };
    let mut explicit_null = false;
    let opts: Vec<&ast::ColumnOption> = def.options.iter().map(|o| &o.option).collect();
    for o in opts {
        match o {
            ast::ColumnOption::Null => explicit_null = true,
            ast::ColumnOption::NotNull => col.nullable = false,
            ast::ColumnOption::Default(e) => col.default = Some(default_of(e)?),
            ast::ColumnOption::PrimaryKey(_) => {
                pk_cols.push(col.name.clone());
                col.nullable = false;
            }
            ast::ColumnOption::Unique(_) => uniques.push((col.name.clone(), vec![col.name.clone()])),
            ast::ColumnOption::DialectSpecific(tokens) => {
                if tokens.iter().any(|t| t.to_string().eq_ignore_ascii_case("AUTO_INCREMENT")) {
                    col.auto_increment = true;
                }
            }
            ast::ColumnOption::OnUpdate(_) => col.on_update_now = true,
            // Collected by the caller (`column_checks`).
            ast::ColumnOption::Check(_) => {}
            ast::ColumnOption::Generated { generation_expr: Some(e), generation_expr_mode, .. } => {
                let stored = matches!(generation_expr_mode, Some(ast::GeneratedExpressionMode::Stored));
                col.generated = Some((check_text(e), stored));
            }
            ast::ColumnOption::Comment(_) | ast::ColumnOption::CharacterSet(_) | ast::ColumnOption::Collation(_) => {}
            other => return Err(Error::unsupported(format!("column option {other}"))),
        }
    }
    // An AUTO_INCREMENT column is NOT NULL (a NULL inserted there takes the next value).
    if col.auto_increment {
        col.nullable = false;
    }
    if explicit_null && !col.nullable && !col.auto_increment {
        return Err(Error::user(
            Code::Parse,
            format!("conflicting NULL/NOT NULL declarations for column '{}'", col.name),
        ));
    }
    if let Some(DefaultValue::Text(t)) = &col.default {
        let v = col
            .coerce(Value::str(t.clone()))
            .map_err(|_| Error::user(Code::InvalidDefault, format!("Invalid default value for '{}'", col.name)))?;
        // Stored and shown in the column's own format, as MySQL does (DECIMAL(6,2) DEFAULT 0
        // reads back as '0.00').
        col.default = Some(DefaultValue::Text(v.to_display()));
    }
    if col.default == Some(DefaultValue::Null) && !col.nullable {
        return Err(Error::user(Code::InvalidDefault, format!("Invalid default value for '{}'", col.name)));
    }
    Ok(col)
}

fn name_of_index(name: &Option<ast::Ident>, cols: &[usize], columns: &[ColumnInfo], existing: &[IndexInfo]) -> String {
    if let Some(n) = name {
        return n.value.clone();
    }
    let base = cols.first().map(|c| columns[*c].name.clone()).unwrap_or_else(|| "idx".into());
    let mut name = base.clone();
    let mut k = 2;
    while existing.iter().any(|i| i.name.eq_ignore_ascii_case(&name)) {
        name = format!("{base}_{k}");
        k += 1;
    }
    name
}

/// DROP TABLE / VIEW of names that do not exist: 1051 naming them, unless IF EXISTS.
pub(crate) fn check_missing(missing: &[String], if_exists: bool) -> Result<()> {
    if !missing.is_empty() && !if_exists {
        return Err(Error::user(Code::BadTable, format!("Unknown table '{}'", missing.join(","))));
    }
    Ok(())
}

/// The outcome of a DROP TABLE / VIEW: a 1051 note for each name that did not exist.
pub(crate) fn dropped(missing: &[String]) -> QueryResult {
    if missing.is_empty() {
        QueryResult::ok(0)
    } else {
        QueryResult::ok_with_warning(0, Code::BadTable, format!("Unknown table '{}'", missing.join(",")))
    }
}

impl Engine {
    pub(crate) fn db_or_current(&self, db: Option<String>, current: &Option<String>) -> Result<String> {
        db.or_else(|| current.clone()).ok_or_else(|| Error::user(Code::NoDb, "No database selected"))
    }

    /// CREATE TABLE.
    pub async fn create_table(&self, ct: &ast::CreateTable, current_db: &Option<String>) -> Result<QueryResult> {
        let _g = self.catalog.ddl_lock().await;
        let (db, name) = split_name(&ct.name)?;
        let db = self.db_or_current(db, current_db)?;
        if !self.catalog.has_database(&db) {
            return Err(Error::user(Code::BadDb, format!("Unknown database '{db}'")));
        }
        if self.catalog.try_table(&db, &name).is_some() {
            if ct.if_not_exists {
                return Ok(QueryResult::ok_with_warning(
                    0,
                    Code::TableExists,
                    format!("Table '{name}' already exists"),
                ));
            }
            return Err(Error::user(Code::TableExists, format!("Table '{name}' already exists")));
        }
        if let Some(like) = &ct.like {
            let (ast::CreateTableLikeKind::Plain(l) | ast::CreateTableLikeKind::Parenthesized(l)) = like;
            let (sdb, sname) = split_name(&l.name)?;
            let sdb = self.db_or_current(sdb, current_db)?;
            let src = self.catalog.table(&sdb, &sname)?;
            // The definition (columns, keys, indexes) without rows or AUTO_INCREMENT state.
            let mut info = (*src).clone();
            info.indexes.retain(|i| i.is_public());
            info.id = self.catalog.new_id().await?;
            info.db = db;
            info.name = name;
            self.catalog.put_table(info).await?;
            return Ok(QueryResult::ok(0));
        }
        if ct.query.is_some() {
            return Err(Error::unsupported("CREATE TABLE ... SELECT"));
        }
        if ct.columns.is_empty() {
            return Err(Error::user(Code::TableMustHaveColumns, "A table must have at least 1 column"));
        }
        let mut columns: Vec<ColumnInfo> = Vec::new();
        let mut pk_names: Vec<String> = Vec::new();
        let mut uniques: Vec<(String, Vec<String>)> = Vec::new();
        for (i, def) in ct.columns.iter().enumerate() {
            if columns.iter().any(|c| c.name.eq_ignore_ascii_case(&def.name.value)) {
                return Err(Error::user(Code::DupFieldName, format!("Duplicate column name '{}'", def.name.value)));
            }
            columns.push(build_column(def, i as u32 + 1, &mut pk_names, &mut uniques)?);
        }
        let mut pk: Option<Vec<usize>> = None;
        if !pk_names.is_empty() {
            if pk_names.len() > 1 {
                return Err(Error::user(Code::MultiplePriKey, "Multiple primary key defined"));
            }
            pk = Some(pk_names.iter().filter_map(|n| columns.iter().position(|c| c.name == *n)).collect());
        }
        let mut indexes: Vec<IndexInfo> = Vec::new();
        let mut next_index_id = 1;
        let mut checks: Vec<CheckInfo> = Vec::new();
        for def in &ct.columns {
            for o in &def.options {
                if let ast::ColumnOption::Check(c) = &o.option {
                    add_check(&mut checks, &name, c)?;
                }
            }
        }
        for c in &ct.constraints {
            let (name, cols, unique) = match c {
                ast::TableConstraint::PrimaryKey(p) => {
                    if pk.is_some() {
                        return Err(Error::user(Code::MultiplePriKey, "Multiple primary key defined"));
                    }
                    let cols = index_columns(&columns, &p.columns, &name)?;
                    for &c in &cols {
                        columns[c].nullable = false;
                    }
                    pk = Some(cols);
                    continue;
                }
                ast::TableConstraint::Unique(u) => {
                    (u.name.clone().or(u.index_name.clone()), index_columns(&columns, &u.columns, &name)?, true)
                }
                ast::TableConstraint::Index(ix) => {
                    (ix.name.clone(), index_columns(&columns, &ix.columns, &name)?, false)
                }
                ast::TableConstraint::Check(c) => {
                    add_check(&mut checks, &name, c)?;
                    continue;
                }
                ast::TableConstraint::ForeignKey(_) => continue,
                other => return Err(Error::unsupported(format!("constraint {other}"))),
            };
            let iname = name_of_index(&name, &cols, &columns, &indexes);
            if indexes.iter().any(|i| i.name.eq_ignore_ascii_case(&iname)) {
                return Err(Error::user(Code::DupKeyName, format!("Duplicate key name '{iname}'")));
            }
            indexes.push(IndexInfo {
                id: next_index_id,
                name: iname,
                columns: cols,
                unique,
                state: IndexState::Public,
            });
            next_index_id += 1;
        }
        for (cname, _) in uniques {
            let c = columns
                .iter()
                .position(|x| x.name == cname)
                .ok_or_else(|| Error::internal("unique column vanished"))?;
            let iname = name_of_index(&None, &[c], &columns, &indexes);
            indexes.push(IndexInfo {
                id: next_index_id,
                name: iname,
                columns: vec![c],
                unique: true,
                state: IndexState::Public,
            });
            next_index_id += 1;
        }
        let autos: Vec<usize> = columns.iter().enumerate().filter(|(_, c)| c.auto_increment).map(|(i, _)| i).collect();
        if autos.len() > 1
            || autos.iter().any(|a| {
                pk.as_ref().is_none_or(|p| p.first() != Some(a))
                    && !indexes.iter().any(|i| i.columns.first() == Some(a))
            })
        {
            return Err(Error::user(
                Code::WrongAutoKey,
                "Incorrect table definition; there can be only one auto column and it must be defined as a key",
            ));
        }
        let id = self.catalog.new_id().await?;
        let next_column_id = columns.len() as u32 + 1;
        let info = TableInfo {
            id,
            db: db.clone(),
            name: name.clone(),
            columns,
            pk,
            indexes,
            next_column_id,
            next_index_id,
            checks,
            columnar_replica: None,
            cached: false,
        };
        self.catalog.put_table(info).await?;
        Ok(QueryResult::ok(0))
    }

    /// Destroys the ranges scheduled for deletion (dropped tables and indexes, truncated
    /// rows, abandoned builds) that no transaction can read any more, then their records.
    /// A range becomes destroyable once the GC safe point has passed a timestamp taken after
    /// its record was first seen (so after the change that orphaned it committed): every
    /// reader that could still see the old data, and every writer that could still write
    /// it through an old schema, has finished by then. `seen` carries those timestamps from
    /// one pass to the next (after a restart the wait starts over). Runs in the background
    /// (`Engine::start_background`), and resumes after a restart.
    pub async fn destroy_orphaned_ranges(&self, seen: &mut HashMap<Vec<u8>, Timestamp>) -> Result<usize> {
        let pending = self.catalog.pending_deletes().await?;
        seen.retain(|p, _| pending.contains(p));
        if pending.is_empty() {
            return Ok(0);
        }
        let stamp = self.oracle.get_ts().await?;
        for p in &pending {
            seen.entry(p.clone()).or_insert(stamp);
        }
        let safe = self.gc_safe_point().await?;
        let mut destroyed = 0;
        for prefix in &pending {
            if seen.get(prefix).is_some_and(|first| *first <= safe) {
                crate::failpoint::pause("delete_range").await;
                self.client.unsafe_destroy_range(prefix, &prefix_end(prefix)).await?;
                self.catalog.finish_delete(prefix).await?;
                seen.remove(prefix);
                destroyed += 1;
            }
        }
        Ok(destroyed)
    }

    /// Rolls back schema changes a crash interrupted: an index still write-only (its
    /// backfill never finished) is removed and its entries scheduled for deletion. Runs
    /// before the server accepts connections.
    pub async fn recover_ddl(&self) -> Result<usize> {
        let mut rolled_back = self.catalog.abandon_unfinished_builds().await?;
        for db in self.catalog.databases() {
            for t in self.catalog.tables(&db).unwrap_or_default() {
                let unfinished: Vec<IndexInfo> = t.indexes.iter().filter(|i| !i.is_public()).cloned().collect();
                if unfinished.is_empty() {
                    continue;
                }
                let mut fixed = (*t).clone();
                fixed.indexes.retain(|i| i.is_public());
                let entries: Vec<Vec<u8>> = unfinished
                    .iter()
                    .map(|i| strata_codec::keys::index_prefix(t.table_id(), TableInfo::index_id(i)))
                    .collect();
                self.catalog.put_table_deleting(fixed, &entries).await?;
                rolled_back += unfinished.len();
            }
        }
        Ok(rolled_back)
    }

    /// A transaction for internal work (DDL backfill and cleanup).
    pub async fn begin_internal(&self) -> Result<Transaction> {
        self.begin_internal_with(LockMode::Optimistic).await
    }

    /// An internal transaction in the given mode.
    pub async fn begin_internal_with(&self, mode: LockMode) -> Result<Transaction> {
        Transaction::begin(
            self.client.clone(),
            self.oracle.clone(),
            TxnOptions { mode, isolation: Isolation::RepeatableRead, lock_wait_timeout_ms: 50_000, one_pc: true },
        )
        .await
    }

    /// DROP TABLE.
    pub async fn drop_tables(
        &self,
        names: &[ast::ObjectName],
        if_exists: bool,
        current_db: &Option<String>,
    ) -> Result<QueryResult> {
        let _g = self.catalog.ddl_lock().await;
        let mut missing = Vec::new();
        let mut tables = Vec::new();
        for n in names {
            let (db, t) = split_name(n)?;
            let db = self.db_or_current(db, current_db)?;
            match self.catalog.try_table(&db, &t) {
                Some(info) => tables.push(info),
                None => missing.push(format!("{db}.{t}")),
            }
        }
        check_missing(&missing, if_exists)?;
        for t in tables {
            self.catalog.remove_table(&t.db, &t.name, &[table_prefix(t.table_id())]).await?;
        }
        self.wake_cleanup();
        Ok(dropped(&missing))
    }

    /// TRUNCATE TABLE: the table gets a new id (so the old rows vanish at once) and the old
    /// rows are deleted.
    pub async fn truncate(&self, name: &ast::ObjectName, current_db: &Option<String>) -> Result<QueryResult> {
        let _g = self.catalog.ddl_lock().await;
        let (db, t) = split_name(name)?;
        let db = self.db_or_current(db, current_db)?;
        let info = self.catalog.table(&db, &t)?;
        let mut fresh = (*info).clone();
        fresh.id = self.catalog.new_id().await?;
        self.catalog.put_table_deleting(fresh, &[table_prefix(info.table_id())]).await?;
        self.catalog.mark_changed(info.id);
        self.catalog.reset_auto_id(info.id).await?;
        self.wake_cleanup();
        Ok(QueryResult::ok(0))
    }

    /// Adds an index and backfills it from the existing rows (the caller holds the DDL lock).
    pub async fn add_index(
        &self,
        table: Arc<TableInfo>,
        name: Option<String>,
        cols: Vec<usize>,
        unique: bool,
        if_not_exists: bool,
    ) -> Result<QueryResult> {
        let (t, index) = match self.index_write_only(&table, name, cols, unique, if_not_exists).await? {
            Ok(started) => started,
            Err(exists) => return Ok(exists),
        };
        self.catalog.wait_for_commits().await;
        let backfilled = self.backfill_index(&t, &index).await;
        self.index_finish(&t, &index, backfilled).await
    }

    /// The first step of ADD INDEX: the index goes write-only, so statements planned from
    /// now on maintain it but do not read it. Returns the table with it and the index, or
    /// (`Err`) the statement's result when the index exists and IF NOT EXISTS was given.
    /// The caller holds the catalog lock.
    async fn index_write_only(
        &self,
        table: &TableInfo,
        name: Option<String>,
        cols: Vec<usize>,
        unique: bool,
        if_not_exists: bool,
    ) -> Result<std::result::Result<(TableInfo, IndexInfo), QueryResult>> {
        let iname = name_of_index(&name.map(ast::Ident::new), &cols, &table.columns, &table.indexes);
        if table.index(&iname).is_some() {
            if if_not_exists {
                let warning = format!("Duplicate key name '{iname}'");
                return Ok(Err(QueryResult::ok_with_warning(0, Code::DupKeyName, warning)));
            }
            return Err(Error::user(Code::DupKeyName, format!("Duplicate key name '{iname}'")));
        }
        let index =
            IndexInfo { id: table.next_index_id, name: iname, columns: cols, unique, state: IndexState::WriteOnly };
        let mut t = table.clone();
        t.indexes.push(index.clone());
        t.next_index_id += 1;
        self.catalog.put_table(t.clone()).await?;
        Ok(Ok((t, index)))
    }

    /// The last step of ADD INDEX, under the catalog lock: a backfilled index turns public
    /// (reads may use it); one whose backfill failed is removed and its entries scheduled
    /// for deletion. Works on the table as the catalog has it now (another index may have
    /// been added to it meanwhile).
    async fn index_finish(&self, t: &TableInfo, index: &IndexInfo, backfilled: Result<()>) -> Result<QueryResult> {
        let mut now = (*self.catalog.table(&t.db, &t.name)?).clone();
        if now.id != t.id {
            return Err(Error::internal(format!("table {} changed during ADD INDEX", t.name)));
        }
        if let Err(e) = backfilled {
            now.indexes.retain(|i| i.id != index.id);
            let entries = strata_codec::keys::index_prefix(t.table_id(), TableInfo::index_id(index));
            self.catalog.put_table_deleting(now, &[entries]).await?;
            self.wake_cleanup();
            return Err(e);
        }
        for i in now.indexes.iter_mut() {
            if i.id == index.id {
                i.state = IndexState::Public;
            }
        }
        self.catalog.put_table(now).await?;
        Ok(QueryResult::ok(0))
    }

    /// Writes the index entries of every row, in batches, each an optimistic transaction
    /// that reads the rows at its snapshot and writes their entries. Statements planned
    /// since the index went write-only maintain its entries themselves, and every commit
    /// planned before has finished (`wait_for_commits`), so the rows to cover are those of
    /// the snapshot. A writer that changes a row after the snapshot puts or deletes the
    /// entries the row had and has, so the batch's prewrite finds its newer write on the
    /// entry it would put (a write conflict: the batch runs again at a fresh snapshot) or
    /// the writer's prewrite finds the batch's lock and waits for it, then deletes the
    /// entry after it. A row updated without a change of the indexed columns keeps the
    /// entry the batch writes. A unique entry present at the snapshot for another row, or
    /// written by another after it (a conflict, then present), is a duplicate.
    ///
    /// A non-unique index's batch commits in one step, without locks (`commit_unread`):
    /// nobody reads its entries while it is write-only, and only the writers of a row
    /// touch that row's entries. If one of its keys is locked or was written since the
    /// snapshot, nothing is written and the batch runs again as a transaction.
    async fn backfill_index(&self, table: &TableInfo, index: &IndexInfo) -> Result<()> {
        let prefix = strata_codec::keys::row_prefix(table.table_id());
        let end = prefix_end(&prefix);
        let mut start = prefix.clone();
        let mut conflicts = 0;
        // Whether the next batch runs as a transaction (a one-step commit of it found a
        // key in use).
        let mut two_phase = index.unique;
        // Whether the rows left are backfilled in runs (one sorted commit of many batches);
        // after a run meets a writer's key, batch by batch.
        let mut runs = !index.unique;
        loop {
            if runs {
                match self.backfill_run(table, index, &start, &end).await? {
                    Run::Done => return Ok(()),
                    Run::Committed(next) => start = next,
                    Run::KeyInUse => runs = false,
                }
                continue;
            }
            crate::failpoint::pause("backfill_batch").await;
            let mut txn = self.begin_internal().await?;
            let batch = txn.scan_once(&start, &end, BACKFILL_BATCH).await?;
            let Some((last, _)) = batch.last() else { return Ok(()) };
            let last = last.clone();
            let mut entries = Vec::with_capacity(batch.len());
            for (k, v) in &batch {
                let (row, ik, iv) = batch_entry(table, index, k, v)?;
                entries.push((is_unique_entry(index, &row).then_some(row), ik, iv));
            }
            drop(batch);
            if !two_phase {
                let commit_ts = self.oracle.get_ts().await?;
                let puts = entries.into_iter().map(|(_, ik, iv)| (ik, iv)).collect();
                if self.client.commit_unread(puts, txn.start_ts(), commit_ts).await? {
                    start = last;
                    start.push(0);
                    conflicts = 0;
                } else if conflicts < MAX_BACKFILL_CONFLICTS {
                    conflicts += 1;
                    two_phase = true;
                } else {
                    return Err(Error::WriteConflict { start_ts: txn.start_ts(), conflict_ts: commit_ts, key: last });
                }
                continue;
            }
            let unique_keys: Vec<Vec<u8>> = entries.iter().filter(|e| e.0.is_some()).map(|e| e.1.clone()).collect();
            let existing = txn.batch_get(&unique_keys).await?;
            let unique_entries = entries.iter().filter_map(|(row, ik, iv)| row.as_ref().map(|r| (r, ik, iv)));
            let mut seen = std::collections::HashSet::new();
            for ((row, ik, iv), found) in unique_entries.zip(&existing) {
                // Two rows of this batch with the same unique values collide with each other.
                if !seen.insert(ik) || found.as_ref().is_some_and(|e| e != iv) {
                    let vals: Vec<String> = index.columns.iter().map(|c| row[*c].to_display()).collect();
                    return Err(Error::user(
                        Code::DupEntry,
                        format!("Duplicate entry '{}' for key '{}.{}'", vals.join("-"), table.name, index.name),
                    ));
                }
            }
            for (_, ik, iv) in entries {
                txn.put(ik, iv);
            }
            match txn.commit().await {
                Ok(_) => {
                    start = last;
                    start.push(0);
                    conflicts = 0;
                    two_phase = index.unique;
                }
                // A writer changed a row of the batch: read it again at a fresh snapshot.
                Err(Error::WriteConflict { .. }) if conflicts < MAX_BACKFILL_CONFLICTS => conflicts += 1,
                Err(e) => return Err(e),
            }
        }
    }

    /// One run of a non-unique index's backfill from the row key `start`: the entries of
    /// the rows up to `BACKFILL_RUN_BYTES` of them, read at one snapshot, sorted and
    /// committed without locks in one store command (`Client::commit_unread`, whose checks
    /// make that safe for an index nobody reads yet). A run that meets a key a writer used
    /// since its snapshot writes nothing.
    async fn backfill_run(&self, table: &TableInfo, index: &IndexInfo, start: &[u8], end: &[u8]) -> Result<Run> {
        // Pinned: the run reads for longer than a prune interval, and the commit's checks
        // of its snapshot would otherwise look past the raised floor in the write CF.
        let (txn, _pin) = self.pin_snapshot().await?;
        let mut next = start.to_vec();
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        let mut bytes = 0;
        let mut done = false;
        while bytes < BACKFILL_RUN_BYTES {
            crate::failpoint::pause("backfill_batch").await;
            let batch = txn.scan_once(&next, end, BACKFILL_BATCH).await?;
            let Some((last, _)) = batch.last() else {
                done = true;
                break;
            };
            next = last.clone();
            next.push(0);
            for (k, v) in &batch {
                let (_, ik, iv) = batch_entry(table, index, k, v)?;
                bytes += ik.len() + iv.len() + ENTRY_OVERHEAD;
                entries.push((ik, iv));
            }
        }
        if entries.is_empty() {
            return Ok(Run::Done);
        }
        strata_common::keysort::sort_by_key_bytes(&mut entries, |e| &e.0);
        let commit_ts = self.oracle.get_ts().await?;
        if !self.client.commit_unread(entries, txn.start_ts(), commit_ts).await? {
            return Ok(Run::KeyInUse);
        }
        Ok(if done { Run::Done } else { Run::Committed(next) })
    }

    /// ADMIN CHECK TABLE: every index holds exactly the entries its table's rows imply
    /// (read at one snapshot); error 8003 names the first index that does not.
    pub async fn check_table(&self, table: &TableInfo) -> Result<()> {
        let txn = self.begin_internal().await?;
        let prefix = strata_codec::keys::row_prefix(table.table_id());
        let rows = txn.scan_once(&prefix, &prefix_end(&prefix), usize::MAX).await?;
        for index in &table.indexes {
            let mut expected = std::collections::BTreeMap::new();
            for (k, v) in &rows {
                let (row, _) = decode_row(table, v)?;
                let (ik, iv) = index_entry(table, index, &row, handle_from_row_key(table, k));
                expected.insert(ik, iv);
            }
            let iprefix = strata_codec::keys::index_prefix(table.table_id(), TableInfo::index_id(index));
            let actual: std::collections::BTreeMap<Vec<u8>, Vec<u8>> =
                txn.scan_once(&iprefix, &prefix_end(&iprefix), usize::MAX).await?.into_iter().collect();
            if actual != expected {
                let missing = expected.iter().filter(|(k, v)| actual.get(*k) != Some(v)).count();
                let extra = actual.iter().filter(|(k, v)| expected.get(*k) != Some(v)).count();
                return Err(Error::user(
                    Code::AdminCheckTable,
                    format!(
                        "data inconsistency in table: {}, index: {}, {missing} entries missing or wrong, {extra} extra",
                        table.name, index.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// CHECKSUM TABLE: the sum of each row's CRC-32 (over its values in column order, NULLs
    /// marked), read at one snapshot. Like MySQL's, it does not depend on row order.
    pub async fn checksum_table(&self, table: &TableInfo) -> Result<u64> {
        let txn = self.begin_internal().await?;
        let prefix = strata_codec::keys::row_prefix(table.table_id());
        let end = prefix_end(&prefix);
        let mut start = prefix;
        let mut sum: u64 = 0;
        loop {
            crate::interrupt::checkpoint().await?;
            let batch = txn.scan_once(&start, &end, 1_000).await?;
            let Some((last, _)) = batch.last() else { return Ok(sum) };
            start = last.clone();
            start.push(0);
            for (_, v) in &batch {
                let (row, _) = decode_row(table, v)?;
                let mut h = crc32fast::Hasher::new();
                for v in &row {
                    match v.to_text() {
                        None => h.update(&[0xff]),
                        Some(b) => {
                            h.update(&(b.len() as u32).to_le_bytes());
                            h.update(&b);
                        }
                    }
                }
                sum = sum.wrapping_add(h.finalize() as u64);
            }
        }
    }

    /// CREATE INDEX. Backfills of different indexes (of one table or several) run side by
    /// side: the statement holds the reorg lock shared, and the catalog lock only while it
    /// changes the table's definition (`Catalog::reorg_lock`).
    pub async fn create_index(&self, ci: &ast::CreateIndex, current_db: &Option<String>) -> Result<QueryResult> {
        let _reorg = self.catalog.reorg_lock().await;
        let (t, index) = {
            let _g = self.catalog.catalog_lock().await;
            let (db, t) = split_name(&ci.table_name)?;
            let db = self.db_or_current(db, current_db)?;
            let table = self.catalog.table(&db, &t)?;
            let cols = index_columns(&table.columns, &ci.columns, &t)?;
            let name = ci.name.as_ref().map(|n| split_name(n).map(|x| x.1)).transpose()?;
            match self.index_write_only(&table, name, cols, ci.unique, ci.if_not_exists).await? {
                Ok(started) => started,
                Err(exists) => return Ok(exists),
            }
        };
        self.catalog.wait_for_commits().await;
        let backfilled = self.backfill_index(&t, &index).await;
        let _g = self.catalog.catalog_lock().await;
        self.index_finish(&t, &index, backfilled).await
    }

    /// Removes an index and its entries.
    pub async fn drop_index(&self, table: Arc<TableInfo>, name: &str) -> Result<QueryResult> {
        let Some(index) = table.index(name).cloned() else {
            return Err(Error::user(
                Code::CantDropFieldOrKey,
                format!("Can't DROP '{name}'; check that column/key exists"),
            ));
        };
        let mut t = (*table).clone();
        t.indexes.retain(|i| i.id != index.id);
        let entries = strata_codec::keys::index_prefix(table.table_id(), TableInfo::index_id(&index));
        self.catalog.put_table_deleting(t, &[entries]).await?;
        self.wake_cleanup();
        Ok(QueryResult::ok(0))
    }

    /// ALTER TABLE.
    pub async fn alter_table(
        &self,
        at: &ast::AlterTable,
        current_db: &Option<String>,
        conn: (u32, bool),
        lock_timeout: std::time::Duration,
    ) -> Result<QueryResult> {
        let _g = self.catalog.ddl_lock().await;
        let (db, t) = split_name(&at.name)?;
        let db = self.db_or_current(db, current_db)?;
        for op in &at.operations {
            let table = self.catalog.table(&db, &t)?;
            match op {
                ast::AlterTableOperation::ModifyColumn { col_name, data_type, options, column_position } => {
                    let def = column_def(col_name, data_type, options);
                    let at = column_at(&table, &col_name.value)?;
                    let (nt, from) =
                        with_column(&table, Some(at), &def, column_position.as_ref(), table.columns[at].id)?;
                    self.rebuild_table(conn, lock_timeout, table, nt, from).await?;
                }
                ast::AlterTableOperation::ChangeColumn { old_name, new_name, data_type, options, column_position } => {
                    let def = column_def(new_name, data_type, options);
                    let at = renamable(&table, &old_name.value, &new_name.value)?;
                    let (nt, from) =
                        with_column(&table, Some(at), &def, column_position.as_ref(), table.columns[at].id)?;
                    self.rebuild_table(conn, lock_timeout, table, nt, from).await?;
                }
                ast::AlterTableOperation::RenameColumn { old_column_name, new_column_name } => {
                    let at = renamable(&table, &old_column_name.value, &new_column_name.value)?;
                    let mut nt = (*table).clone();
                    nt.columns[at].name = new_column_name.value.clone();
                    self.catalog.put_table(nt).await?;
                }
                ast::AlterTableOperation::AlterColumn { column_name, op } => {
                    let at = column_at(&table, &column_name.value)?;
                    let mut nt = (*table).clone();
                    match op {
                        ast::AlterColumnOperation::SetDefault { value } => {
                            let mut col = nt.columns[at].clone();
                            col.default = Some(default_of(value)?);
                            if let Some(DefaultValue::Text(t)) = &col.default {
                                let v = col.ty.coerce(Value::str(t.clone()), &col.name).map_err(|_| {
                                    Error::user(
                                        Code::InvalidDefault,
                                        format!("Invalid default value for '{}'", col.name),
                                    )
                                })?;
                                col.default = Some(DefaultValue::Text(v.to_display()));
                            }
                            nt.columns[at] = col;
                        }
                        ast::AlterColumnOperation::DropDefault => nt.columns[at].default = None,
                        other => return Err(Error::unsupported(format!("ALTER COLUMN {other}"))),
                    }
                    self.catalog.put_table(nt).await?;
                }
                ast::AlterTableOperation::AddConstraint { constraint: ast::TableConstraint::PrimaryKey(p), .. } => {
                    if table.pk.is_some() {
                        return Err(Error::user(Code::MultiplePriKey, "Multiple primary key defined"));
                    }
                    let cols = index_columns(&table.columns, &p.columns, &t)?;
                    let mut nt = (*table).clone();
                    for &c in &cols {
                        nt.columns[c].nullable = false;
                    }
                    nt.pk = Some(cols);
                    let from = (0..table.columns.len()).map(Some).collect();
                    self.rebuild_table(conn, lock_timeout, table, nt, from).await?;
                }
                ast::AlterTableOperation::DropPrimaryKey { .. } => {
                    if table.pk.is_none() {
                        return Err(Error::user(
                            Code::CantDropFieldOrKey,
                            "Can't DROP 'PRIMARY'; check that column/key exists",
                        ));
                    }
                    let mut nt = (*table).clone();
                    nt.pk = None;
                    if let Some(a) = nt.auto_increment_column() {
                        if !nt.indexes.iter().any(|i| i.columns.first() == Some(&a)) {
                            return Err(Error::user(
                                Code::WrongAutoKey,
                                "Incorrect table definition; there can be only one auto column and it must be defined as a key",
                            ));
                        }
                    }
                    let from = (0..table.columns.len()).map(Some).collect();
                    self.rebuild_table(conn, lock_timeout, table, nt, from).await?;
                }
                ast::AlterTableOperation::AddColumn { column_def, if_not_exists, column_position, .. } => {
                    if table.column_index(&column_def.name.value).is_some() {
                        if *if_not_exists {
                            continue;
                        }
                        return Err(Error::user(
                            Code::DupFieldName,
                            format!("Duplicate column name '{}'", column_def.name.value),
                        ));
                    }
                    let mut pk = Vec::new();
                    let mut uniques = Vec::new();
                    let mut col = build_column(column_def, table.next_column_id, &mut pk, &mut uniques)?;
                    // A position, a key, AUTO_INCREMENT or a computed value rewrites every
                    // row; a plain column only changes the definition.
                    if column_position.is_some()
                        || !pk.is_empty()
                        || !uniques.is_empty()
                        || col.auto_increment
                        || col.generated.is_some()
                    {
                        let (nt, from) =
                            with_column(&table, None, column_def, column_position.as_ref(), table.next_column_id)?;
                        self.rebuild_table(conn, lock_timeout, table, nt, from).await?;
                        continue;
                    }
                    // MySQL fills existing rows with the type's zero value; it is recorded as
                    // the default.
                    if !col.nullable && col.default.is_none() {
                        col.default = Some(DefaultValue::Text(zero_text(&col.ty)));
                    }
                    let mut nt = (*table).clone();
                    nt.columns.push(col);
                    nt.next_column_id += 1;
                    self.catalog.put_table(nt).await?;
                }
                ast::AlterTableOperation::DropColumn { column_names, if_exists, .. } => {
                    let mut nt = (*table).clone();
                    let mut entries: Vec<Vec<u8>> = Vec::new();
                    for cn in column_names {
                        let Some(ci) = nt.column_index(&cn.value) else {
                            if *if_exists {
                                continue;
                            }
                            return Err(Error::user(
                                Code::CantDropFieldOrKey,
                                format!("Can't DROP '{}'; check that column/key exists", cn.value),
                            ));
                        };
                        no_check_uses(&nt, &cn.value)?;
                        if nt.pk.as_ref().is_some_and(|p| p.contains(&ci)) {
                            return Err(Error::unsupported("dropping a primary key column"));
                        }
                        if nt.columns.len() == 1 {
                            return Err(Error::user(
                                Code::CantDropFieldOrKey,
                                "You can't delete all columns with ALTER TABLE; use DROP TABLE instead",
                            ));
                        }
                        // Indexes on the column go with it; offsets above it shift down.
                        let dropped: Vec<IndexInfo> =
                            nt.indexes.iter().filter(|i| i.columns.contains(&ci)).cloned().collect();
                        nt.indexes.retain(|i| !i.columns.contains(&ci));
                        for i in &mut nt.indexes {
                            for c in &mut i.columns {
                                if *c > ci {
                                    *c -= 1;
                                }
                            }
                        }
                        if let Some(p) = &mut nt.pk {
                            for c in p.iter_mut() {
                                if *c > ci {
                                    *c -= 1;
                                }
                            }
                        }
                        nt.columns.remove(ci);
                        entries.extend(
                            dropped
                                .iter()
                                .map(|d| strata_codec::keys::index_prefix(table.table_id(), TableInfo::index_id(d))),
                        );
                    }
                    self.catalog.put_table_deleting(nt, &entries).await?;
                    self.wake_cleanup();
                }
                ast::AlterTableOperation::AddConstraint { constraint, .. } => {
                    let (name, cols, unique) = match constraint {
                        ast::TableConstraint::Unique(u) => (u.name.clone().or(u.index_name.clone()), &u.columns, true),
                        ast::TableConstraint::Index(ix) => (ix.name.clone(), &ix.columns, false),
                        other => return Err(Error::unsupported(format!("ALTER TABLE ADD {other}"))),
                    };
                    let cols = index_columns(&table.columns, cols, &t)?;
                    self.add_index(table, name.map(|n| n.value), cols, unique, false).await?;
                }
                ast::AlterTableOperation::DropIndex { name, .. } => {
                    self.drop_index(table, &name.value).await?;
                }
                other => return Err(Error::unsupported(format!("ALTER TABLE {other}"))),
            }
        }
        Ok(QueryResult::ok(0))
    }

    /// DROP INDEX name ON table.
    pub async fn drop_index_stmt(
        &self,
        index: &str,
        table: &ast::ObjectName,
        current_db: &Option<String>,
    ) -> Result<QueryResult> {
        let _g = self.catalog.ddl_lock().await;
        let (db, t) = split_name(table)?;
        let db = self.db_or_current(db, current_db)?;
        let table = self.catalog.table(&db, &t)?;
        self.drop_index(table, index).await
    }

    /// CREATE DATABASE.
    pub async fn create_database(&self, name: &str, if_not_exists: bool) -> Result<QueryResult> {
        let _g = self.catalog.ddl_lock().await;
        if self.catalog.has_database(name) {
            if if_not_exists {
                return Ok(QueryResult::ok_with_warning(
                    0,
                    Code::DbCreateExists,
                    format!("Can't create database '{name}'; database exists"),
                ));
            }
            return Err(Error::user(Code::DbCreateExists, format!("Can't create database '{name}'; database exists")));
        }
        self.catalog.create_database(name).await?;
        Ok(QueryResult::ok(1))
    }

    /// DROP DATABASE.
    pub async fn drop_database(&self, name: &str, if_exists: bool) -> Result<QueryResult> {
        let _g = self.catalog.ddl_lock().await;
        if !self.catalog.has_database(name) {
            if if_exists {
                return Ok(QueryResult::ok_with_warning(
                    0,
                    Code::DbDropExists,
                    format!("Can't drop database '{name}'; database doesn't exist"),
                ));
            }
            return Err(Error::user(
                Code::DbDropExists,
                format!("Can't drop database '{name}'; database doesn't exist"),
            ));
        }
        let n = self.catalog.drop_database(name).await?.len();
        self.wake_cleanup();
        Ok(QueryResult::ok(n as u64))
    }
}

/// A column definition from the parts of MODIFY / CHANGE COLUMN.
fn column_def(name: &ast::Ident, data_type: &ast::DataType, options: &[ast::ColumnOption]) -> ast::ColumnDef {
    ast::ColumnDef {
        name: name.clone(),
        data_type: data_type.clone(),
        options: options.iter().map(|o| ast::ColumnOptionDef { name: None, option: o.clone() }).collect(),
    }
}

/// The offset of column `old`, which is to be called `new`: 1054 if there is no such
/// column, 1060 if another column has the new name, 3959 if a CHECK constraint uses it.
fn renamable(table: &TableInfo, old: &str, new: &str) -> Result<usize> {
    let at = column_at(table, old)?;
    if !new.eq_ignore_ascii_case(old) {
        no_check_uses(table, old)?;
        if table.column_index(new).is_some() {
            return Err(Error::user(Code::DupFieldName, format!("Duplicate column name '{new}'")));
        }
    }
    Ok(at)
}

/// The offset of a column (1054 if there is none).
fn column_at(table: &TableInfo, name: &str) -> Result<usize> {
    table
        .column_index(name)
        .ok_or_else(|| Error::user(Code::BadField, format!("Unknown column '{name}' in '{}'", table.name)))
}

/// `table` with column `replace` redefined (or a new column added) as `def`, placed at
/// `pos`; and for each column of the result, the column of `table` that feeds it.
fn with_column(
    table: &TableInfo,
    replace: Option<usize>,
    def: &ast::ColumnDef,
    pos: Option<&ast::MySQLColumnPosition>,
    id: u32,
) -> Result<(TableInfo, Vec<Option<usize>>)> {
    let mut pk_names = Vec::new();
    let mut uniques = Vec::new();
    let mut col = build_column(def, id, &mut pk_names, &mut uniques)?;
    if replace.is_none() && !col.nullable && col.default.is_none() && !col.auto_increment {
        // Existing rows get the type's zero value, as MySQL fills them.
        col.default = Some(DefaultValue::Text(zero_text(&col.ty)));
    }
    let mut nt = table.clone();
    let at = match replace {
        Some(i) => {
            nt.columns[i] = col;
            i
        }
        None => {
            nt.columns.push(col);
            nt.next_column_id += 1;
            nt.columns.len() - 1
        }
    };
    // Keys on the column keep it NOT NULL.
    if nt.pk.as_ref().is_some_and(|p| p.contains(&at)) {
        nt.columns[at].nullable = false;
    }
    let mut from: Vec<Option<usize>> = (0..table.columns.len()).map(Some).collect();
    if replace.is_none() {
        from.push(None);
    }
    if pos.is_some() {
        let mut others = nt.columns.clone();
        others.remove(at);
        let to = crate::alter::position_of(&others, pos, at, &table.name)?;
        let order = crate::alter::move_column(&mut nt, at, to);
        from = order.into_iter().map(|o| o.and_then(|o| from[o])).collect();
    }
    let at = nt.column_index(&def.name.value).unwrap_or(at);
    if !pk_names.is_empty() {
        if nt.pk.is_some() {
            return Err(Error::user(Code::MultiplePriKey, "Multiple primary key defined"));
        }
        nt.columns[at].nullable = false;
        nt.pk = Some(vec![at]);
    }
    if !uniques.is_empty() {
        let iname = name_of_index(&None, &[at], &nt.columns, &nt.indexes);
        nt.indexes.push(IndexInfo {
            id: nt.next_index_id,
            name: iname,
            columns: vec![at],
            unique: true,
            state: IndexState::Public,
        });
        nt.next_index_id += 1;
    }
    if let Some(a) = nt.auto_increment_column() {
        let keyed = nt.pk.as_ref().is_some_and(|p| p.first() == Some(&a))
            || nt.indexes.iter().any(|i| i.columns.first() == Some(&a));
        if !keyed || nt.columns.iter().filter(|c| c.auto_increment).count() > 1 {
            return Err(Error::user(
                Code::WrongAutoKey,
                "Incorrect table definition; there can be only one auto column and it must be defined as a key",
            ));
        }
    }
    Ok((nt, from))
}

fn zero_text(ty: &ColumnType) -> String {
    match ty {
        ColumnType::Date => "0000-00-00".into(),
        ColumnType::DateTime(_) | ColumnType::Timestamp(_) => "0000-00-00 00:00:00".into(),
        ColumnType::Time(_) => "00:00:00".into(),
        t if t.is_string() => String::new(),
        _ => "0".into(),
    }
}
