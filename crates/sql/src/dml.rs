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
use crate::plan::OutputColumn;
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

/// Values of keys this statement has read or written (latest committed or our own).
struct KeyCache {
    known: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

impl KeyCache {
    async fn get(&mut self, txn: &mut Transaction, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.known.get(key) {
            return Ok(v.clone());
        }
        let v = txn.lock_and_get(&[key.to_vec()]).await?.into_iter().next().flatten();
        self.known.insert(key.to_vec(), v.clone());
        Ok(v)
    }

    fn put(&mut self, txn: &mut Transaction, key: Vec<u8>, value: Vec<u8>) {
        self.known.insert(key.clone(), Some(value.clone()));
        txn.put(key, value);
    }

    fn delete(&mut self, txn: &mut Transaction, key: Vec<u8>) {
        self.known.insert(key.clone(), None);
        txn.delete(key);
    }
}

fn dup_error(table: &TableInfo, key_name: &str, row: &Row, cols: &[usize]) -> Error {
    let vals: Vec<String> = cols.iter().map(|c| row[*c].to_display()).collect();
    Error::user(Code::DupEntry, format!("Duplicate entry '{}' for key '{}.{}'", vals.join("-"), table.name, key_name))
}

fn write_row(
    cache: &mut KeyCache,
    txn: &mut Transaction,
    table: &TableInfo,
    row: &Row,
    row_id: Option<i64>,
) -> Result<()> {
    let handle = handle_of(table, row, row_id)?;
    cache.put(txn, row_key(table, &handle), encode_row(table, row, row_id));
    for idx in &table.indexes {
        let (k, v) = index_entry(table, idx, row, &handle);
        cache.put(txn, k, v);
    }
    Ok(())
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

/// Finds rows that conflict with `row` on the primary key or a unique index.
async fn conflicts(
    cache: &mut KeyCache,
    txn: &mut Transaction,
    table: &TableInfo,
    row: &Row,
    row_id: Option<i64>,
) -> Result<Vec<(String, Vec<usize>, TableRow)>> {
    let mut out: Vec<(String, Vec<usize>, TableRow)> = Vec::new();
    let handle = handle_of(table, row, row_id)?;
    if table.pk.is_some() {
        let k = row_key(table, &handle);
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
        let (k, _) = index_entry(table, idx, row, &handle);
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

fn is_default_keyword(e: &ast::Expr) -> bool {
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

fn assignment_column(table: &TableInfo, a: &ast::Assignment) -> Result<usize> {
    let name = match &a.target {
        ast::AssignmentTarget::ColumnName(n) => n.0.last().map(|p| p.to_string()).unwrap_or_default(),
        ast::AssignmentTarget::Tuple(_) => return Err(Error::unsupported("tuple assignment")),
    };
    let name = name.trim_matches('`').to_string();
    table.column_index(&name).ok_or_else(|| crate::binder::unknown_column(&name, "field list"))
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
        let ast::TableObject::TableName(name) = &ins.table else {
            return Err(Error::unsupported("INSERT INTO TABLE FUNCTION"));
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
        // Source rows, as (column offset -> value or DEFAULT).
        let mut source: Vec<Vec<Option<Value>>> = Vec::new();
        let empty = Scope::default();
        match ins.source.as_deref() {
            Some(q) => match q.body.as_ref() {
                ast::SetExpr::Values(values) => {
                    let mut ctx = ExecCtx::new(txn, self.params, Arc::new(Vec::new()));
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
                                let subs = binder.take_subqueries();
                                ctx.subqueries = subs;
                                row.push(Some(ctx.eval(&bound, &Vec::new()).await?));
                            }
                        }
                        source.push(row);
                    }
                }
                _ => {
                    let query = binder.plan_query(q)?;
                    if query.columns.len() != cols.len() {
                        return Err(Error::user(
                            Code::WrongValueCount,
                            "Column count doesn't match value count at row 1",
                        ));
                    }
                    let mut ctx = ExecCtx::new(txn, self.params, query.subqueries.clone());
                    for r in execute(&query.plan, &mut ctx).await? {
                        source.push(r.into_iter().map(Some).collect());
                    }
                }
            },
            None => {
                if ins.assignments.is_empty() {
                    return Err(Error::parse("INSERT without values"));
                }
                return Err(Error::unsupported("INSERT ... SET"));
            }
        }
        // ON DUPLICATE KEY UPDATE assignments, bound over (old row ++ new row).
        let mut upsert: Vec<(usize, Expr)> = Vec::new();
        let mut upsert_subs = Arc::new(Vec::new());
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
            upsert_subs = binder.take_subqueries();
        } else if ins.on.is_some() {
            return Err(Error::unsupported("ON CONFLICT"));
        }
        let replace = ins.replace_into;
        let ignore = ins.ignore;
        let now = Value::DateTime(self.session.now);
        let auto_col = table.auto_increment_column();
        let mut first_auto: Option<u64> = None;
        let mut affected = 0u64;
        let mut warnings = Vec::new();
        // Build full rows first.
        let mut rows: Vec<(Row, Option<i64>)> = Vec::with_capacity(source.len());
        for src in source {
            let mut row: Row = Vec::with_capacity(table.columns.len());
            for (i, c) in table.columns.iter().enumerate() {
                let given = cols.iter().position(|x| *x == i).and_then(|p| src[p].clone());
                let v = match given {
                    Some(v) => c.ty.coerce(v, &c.name)?,
                    None if c.auto_increment => Value::Null,
                    None => default_value(c, &now)?,
                };
                row.push(v);
            }
            if let Some(ac) = auto_col {
                let zero = row[ac].as_i64() == Some(0);
                if row[ac].is_null() || zero {
                    let id = self.catalog.next_auto_id(table.id, false).await?;
                    row[ac] = table.columns[ac].ty.coerce(Value::Int(id), &table.columns[ac].name)?;
                    first_auto.get_or_insert(id as u64);
                } else if let Some(v) = row[ac].as_i64() {
                    self.catalog.rebase_auto_id(table.id, v).await?;
                }
            }
            not_null_check(&table, &row)?;
            let row_id = if table.pk.is_none() { Some(self.catalog.next_auto_id(table.id, true).await?) } else { None };
            rows.push((row, row_id));
        }
        // Lock/read every key the rows may conflict on, in one batch.
        let mut keys = Vec::new();
        for (row, row_id) in &rows {
            let handle = handle_of(&table, row, *row_id)?;
            if table.pk.is_some() {
                keys.push(row_key(&table, &handle));
            }
            for idx in &table.indexes {
                if is_unique_entry(idx, row) {
                    keys.push(index_entry(&table, idx, row, &handle).0);
                }
            }
        }
        let mut cache = KeyCache { known: HashMap::new() };
        if !keys.is_empty() {
            keys.sort();
            keys.dedup();
            let vals = txn.lock_and_get(&keys).await?;
            cache.known.extend(keys.into_iter().zip(vals));
        }
        for (row, row_id) in rows {
            let found = conflicts(&mut cache, txn, &table, &row, row_id).await?;
            if found.is_empty() {
                write_row(&mut cache, txn, &table, &row, row_id)?;
                affected += 1;
                continue;
            }
            if replace {
                for (_, _, old) in &found {
                    delete_row(&mut cache, txn, &table, &old.row, old.row_id)?;
                    affected += 1;
                }
                write_row(&mut cache, txn, &table, &row, row_id)?;
                affected += 1;
            } else if !upsert.is_empty() {
                let (_, _, old) = &found[0];
                let mut combined = old.row.clone();
                combined.extend(row.iter().cloned());
                let mut new_row = old.row.clone();
                let mut ctx = ExecCtx::new(txn, self.params, upsert_subs.clone());
                for (col, e) in &upsert {
                    let mut input = new_row.clone();
                    input.extend(row.iter().cloned());
                    let v = ctx.eval(e, &input).await?;
                    new_row[*col] = table.columns[*col].ty.coerce(v, &table.columns[*col].name)?;
                }
                drop(ctx);
                not_null_check(&table, &new_row)?;
                if rows_equal(&old.row, &new_row) {
                    continue;
                }
                update_row(&mut cache, txn, &table, old, &new_row).await?;
                affected += 2;
            } else if ignore {
                let (name, cols, _) = &found[0];
                warnings.push((Code::DupEntry, dup_error(&table, name, &row, cols).to_string()));
            } else {
                let (name, cols, _) = &found[0];
                return Err(dup_error(&table, name, &row, cols));
            }
        }
        Ok(QueryResult::Ok {
            affected,
            matched: affected,
            last_insert_id: first_auto.unwrap_or(0),
            warnings,
            info: String::new(),
        })
    }

    /// Single-table UPDATE.
    pub async fn update(&self, txn: &mut Transaction, up: &ast::Update) -> Result<QueryResult> {
        if !up.table.joins.is_empty() || up.from.is_some() {
            return Err(Error::unsupported("multi-table UPDATE"));
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
                Expr::Literal(default_value(&table.columns[col], &Value::DateTime(self.session.now))?)
            } else {
                binder.expr(&a.value, &scope)?
            };
            assigns.push((col, e));
        }
        let (access, filter, residual) = binder.dml_scan(&table, &scope, up.selection.as_ref())?;
        let (order, limit) = bind_order_limit(&mut binder, &scope, &up.order_by, up.limit.as_ref())?;
        let subs = binder.take_subqueries();
        let mut ctx = ExecCtx::new(txn, self.params, subs);
        let rows =
            select_rows(&mut ctx, &table, &access, filter.as_ref(), residual.as_ref(), &order, limit.as_ref()).await?;
        let mut new_rows = Vec::with_capacity(rows.len());
        for r in &rows {
            let mut new_row = r.row.clone();
            for (col, e) in &assigns {
                let v = ctx.eval(e, &new_row).await?;
                new_row[*col] = table.columns[*col].ty.coerce(v, &table.columns[*col].name)?;
            }
            new_rows.push(new_row);
        }
        drop(ctx);
        let mut cache = KeyCache { known: HashMap::new() };
        let (mut matched, mut changed) = (0u64, 0u64);
        let now = Value::DateTime(self.session.now);
        for (old, mut new_row) in rows.into_iter().zip(new_rows) {
            matched += 1;
            if rows_equal(&old.row, &new_row) {
                continue;
            }
            for (i, c) in table.columns.iter().enumerate() {
                if c.on_update_now && !assigns.iter().any(|(a, _)| *a == i) {
                    new_row[i] = c.ty.coerce(now.clone(), &c.name)?;
                }
            }
            not_null_check(&table, &new_row)?;
            update_row(&mut cache, txn, &table, &old, &new_row).await?;
            changed += 1;
        }
        Ok(QueryResult::Ok {
            affected: changed,
            matched,
            last_insert_id: 0,
            warnings: Vec::new(),
            info: format!("Rows matched: {matched}  Changed: {changed}  Warnings: 0"),
        })
    }

    /// Single-table DELETE.
    pub async fn delete(&self, txn: &mut Transaction, del: &ast::Delete) -> Result<QueryResult> {
        let from = match &del.from {
            ast::FromTable::WithFromKeyword(f) | ast::FromTable::WithoutKeyword(f) => f,
        };
        if from.len() != 1 || !from[0].joins.is_empty() || !del.tables.is_empty() || del.using.is_some() {
            return Err(Error::unsupported("multi-table DELETE"));
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
        let subs = binder.take_subqueries();
        let mut ctx = ExecCtx::new(txn, self.params, subs);
        let rows =
            select_rows(&mut ctx, &table, &access, filter.as_ref(), residual.as_ref(), &order, limit.as_ref()).await?;
        drop(ctx);
        let mut cache = KeyCache { known: HashMap::new() };
        for r in &rows {
            delete_row(&mut cache, txn, &table, &r.row, r.row_id)?;
        }
        Ok(QueryResult::ok(rows.len() as u64))
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
    let mut rows = scan(ctx, table, access, filter, true).await?;
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
