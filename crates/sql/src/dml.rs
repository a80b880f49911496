//! INSERT, REPLACE, UPDATE and DELETE.
//!
//! Every key a statement may conflict on (row keys and unique index entries) is read with
//! `lock_and_get`: in pessimistic mode that locks it and returns its latest committed value,
//! so duplicate-key checks and read-modify-write are correct under concurrency without
//! retries; in optimistic mode conflicts are found at commit.

use std::collections::HashMap;
use std::sync::Arc;

use sqlparser::ast;
use sqlparser::ast::VisitMut;
use strata_common::{Code, Error, Result, Value};
use strata_txn::Transaction;

use crate::binder::{split_name, Binder, Scope, ScopeColumn, SessionInfo};
use crate::catalog::{default_value, Catalog, TableInfo};
use crate::exec::{execute, scan, sort_by_keys, ExecCtx, TableRow};
use crate::expr::{Expr, Row};
use crate::plan::{OutputColumn, SubqueryPlan};
use crate::result::QueryResult;
use crate::table::{decode_row, encode_row, handle_of, index_entry, is_unique_entry, row_key};

/// What a statement needs to run DML.
pub struct DmlCtx<'a> {
    /// The catalog.
    pub catalog: &'a Catalog,
    /// Session facts for binding.
    pub session: &'a SessionInfo,
    /// Parameters of a prepared statement.
    pub params: &'a [Value],
}

/// What an INSERT does with a row that conflicts with a stored one on a unique key.
pub(crate) enum OnDuplicate<'a> {
    /// Fails with 1062.
    Error,
    /// Skips the row with a 1062 warning (INSERT IGNORE).
    Ignore,
    /// Deletes the conflicting rows first (REPLACE).
    Replace,
    /// Updates the conflicting row (ON DUPLICATE KEY UPDATE): assignments bound over the
    /// old row followed by the new one, and their subqueries.
    Update(&'a [(usize, Expr)], Arc<Vec<crate::plan::SubqueryPlan>>),
}

/// How a bound INSERT handles a duplicate (`OnDuplicate` without the assignments).
#[derive(Clone, Copy, Debug)]
pub(crate) enum DupMode {
    Error,
    Ignore,
    Replace,
    Update,
}

/// One bound VALUES cell: the expression with its subqueries, or None for DEFAULT.
type BoundCell = Option<(Expr, Arc<Vec<SubqueryPlan>>)>;

/// Where a bound INSERT's rows come from.
pub(crate) enum InsertSource {
    /// VALUES rows.
    Values(Vec<Vec<BoundCell>>),
    /// INSERT ... SELECT.
    Query(Box<crate::plan::Query>),
}

/// A bound INSERT or REPLACE, parameters symbolic, so the executions of one prepared
/// statement can share it (`crate::plan_cache`).
pub struct InsertPlan {
    table: Arc<TableInfo>,
    /// The table column each source value goes to.
    cols: Vec<usize>,
    source: InsertSource,
    /// ON DUPLICATE KEY UPDATE assignments (over the old row followed by the new one).
    upsert: Vec<(usize, Expr)>,
    upsert_subs: Arc<Vec<SubqueryPlan>>,
    on_dup: DupMode,
}

/// The rows a bound single-table UPDATE or DELETE acts on: its access path, filters,
/// order and limit.
pub struct RowsPlan {
    table: Arc<TableInfo>,
    access: crate::plan::Access,
    filter: Option<Expr>,
    /// Conjuncts with subqueries, checked on the rows the scan returns.
    residual: Option<Expr>,
    order: SortKeys,
    limit: Option<Expr>,
    subs: Arc<Vec<SubqueryPlan>>,
}

impl RowsPlan {
    /// The rows, locked (a current read), filtered, ordered and limited.
    async fn select(&self, ctx: &mut ExecCtx<'_>) -> Result<Vec<TableRow>> {
        let (table, order) = (&self.table, &self.order);
        select_rows(ctx, table, &self.access, self.filter.as_ref(), self.residual.as_ref(), order, self.limit.as_ref())
            .await
    }
}

/// A bound single-table UPDATE.
pub struct UpdatePlan {
    scan: RowsPlan,
    /// (column, value) assignments, over the old row.
    assigns: Vec<(usize, Expr)>,
}

/// What storing rows did.
#[derive(Default)]
pub(crate) struct Stored {
    /// Affected rows as MySQL counts them (a replaced row counts twice, an upsert two).
    pub affected: u64,
    /// Rows REPLACE deleted.
    pub deleted: u64,
    /// Rows skipped as duplicates.
    pub skipped: u64,
    /// Warnings for the skipped rows.
    pub warnings: Vec<(Code, String)>,
}

/// Values of keys this statement has read or written (latest committed or our own).
struct KeyCache {
    /// Values the statement's lock commands returned; its own writes are the
    /// transaction's (`Transaction::own_write`), looked at first.
    known: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

impl KeyCache {
    async fn get(&mut self, txn: &mut Transaction, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = txn.own_write(key) {
            return Ok(v.map(<[u8]>::to_vec));
        }
        if let Some(v) = self.known.get(key) {
            return Ok(v.clone());
        }
        let v = txn.lock_and_get(&[key.to_vec()]).await?.into_iter().next().flatten();
        self.known.insert(key.to_vec(), v.clone());
        Ok(v)
    }

    fn put(&mut self, txn: &mut Transaction, key: Vec<u8>, value: Vec<u8>) {
        txn.put(key, value);
    }

    fn delete(&mut self, txn: &mut Transaction, key: Vec<u8>) {
        txn.delete(key);
    }
}

fn dup_error(table: &TableInfo, key_name: &str, row: &Row, cols: &[usize]) -> Error {
    let vals: Vec<String> = cols.iter().map(|c| row[*c].to_display()).collect();
    Error::user(Code::DupEntry, format!("Duplicate entry '{}' for key '{}.{}'", vals.join("-"), table.name, key_name))
}

/// Writes a new row and its index entries (`handle`: the row's, `handle_of`).
fn write_row_at(
    cache: &mut KeyCache,
    txn: &mut Transaction,
    table: &TableInfo,
    row: &Row,
    row_id: Option<i64>,
    handle: &[u8],
) {
    cache.put(txn, row_key(table, handle), encode_row(table, row, row_id));
    for idx in &table.indexes {
        let (k, v) = index_entry(table, idx, row, handle);
        cache.put(txn, k, v);
    }
}

fn delete_row(
    cache: &mut KeyCache,
    txn: &mut Transaction,
    table: &TableInfo,
    row: &Row,
    row_id: Option<i64>,
) -> Result<()> {
    let handle = handle_of(table, row, row_id)?;
    cache.delete(txn, row_key(table, &handle));
    for idx in &table.indexes {
        let (k, _) = index_entry(table, idx, row, &handle);
        cache.delete(txn, k);
    }
    Ok(())
}

/// Writes rows known to conflict with nothing (`DmlCtx::store_rows`), with their index
/// entries, in one batch (`handles`: the rows', `handle_of`).
fn store_new_rows(
    txn: &mut Transaction,
    table: &TableInfo,
    rows: Vec<(Row, Option<i64>)>,
    handles: Vec<Vec<u8>>,
) -> Stored {
    let affected = rows.len() as u64;
    // The rows, then each index's entries: runs in key order when the rows come in it.
    let mut puts = Vec::with_capacity(rows.len() * (1 + table.indexes.len()));
    for ((row, row_id), handle) in rows.iter().zip(&handles) {
        puts.push((row_key(table, handle), encode_row(table, row, *row_id)));
    }
    for idx in &table.indexes {
        for ((row, _), handle) in rows.iter().zip(&handles) {
            puts.push(index_entry(table, idx, row, handle));
        }
    }
    txn.put_all(puts);
    Stored { affected, ..Stored::default() }
}

/// Finds rows that conflict with `row` on the primary key or a unique index.
async fn conflicts(
    cache: &mut KeyCache,
    txn: &mut Transaction,
    table: &TableInfo,
    row: &Row,
    handle: &[u8],
) -> Result<Vec<(String, Vec<usize>, TableRow)>> {
    let mut out: Vec<(String, Vec<usize>, TableRow)> = Vec::new();
    if table.pk.is_some() {
        let k = row_key(table, handle);
        if let Some(v) = cache.get(txn, &k).await? {
            let (r, rid) = decode_row(table, &v)?;
            out.push((
                "PRIMARY".into(),
                table.pk.clone().unwrap_or_default(),
                TableRow { key: k, row: r, row_id: rid },
            ));
        }
    }
    for idx in &table.indexes {
        if !is_unique_entry(idx, row) {
            continue;
        }
        let (k, _) = index_entry(table, idx, row, handle);
        if let Some(other_handle) = cache.get(txn, &k).await? {
            let rk = row_key(table, &other_handle);
            if out.iter().any(|(_, _, r)| r.key == rk) {
                continue;
            }
            let Some(v) = cache.get(txn, &rk).await? else {
                return Err(Error::internal(format!("index {} points to a missing row", idx.name)));
            };
            let (r, rid) = decode_row(table, &v)?;
            out.push((idx.name.clone(), idx.columns.clone(), TableRow { key: rk, row: r, row_id: rid }));
        }
    }
    Ok(out)
}

pub(crate) fn is_default_keyword(e: &ast::Expr) -> bool {
    matches!(e, ast::Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("default"))
}

/// Replaces `VALUES(col)` in ON DUPLICATE KEY UPDATE with a reference to the new row.
fn rewrite_values_fn(e: &ast::Expr) -> ast::Expr {
    struct V;
    impl ast::VisitorMut for V {
        type Break = ();
        fn post_visit_expr(&mut self, e: &mut ast::Expr) -> std::ops::ControlFlow<()> {
            if let ast::Expr::Function(f) = e {
                if f.name.to_string().eq_ignore_ascii_case("values") {
                    if let ast::FunctionArguments::List(l) = &f.args {
                        if let Some(ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(ast::Expr::Identifier(id)))) =
                            l.args.first()
                        {
                            *e = ast::Expr::CompoundIdentifier(vec![ast::Ident::new("__new__"), id.clone()]);
                        }
                    }
                }
            }
            std::ops::ControlFlow::Continue(())
        }
    }
    let mut c = e.clone();
    let _ = c.visit(&mut V);
    c
}

pub(crate) fn assignment_column(table: &TableInfo, a: &ast::Assignment) -> Result<usize> {
    let name = match &a.target {
        ast::AssignmentTarget::ColumnName(n) => n.0.last().map(|p| p.to_string()).unwrap_or_default(),
        ast::AssignmentTarget::Tuple(_) => return Err(Error::unsupported("tuple assignment")),
    };
    let name = name.trim_matches('`').to_string();
    let i = table.column_index(&name).ok_or_else(|| crate::binder::unknown_column(&name, "field list"))?;
    if table.columns[i].generated.is_some() && !is_default_keyword(&a.value) {
        return Err(generated_value_error(&table.columns[i], table));
    }
    Ok(i)
}

/// 3105: a generated column takes no explicit value.
fn generated_value_error(c: &crate::catalog::ColumnInfo, table: &TableInfo) -> Error {
    Error::user(
        Code::NonDefaultValueForGeneratedColumn,
        format!("The value specified for generated column '{}' in table '{}' is not allowed.", c.name, table.name),
    )
}

/// Computes the generated columns of `row` in column order (each may use the columns
/// before it), converted to their types.
pub(crate) async fn fill_generated(
    catalog: &crate::Catalog,
    session: &SessionInfo,
    txn: &mut Transaction,
    table: &TableInfo,
    row: &mut Row,
) -> Result<()> {
    if table.columns.iter().all(|c| c.generated.is_none()) {
        return Ok(());
    }
    let shared = Arc::new(table.clone());
    let scope = Binder::table_scope(&shared, &table.name);
    let mut binder = Binder::new(catalog, session);
    let dialect = crate::dialect::StrataDialect::default();
    for (i, c) in table.columns.iter().enumerate() {
        let Some((text, _)) = &c.generated else { continue };
        let parsed = sqlparser::parser::Parser::new(&dialect)
            .try_with_sql(text)
            .and_then(|mut p| p.parse_expr())
            .map_err(|e| Error::internal(format!("generated column '{}': {e}", c.name)))?;
        let bound = binder.expr(&parsed, &scope)?;
        let empty: &[Value] = &[];
        let mut ctx = ExecCtx::new(txn, empty, Default::default());
        let v = ctx.eval(&bound, row).await?;
        row[i] = c.coerce(v)?;
    }
    Ok(())
}

fn not_null_check(table: &TableInfo, row: &Row) -> Result<()> {
    for (c, v) in table.columns.iter().zip(row) {
        if v.is_null() && !c.nullable {
            return Err(Error::user(Code::BadNull, format!("Column '{}' cannot be null", c.name)));
        }
    }
    Ok(())
}

impl DmlCtx<'_> {
    /// INSERT / REPLACE.
    pub async fn insert(&self, txn: &mut Transaction, ins: &ast::Insert) -> Result<QueryResult> {
        let plan = self.plan_insert(ins)?.0;
        self.run_insert(txn, &plan).await
    }

    /// Binds an INSERT (or REPLACE) against the catalog, parameters left symbolic; with the
    /// reason it must not be cached, if one (`crate::plan_cache`).
    pub(crate) fn plan_insert(&self, ins: &ast::Insert) -> Result<(InsertPlan, Option<String>)> {
        let ast::TableObject::TableName(name) = &ins.table else {
            return Err(Error::unsupported("INSERT INTO TABLE FUNCTION"));
        };
        // INSERT ... SET a = 1, b = 2 is INSERT (a, b) VALUES (1, 2).
        let from_set;
        let ins = if ins.source.is_none() && !ins.assignments.is_empty() {
            let mut rewritten = ins.clone();
            let mut values = Vec::new();
            for a in std::mem::take(&mut rewritten.assignments) {
                let ast::AssignmentTarget::ColumnName(n) = a.target else {
                    return Err(Error::unsupported("tuple assignment"));
                };
                rewritten.columns.push(n);
                values.push(a.value);
            }
            rewritten.source = Some(Box::new(ast::Query {
                with: None,
                body: Box::new(ast::SetExpr::Values(ast::Values {
                    explicit_row: false,
                    value_keyword: false,
                    rows: vec![ast::Parens::with_empty_span(values)],
                })),
                order_by: None,
                limit_clause: None,
                fetch: None,
                locks: Vec::new(),
                for_clause: None,
                settings: None,
                format_clause: None,
                pipe_operators: Vec::new(),
            }));
            from_set = rewritten;
            &from_set
        } else {
            ins
        };
        let mut binder = Binder::new(self.catalog, self.session);
        let table = binder.table(name)?;
        let cols: Vec<usize> = if ins.columns.is_empty() {
            (0..table.columns.len()).collect()
        } else {
            let mut v = Vec::new();
            for c in &ins.columns {
                let n = split_name(c)?.1;
                let i = table.column_index(&n).ok_or_else(|| crate::binder::unknown_column(&n, "field list"))?;
                if v.contains(&i) {
                    return Err(Error::user(Code::FieldSpecifiedTwice, format!("Column '{n}' specified twice")));
                }
                v.push(i);
            }
            v
        };
        let empty = Scope::default();
        let no_subqueries: Arc<Vec<SubqueryPlan>> = Arc::new(Vec::new());
        let source = match ins.source.as_deref() {
            Some(q) => match q.body.as_ref() {
                ast::SetExpr::Values(values) => {
                    let mut rows = Vec::with_capacity(values.rows.len());
                    for r in &values.rows {
                        let r = &r.content;
                        if r.len() != cols.len() {
                            return Err(Error::user(
                                Code::WrongValueCount,
                                "Column count doesn't match value count at row 1",
                            ));
                        }
                        let mut row = Vec::with_capacity(r.len());
                        for e in r {
                            if is_default_keyword(e) {
                                row.push(None);
                            } else {
                                let bound = binder.expr(e, &empty)?;
                                let subs = binder.take_subqueries()?;
                                let subs = if subs.is_empty() { no_subqueries.clone() } else { subs };
                                row.push(Some((bound, subs)));
                            }
                        }
                        rows.push(row);
                    }
                    InsertSource::Values(rows)
                }
                _ => {
                    let query = binder.plan_query(q)?;
                    if query.columns.len() != cols.len() {
                        return Err(Error::user(
                            Code::WrongValueCount,
                            "Column count doesn't match value count at row 1",
                        ));
                    }
                    InsertSource::Query(Box::new(query))
                }
            },
            None => return Err(Error::parse("INSERT without values")),
        };
        // ON DUPLICATE KEY UPDATE assignments, bound over (old row ++ new row).
        let mut upsert: Vec<(usize, Expr)> = Vec::new();
        let mut upsert_subs = no_subqueries;
        if let Some(ast::OnInsert::DuplicateKeyUpdate(assigns)) = &ins.on {
            let mut scope = Binder::table_scope(&table, &table.name);
            for c in &table.columns {
                scope.columns.push(ScopeColumn {
                    table: "__new__".into(),
                    name: c.name.to_ascii_lowercase(),
                    meta: OutputColumn::default(),
                });
            }
            for a in assigns {
                let col = assignment_column(&table, a)?;
                upsert.push((col, binder.expr(&rewrite_values_fn(&a.value), &scope)?));
            }
            upsert_subs = binder.take_subqueries()?;
        } else if ins.on.is_some() {
            return Err(Error::unsupported("ON CONFLICT"));
        }
        let on_dup = if ins.replace_into {
            DupMode::Replace
        } else if !upsert.is_empty() {
            DupMode::Update
        } else if ins.ignore {
            DupMode::Ignore
        } else {
            DupMode::Error
        };
        let plan = InsertPlan { table, cols, source, upsert, upsert_subs, on_dup };
        Ok((plan, binder.uncacheable.take()))
    }

    /// Executes a bound INSERT.
    pub(crate) async fn run_insert(&self, txn: &mut Transaction, plan: &InsertPlan) -> Result<QueryResult> {
        let table = &plan.table;
        let cols = &plan.cols;
        // Source rows, as (column offset -> value or DEFAULT).
        let mut source: Vec<Vec<Option<Value>>> = Vec::new();
        match &plan.source {
            // Literal rows (`crate::bulk_insert`): the parameters are the rows' values.
            InsertSource::Values(rows) if self.session.value_rows.is_some() => {
                let width = self.session.value_rows.unwrap_or(0);
                let placeholders = rows.len() == 1
                    && rows[0].len() == width
                    && rows[0].iter().enumerate().all(|(i, c)| matches!(c, Some((Expr::Param(p), _)) if *p == i));
                if !placeholders || width == 0 || !self.params.len().is_multiple_of(width) {
                    return Err(Error::internal("literal rows of an INSERT that is not one row of placeholders"));
                }
                source.reserve(self.params.len() / width);
                for row in self.params.chunks_exact(width) {
                    source.push(row.iter().map(|v| Some(v.clone())).collect());
                }
            }
            InsertSource::Values(rows) => {
                source.reserve(rows.len());
                let mut ctx = ExecCtx::new(txn, self.params, Arc::new(Vec::new()));
                for r in rows {
                    let mut row = Vec::with_capacity(r.len());
                    for cell in r {
                        match cell {
                            None => row.push(None),
                            Some((bound, subs)) => {
                                if !Arc::ptr_eq(&ctx.subqueries, subs) {
                                    ctx.subqueries = subs.clone();
                                }
                                row.push(Some(ctx.eval(bound, &Vec::new()).await?));
                            }
                        }
                    }
                    source.push(row);
                }
            }
            InsertSource::Query(query) => {
                let mut ctx = ExecCtx::new(txn, self.params, query.subqueries.clone());
                for r in execute(&query.plan, &mut ctx).await? {
                    source.push(r.into_iter().map(Some).collect());
                }
            }
        }
        let on_dup = match plan.on_dup {
            DupMode::Error => OnDuplicate::Error,
            DupMode::Ignore => OnDuplicate::Ignore,
            DupMode::Replace => OnDuplicate::Replace,
            DupMode::Update => OnDuplicate::Update(&plan.upsert, plan.upsert_subs.clone()),
        };
        let mut first_auto: Option<u64> = None;
        let mut rows: Vec<(Row, Option<i64>)> = Vec::with_capacity(source.len());
        // The completed rows are held until they are stored: charged to the statement.
        let mut charge = crate::context::Charge::new();
        for mut src in source {
            let mut given: Vec<Option<Value>> = vec![None; table.columns.len()];
            for (p, c) in cols.iter().enumerate() {
                given[*c] = src[p].take();
            }
            let row = self.complete_row(txn, table, given, false, &mut first_auto).await?;
            charge.add_row(&row.0)?;
            rows.push(row);
        }
        let stored = self.store_rows(txn, table, rows, &on_dup).await?;
        Ok(QueryResult::Ok {
            affected: stored.affected,
            matched: stored.affected,
            last_insert_id: first_auto.unwrap_or(0),
            warnings: stored.warnings,
            info: String::new(),
        })
    }

    /// A full row to store from the values given for each column (None: the column's
    /// default), with AUTO_INCREMENT and generated columns filled and NOT NULL and CHECK
    /// constraints checked; and its row id when the table has no primary key.
    /// `coerced`: the given values already have the columns' types (LOAD DATA converts
    /// them as it reads). `first_auto` gets the first AUTO_INCREMENT value generated.
    pub(crate) async fn complete_row(
        &self,
        txn: &mut Transaction,
        table: &TableInfo,
        given: Vec<Option<Value>>,
        coerced: bool,
        first_auto: &mut Option<u64>,
    ) -> Result<(Row, Option<i64>)> {
        // The statement's NOW() for defaults, made when a column first needs one.
        let mut now: Option<Value> = None;
        let mut row: Row = Vec::with_capacity(table.columns.len());
        for (c, given) in table.columns.iter().zip(given) {
            let v = match given {
                Some(_) if c.generated.is_some() => return Err(generated_value_error(c, table)),
                None if c.generated.is_some() => Value::Null,
                Some(v) if coerced => v,
                Some(v) => c.coerce(v)?,
                None if c.auto_increment => Value::Null,
                None => default_value(c, now.get_or_insert_with(|| Value::DateTime(self.session.now())))?,
            };
            row.push(v);
        }
        if let Some(ac) = table.auto_increment_column() {
            let zero = row[ac].as_i64() == Some(0);
            if row[ac].is_null() || zero {
                let id = self.catalog.next_auto_id(table.id, false).await?;
                // Past the column type's maximum the sequence is used up.
                row[ac] = table.columns[ac]
                    .ty
                    .coerce(Value::Int(id), &table.columns[ac].name)
                    .map_err(|_| crate::catalog::auto_id_exhausted())?;
                first_auto.get_or_insert(id as u64);
            } else if let Some(v) = row[ac].as_i64() {
                self.catalog.rebase_auto_id(table.id, v).await?;
            }
        }
        fill_generated(self.catalog, self.session, txn, table, &mut row).await?;
        not_null_check(table, &row)?;
        self.check_constraints(txn, table, &row).await?;
        let row_id = if table.pk.is_none() { Some(self.catalog.next_auto_id(table.id, true).await?) } else { None };
        Ok((row, row_id))
    }

    /// Writes complete rows, locking (and reading) every key they may conflict on in one
    /// batch first; a row that conflicts on a unique key is handled as `on_dup` says.
    pub(crate) async fn store_rows(
        &self,
        txn: &mut Transaction,
        table: &TableInfo,
        rows: Vec<(Row, Option<i64>)>,
        on_dup: &OnDuplicate<'_>,
    ) -> Result<Stored> {
        let mut keys = Vec::new();
        let mut handles = Vec::with_capacity(rows.len());
        for (row, row_id) in &rows {
            let handle = handle_of(table, row, *row_id)?;
            if table.pk.is_some() {
                keys.push(row_key(table, &handle));
            }
            for idx in &table.indexes {
                if is_unique_entry(idx, row) {
                    keys.push(index_entry(table, idx, row, &handle).0);
                }
            }
            handles.push(handle);
        }
        let mut cache = KeyCache { known: HashMap::new() };
        keys.sort();
        // A plain INSERT that is its own transaction: its commit follows at once and its
        // prewrite checks the keys have no value (a duplicate fails it with 1062,
        // `Engine::commit_txn`), so they are neither locked nor read now.
        let presume = matches!(on_dup, OnDuplicate::Error) && txn.may_presume_absent();
        // No row can then conflict but with another of the statement's or with what the
        // transaction wrote before; with neither (or no unique keys at all: rows by hidden
        // id) every row is new and they go in without a lookup each.
        if keys.is_empty()
            || (presume && keys.windows(2).all(|w| w[0] != w[1]) && keys.iter().all(|k| txn.own_write(k).is_none()))
        {
            txn.presume_absent(keys);
            return Ok(store_new_rows(txn, table, rows, handles));
        }
        keys.dedup();
        if presume {
            txn.presume_absent(keys.iter().cloned());
            cache.known.extend(keys.into_iter().map(|k| (k, None)));
        } else {
            let vals = txn.lock_and_get(&keys).await?;
            cache.known.extend(keys.into_iter().zip(vals));
        }
        let mut out = Stored::default();
        for ((row, row_id), handle) in rows.into_iter().zip(handles) {
            let found = conflicts(&mut cache, txn, table, &row, &handle).await?;
            if found.is_empty() {
                write_row_at(&mut cache, txn, table, &row, row_id, &handle);
                out.affected += 1;
                continue;
            }
            match on_dup {
                OnDuplicate::Replace => {
                    for (_, _, old) in &found {
                        delete_row(&mut cache, txn, table, &old.row, old.row_id)?;
                        out.affected += 1;
                        out.deleted += 1;
                    }
                    write_row_at(&mut cache, txn, table, &row, row_id, &handle);
                    out.affected += 1;
                }
                OnDuplicate::Update(upsert, subs) => {
                    let (_, _, old) = &found[0];
                    let mut new_row = old.row.clone();
                    let mut ctx = ExecCtx::new(txn, self.params, subs.clone());
                    for (col, e) in upsert.iter() {
                        let mut input = new_row.clone();
                        input.extend(row.iter().cloned());
                        let v = ctx.eval(e, &input).await?;
                        new_row[*col] = table.columns[*col].coerce(v)?;
                    }
                    drop(ctx);
                    fill_generated(self.catalog, self.session, txn, table, &mut new_row).await?;
                    not_null_check(table, &new_row)?;
                    self.check_constraints(txn, table, &new_row).await?;
                    if rows_equal(&old.row, &new_row) {
                        continue;
                    }
                    update_row(&mut cache, txn, table, old, &new_row).await?;
                    out.affected += 2;
                }
                OnDuplicate::Ignore => {
                    let (name, cols, _) = &found[0];
                    if out.warnings.len() < crate::context::MAX_WARNINGS {
                        out.warnings.push((Code::DupEntry, dup_error(table, name, &row, cols).to_string()));
                    }
                    out.skipped += 1;
                }
                OnDuplicate::Error => {
                    let (name, cols, _) = &found[0];
                    return Err(dup_error(table, name, &row, cols));
                }
            }
        }
        Ok(out)
    }

    /// Single-table UPDATE.
    pub async fn update(&self, txn: &mut Transaction, up: &ast::Update) -> Result<QueryResult> {
        match self.plan_update(up)? {
            (Some(plan), _) => self.run_update(txn, &plan).await,
            (None, _) => self.update_multi(txn, up).await,
        }
    }

    /// Binds a single-table UPDATE (None for a multi-table one, which is bound as it runs),
    /// with the reason it must not be cached, if one.
    pub(crate) fn plan_update(&self, up: &ast::Update) -> Result<(Option<UpdatePlan>, Option<String>)> {
        if !up.table.joins.is_empty() || up.from.is_some() {
            return Ok((None, Some("multi-table UPDATE".into())));
        }
        let ast::TableFactor::Table { name, alias, .. } = &up.table.relation else {
            return Err(Error::unsupported("UPDATE of a derived table"));
        };
        let mut binder = Binder::new(self.catalog, self.session);
        let table = binder.table(name)?;
        let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(table.name.clone());
        let scope = Binder::table_scope(&table, &alias);
        let mut assigns = Vec::new();
        for a in &up.assignments {
            let col = assignment_column(&table, a)?;
            let e = if is_default_keyword(&a.value) {
                // The default of the moment (a CURRENT_TIMESTAMP column's is now).
                binder.uncacheable.get_or_insert_with(|| "UPDATE assigns DEFAULT".into());
                Expr::Literal(default_value(&table.columns[col], &Value::DateTime(self.session.now()))?)
            } else {
                binder.expr(&a.value, &scope)?
            };
            assigns.push((col, e));
        }
        let (access, filter, residual) = binder.dml_scan(&table, &scope, up.selection.as_ref())?;
        let (order, limit) = bind_order_limit(&mut binder, &scope, &up.order_by, up.limit.as_ref())?;
        let subs = binder.take_subqueries()?;
        let scan = RowsPlan { table, access, filter, residual, order, limit, subs };
        Ok((Some(UpdatePlan { scan, assigns }), binder.uncacheable.take()))
    }

    /// Executes a bound single-table UPDATE.
    pub(crate) async fn run_update(&self, txn: &mut Transaction, plan: &UpdatePlan) -> Result<QueryResult> {
        let (table, assigns) = (&plan.scan.table, &plan.assigns);
        let mut ctx = ExecCtx::new(txn, self.params, plan.scan.subs.clone());
        let rows = plan.scan.select(&mut ctx).await?;
        let mut new_rows = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut new_row = r.row.clone();
            for (col, e) in assigns {
                let v = ctx.eval(e, &new_row).await?;
                new_row[*col] = table.columns[*col].coerce(v)?;
            }
            new_rows.push(new_row);
        }
        drop(ctx);
        let mut cache = KeyCache { known: HashMap::new() };
        let mut matched = 0u64;
        let mut changed = 0u64;
        for (old, new_row) in rows.into_iter().zip(new_rows) {
            matched += 1;
            let assigned = |i: usize| assigns.iter().any(|(a, _)| *a == i);
            changed += u64::from(self.write_update(&mut cache, txn, table, &old, new_row, assigned).await?);
        }
        Ok(update_result(matched, changed))
    }

    /// Single-table DELETE.
    pub async fn delete(&self, txn: &mut Transaction, del: &ast::Delete) -> Result<QueryResult> {
        match self.plan_delete(del)? {
            (Some(plan), _) => self.run_delete(txn, &plan).await,
            (None, _) => self.delete_multi(txn, del).await,
        }
    }

    /// Binds a single-table DELETE (None for a multi-table one, which is bound as it runs),
    /// with the reason it must not be cached, if one.
    pub(crate) fn plan_delete(&self, del: &ast::Delete) -> Result<(Option<RowsPlan>, Option<String>)> {
        let from = match &del.from {
            ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
        };
        if from.len() != 1 || !from[0].joins.is_empty() || !del.tables.is_empty() || del.using.is_some() {
            return Ok((None, Some("multi-table DELETE".into())));
        }
        let ast::TableFactor::Table { name, alias, .. } = &from[0].relation else {
            return Err(Error::unsupported("DELETE from a derived table"));
        };
        let mut binder = Binder::new(self.catalog, self.session);
        let table = binder.table(name)?;
        let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(table.name.clone());
        let scope = Binder::table_scope(&table, &alias);
        let (access, filter, residual) = binder.dml_scan(&table, &scope, del.selection.as_ref())?;
        let (order, limit) = bind_order_limit(&mut binder, &scope, &del.order_by, del.limit.as_ref())?;
        let subs = binder.take_subqueries()?;
        let plan = RowsPlan { table, access, filter, residual, order, limit, subs };
        Ok((Some(plan), binder.uncacheable.take()))
    }

    /// Executes a bound single-table DELETE.
    pub(crate) async fn run_delete(&self, txn: &mut Transaction, plan: &RowsPlan) -> Result<QueryResult> {
        let mut ctx = ExecCtx::new(txn, self.params, plan.subs.clone());
        let rows = plan.select(&mut ctx).await?;
        drop(ctx);
        let mut cache = KeyCache { known: HashMap::new() };
        for r in &rows {
            delete_row(&mut cache, txn, &plan.table, &r.row, r.row_id)?;
        }
        Ok(QueryResult::ok(rows.len() as u64))
    }
}

/// A table a multi-table UPDATE or DELETE writes: where its columns sit in the joined row.
struct Target {
    table: Arc<TableInfo>,
    offset: usize,
    /// Handles already written (a row joined several times is changed once, by its first match).
    done: std::collections::HashSet<Vec<u8>>,
}

impl Target {
    /// The target row inside a joined row, or None when a LEFT JOIN left it NULL or the row
    /// was handled already.
    fn take(&mut self, joined: &Row) -> Result<Option<TableRow>> {
        let width = self.table.columns.len();
        let row: Row = joined[self.offset..self.offset + width].to_vec();
        if let Some(pk) = &self.table.pk {
            if pk.iter().any(|c| row[*c].is_null()) {
                return Ok(None);
            }
        }
        let handle = handle_of(&self.table, &row, None)?;
        let key = row_key(&self.table, &handle);
        if !self.done.insert(key.clone()) {
            return Ok(None);
        }
        Ok(Some(TableRow { key, row, row_id: None }))
    }
}

/// Finds the FROM relation named `name` (alias or table name) as a writable target.
fn target_of(
    rels: &[crate::binder::DmlRelation],
    scope: &Scope,
    name: &str,
    stmt: &str,
) -> Result<(usize, Arc<TableInfo>)> {
    let lname = name.to_ascii_lowercase();
    for (off, table) in rels {
        if scope.columns.get(*off).is_some_and(|c| c.table == lname) {
            return match table {
                // Rows of a table without a primary key are found by a hidden row id, which
                // the join does not carry.
                Some(t) if t.pk.is_some() => Ok((*off, t.clone())),
                Some(t) => {
                    Err(Error::unsupported(format!("multi-table {stmt} of table '{}' without a primary key", t.name)))
                }
                None => Err(Error::user(
                    Code::NonUpdatableTable,
                    format!("The target table {name} of the {stmt} is not updatable"),
                )),
            };
        }
    }
    Err(Error::user(Code::UnknownTable, format!("Unknown table '{name}' in MULTI DELETE")))
}

impl DmlCtx<'_> {
    /// UPDATE of several joined tables (`UPDATE a JOIN b ON .. SET a.x = b.y`, `UPDATE a, b SET ..`).
    async fn update_multi(&self, txn: &mut Transaction, up: &ast::Update) -> Result<QueryResult> {
        if !up.order_by.is_empty() || up.limit.is_some() {
            return Err(Error::user(Code::WrongUsage, "Incorrect usage of UPDATE and ORDER BY/LIMIT"));
        }
        let mut from = vec![up.table.clone()];
        match &up.from {
            Some(ast::UpdateTableFromKind::BeforeSet(f)) | Some(ast::UpdateTableFromKind::AfterSet(f)) => {
                from.extend(f.iter().cloned())
            }
            None => {}
        }
        let mut binder = Binder::new(self.catalog, self.session);
        let (plan, scope, rels) = binder.dml_join(&from, up.selection.as_ref())?;
        // Each assignment: (target index, column in that table, position in the joined row, value).
        let mut targets: Vec<Target> = Vec::new();
        let mut assigns: Vec<(usize, usize, usize, Expr)> = Vec::new();
        for a in &up.assignments {
            let parts: Vec<String> = match &a.target {
                ast::AssignmentTarget::ColumnName(n) => {
                    n.0.iter().map(|p| p.as_ident().map(|i| i.value.clone()).unwrap_or_else(|| p.to_string())).collect()
                }
                ast::AssignmentTarget::Tuple(_) => return Err(Error::unsupported("tuple assignment")),
            };
            let Expr::Column(pos) = binder.expr(&column_ref(&parts), &scope)? else {
                return Err(Error::unsupported("assignment target"));
            };
            let rel = rels.iter().rposition(|(off, _)| *off <= pos).unwrap_or(0);
            let alias = scope.columns[rels[rel].0].table.clone();
            let (off, table) = target_of(&rels, &scope, &alias, "UPDATE")?;
            let t = match targets.iter().position(|t| t.offset == off) {
                Some(t) => t,
                None => {
                    targets.push(Target { table, offset: off, done: Default::default() });
                    targets.len() - 1
                }
            };
            let col = pos - off;
            let value = if is_default_keyword(&a.value) {
                let c = &targets[t].table.columns[col];
                Expr::Literal(default_value(c, &Value::DateTime(self.session.now()))?)
            } else {
                binder.expr(&a.value, &scope)?
            };
            assigns.push((t, col, pos, value));
        }
        let subs = binder.take_subqueries()?;
        let mut ctx = ExecCtx::new(txn, self.params, subs);
        let joined = execute(&plan, &mut ctx).await?;
        // New values are computed from the joined rows before anything is written; MySQL
        // applies assignments left to right, later ones seeing earlier results.
        let mut changes: Vec<(usize, TableRow, Row)> = Vec::new();
        for mut row in joined {
            let olds: Vec<Option<TableRow>> = targets.iter_mut().map(|t| t.take(&row)).collect::<Result<_>>()?;
            for (t, col, pos, e) in &assigns {
                if olds[*t].is_none() {
                    continue;
                }
                let c = &targets[*t].table.columns[*col];
                let v = ctx.eval(e, &row).await?;
                row[*pos] = c.coerce(v)?;
            }
            for (t, old) in olds.into_iter().enumerate() {
                if let Some(old) = old {
                    let off = targets[t].offset;
                    let new_row = row[off..off + targets[t].table.columns.len()].to_vec();
                    changes.push((t, old, new_row));
                }
            }
        }
        drop(ctx);
        let mut cache = KeyCache { known: HashMap::new() };
        let mut matched = 0u64;
        let mut changed = 0u64;
        for (t, old, new_row) in changes {
            matched += 1;
            let assigned = |i: usize| assigns.iter().any(|(at, ac, _, _)| *at == t && *ac == i);
            let table = targets[t].table.clone();
            changed += u64::from(self.write_update(&mut cache, txn, &table, &old, new_row, assigned).await?);
        }
        Ok(update_result(matched, changed))
    }

    /// DELETE from several joined tables (`DELETE a, b FROM a JOIN b ..`,
    /// `DELETE FROM a USING a JOIN b ..`).
    async fn delete_multi(&self, txn: &mut Transaction, del: &ast::Delete) -> Result<QueryResult> {
        if !del.order_by.is_empty() || del.limit.is_some() {
            return Err(Error::user(Code::WrongUsage, "Incorrect usage of DELETE and ORDER BY/LIMIT"));
        }
        let from_list = match &del.from {
            ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
        };
        // `DELETE t1, t2 FROM <join>` names targets before FROM; `DELETE FROM t1, t2 USING <join>`
        // names them in FROM.
        let (names, from): (Vec<String>, &[ast::TableWithJoins]) = match &del.using {
            Some(using) => {
                let mut names = Vec::new();
                for twj in from_list {
                    let ast::TableFactor::Table { name, .. } = &twj.relation else {
                        return Err(Error::unsupported("DELETE target"));
                    };
                    names.push(split_name(name)?.1);
                }
                (names, using.as_slice())
            }
            None if !del.tables.is_empty() => {
                (del.tables.iter().map(|n| split_name(n).map(|x| x.1)).collect::<Result<_>>()?, from_list.as_slice())
            }
            None => {
                // `DELETE FROM a JOIN b ...` is not MySQL syntax; the first table is the target.
                let ast::TableFactor::Table { name, alias, .. } = &from_list[0].relation else {
                    return Err(Error::unsupported("DELETE from a derived table"));
                };
                let n = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(split_name(name)?.1);
                (vec![n], from_list.as_slice())
            }
        };
        let mut binder = Binder::new(self.catalog, self.session);
        let (plan, scope, rels) = binder.dml_join(from, del.selection.as_ref())?;
        let mut targets = Vec::new();
        for n in &names {
            let (offset, table) = target_of(&rels, &scope, n, "DELETE")?;
            if !targets.iter().any(|t: &Target| t.offset == offset) {
                targets.push(Target { table, offset, done: Default::default() });
            }
        }
        let subs = binder.take_subqueries()?;
        let mut ctx = ExecCtx::new(txn, self.params, subs);
        let joined = execute(&plan, &mut ctx).await?;
        drop(ctx);
        let mut cache = KeyCache { known: HashMap::new() };
        let mut deleted = 0u64;
        for row in &joined {
            for t in targets.iter_mut() {
                if let Some(old) = t.take(row)? {
                    delete_row(&mut cache, txn, &t.table, &old.row, None)?;
                    deleted += 1;
                }
            }
        }
        Ok(QueryResult::ok(deleted))
    }
}

impl DmlCtx<'_> {
    /// Writes one updated row unless it is unchanged (returns whether it changed): columns
    /// with ON UPDATE CURRENT_TIMESTAMP that the statement did not assign get the statement
    /// time, NOT NULL is checked, and index entries follow the row.
    async fn write_update(
        &self,
        cache: &mut KeyCache,
        txn: &mut Transaction,
        table: &TableInfo,
        old: &TableRow,
        mut new_row: Row,
        assigned: impl Fn(usize) -> bool,
    ) -> Result<bool> {
        if rows_equal(&old.row, &new_row) {
            return Ok(false);
        }
        let now = Value::DateTime(self.session.now());
        for (i, c) in table.columns.iter().enumerate() {
            if c.on_update_now && !assigned(i) {
                new_row[i] = c.coerce(now.clone())?;
            }
        }
        fill_generated(self.catalog, self.session, txn, table, &mut new_row).await?;
        not_null_check(table, &new_row)?;
        self.check_constraints(txn, table, &new_row).await?;
        update_row(cache, txn, table, old, &new_row).await?;
        Ok(true)
    }

    /// Fails with 3819 when an enforced CHECK constraint of `table` is false for `row`
    /// (NULL passes, as in MySQL).
    async fn check_constraints(&self, txn: &mut Transaction, table: &TableInfo, row: &Row) -> Result<()> {
        if table.checks.is_empty() {
            return Ok(());
        }
        let table = Arc::new(table.clone());
        let scope = Binder::table_scope(&table, &table.name);
        let mut binder = Binder::new(self.catalog, self.session);
        let dialect = crate::dialect::StrataDialect::default();
        for c in table.checks.iter().filter(|c| c.enforced) {
            let parsed = sqlparser::parser::Parser::new(&dialect)
                .try_with_sql(&c.expr)
                .and_then(|mut p| p.parse_expr())
                .map_err(|e| Error::internal(format!("check constraint '{}': {e}", c.name)))?;
            let bound = binder.expr(&parsed, &scope)?;
            let mut ctx = ExecCtx::new(txn, self.params, Default::default());
            if ctx.eval(&bound, row).await?.as_bool() == Some(false) {
                return Err(Error::user(
                    Code::CheckConstraintViolated,
                    format!("Check constraint '{}' is violated.", c.name),
                ));
            }
        }
        Ok(())
    }
}

/// The OK of an UPDATE.
fn update_result(matched: u64, changed: u64) -> QueryResult {
    QueryResult::Ok {
        affected: changed,
        matched,
        last_insert_id: 0,
        warnings: Vec::new(),
        info: format!("Rows matched: {matched}  Changed: {changed}  Warnings: 0"),
    }
}

/// An identifier expression for a (possibly qualified) column name.
fn column_ref(parts: &[String]) -> ast::Expr {
    match parts {
        [one] => ast::Expr::Identifier(ast::Ident::new(one)),
        _ => ast::Expr::CompoundIdentifier(parts.iter().map(ast::Ident::new).collect()),
    }
}

/// Sort keys: expression and whether it is descending.
type SortKeys = Vec<(Expr, bool)>;

/// Binds the ORDER BY and LIMIT of a single-table UPDATE or DELETE.
fn bind_order_limit(
    binder: &mut Binder,
    scope: &Scope,
    order_by: &[ast::OrderByExpr],
    limit: Option<&ast::Expr>,
) -> Result<(SortKeys, Option<Expr>)> {
    let order = order_by
        .iter()
        .map(|o| Ok((binder.expr(&o.expr, scope)?, matches!(o.options.sort, Some(ast::OrderBySort::Desc)))))
        .collect::<Result<_>>()?;
    let limit = limit.map(|l| binder.expr(l, &Scope::default())).transpose()?;
    Ok((order, limit))
}

fn rows_equal(a: &Row, b: &Row) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|(x, y)| match (x, y) {
            (Value::Null, Value::Null) => true,
            (Value::Null, _) | (_, Value::Null) => false,
            (Value::Bytes(p), Value::Bytes(q)) => p == q,
            // Same type: equal exactly when the values are (no text to build).
            (Value::Int(p), Value::Int(q)) | (Value::Time(p), Value::Time(q)) => p == q,
            (Value::UInt(p), Value::UInt(q)) => p == q,
            (Value::Date(p), Value::Date(q)) | (Value::DateTime(p), Value::DateTime(q)) => p == q,
            // The same digits and scale show the same; 1.0 against 1.00 goes the long way.
            (Value::Decimal(p), Value::Decimal(q)) if p.serialize() == q.serialize() => true,
            _ => x.sql_cmp(y) == Some(std::cmp::Ordering::Equal) && x.to_display() == y.to_display(),
        })
}

async fn update_row(
    cache: &mut KeyCache,
    txn: &mut Transaction,
    table: &TableInfo,
    old: &TableRow,
    new_row: &Row,
) -> Result<()> {
    let old_handle = handle_of(table, &old.row, old.row_id)?;
    let new_handle = handle_of(table, new_row, old.row_id)?;
    if new_handle != old_handle {
        let nk = row_key(table, &new_handle);
        if cache.get(txn, &nk).await?.is_some() {
            return Err(dup_error(table, "PRIMARY", new_row, table.pk.as_deref().unwrap_or(&[])));
        }
        cache.delete(txn, row_key(table, &old_handle));
    }
    for idx in &table.indexes {
        let (ok, ov) = index_entry(table, idx, &old.row, &old_handle);
        let (nk, nv) = index_entry(table, idx, new_row, &new_handle);
        if ok == nk && ov == nv {
            continue;
        }
        if ok != nk {
            if is_unique_entry(idx, new_row) {
                if let Some(h) = cache.get(txn, &nk).await? {
                    if h != new_handle {
                        return Err(dup_error(table, &idx.name, new_row, &idx.columns));
                    }
                }
            }
            cache.delete(txn, ok);
        }
        cache.put(txn, nk, nv);
    }
    cache.put(txn, row_key(table, &new_handle), encode_row(table, new_row, old.row_id));
    Ok(())
}

/// Rows an UPDATE/DELETE acts on: locked (current read), filtered, ordered and limited.
async fn select_rows(
    ctx: &mut ExecCtx<'_>,
    table: &Arc<TableInfo>,
    access: &crate::plan::Access,
    filter: Option<&Expr>,
    residual: Option<&Expr>,
    order: &[(Expr, bool)],
    limit: Option<&Expr>,
) -> Result<Vec<TableRow>> {
    let (mut rows, _held) = scan(ctx, table, access, filter, true).await?;
    if let Some(r) = residual {
        let mut kept = Vec::with_capacity(rows.len());
        for row in rows {
            if ctx.eval(r, &row.row).await?.as_bool() == Some(true) {
                kept.push(row);
            }
        }
        rows = kept;
    }
    if !order.is_empty() {
        rows = sort_by_keys(ctx, rows, order, |r| &r.row).await?;
    }
    if let Some(l) = limit {
        let n = ctx.eval_const(l)?.as_i64().unwrap_or(0).max(0) as usize;
        rows.truncate(n);
    }
    Ok(rows)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Value {
        Value::Decimal(s.parse().expect("decimal"))
    }

    #[test]
    fn rows_are_equal_when_every_value_shows_the_same() {
        let row = vec![Value::Int(7), Value::UInt(8), dec("1.50"), Value::str("x"), Value::Null, Value::Time(5)];
        assert!(rows_equal(&row, &row.clone()));
        let changed = |i: usize, v: Value| {
            let mut r = row.clone();
            r[i] = v;
            r
        };
        assert!(!rows_equal(&row, &changed(0, Value::Int(6))));
        assert!(!rows_equal(&row, &changed(1, Value::UInt(9))));
        assert!(!rows_equal(&row, &changed(2, dec("1.51"))));
        // Equal numbers written differently change what the row shows.
        assert!(!rows_equal(&row, &changed(2, dec("1.5"))));
        assert!(!rows_equal(&row, &changed(3, Value::str("X"))));
        assert!(!rows_equal(&row, &changed(4, Value::Int(0))));
        assert!(!rows_equal(&row, &changed(5, Value::Time(6))));
        // Another type holding the same value: compared as values and as text.
        assert!(rows_equal(&row, &changed(0, Value::UInt(7))));
    }
}
