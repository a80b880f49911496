//! The binder: turns a parsed query into a logical plan (`crate::logical`), resolving names
//! against the catalog with MySQL's rules and typing every expression. It does not choose
//! how tables are read: `plan_query` runs the rules (`crate::rules`) over the logical plan
//! and hands it to physical planning (`crate::physical`), which picks access paths and join
//! algorithms.

use std::sync::Arc;

use sqlparser::ast;
use strata_common::time::DateTime;
use strata_common::{Code, Error, Result, Value};

use crate::catalog::{Catalog, TableInfo, ViewInfo};
use crate::expr::{
    number_literal, AggCall, AggFunc, BinOp, CastType, Expr, Frame, FrameBound, SubqueryKind, UnaryOp, WindowCall,
    WindowFunc,
};
use crate::functions::{is_aggregate, is_session_function};
use crate::logical::{JoinInput, LogicalPlan, LogicalSubquery};
use crate::plan::{Access, JoinKind, OutputColumn, Plan, Query, SubqueryPlan};
use crate::types::ColumnType;
use crate::typing::SqlType;

/// A FROM relation of a multi-table UPDATE/DELETE: its first column in the joined row and
/// its base table (None for a derived table).
pub type DmlRelation = (usize, Option<Arc<TableInfo>>);

/// What the binder needs from the session.
#[derive(Clone, Debug, Default)]
pub struct SessionInfo {
    /// Current database.
    pub db: Option<String>,
    /// When the statement started, in microseconds since the Unix epoch: its NOW() is
    /// that second (`now`), worked out only by the statements that ask.
    pub now_us: i64,
    /// LAST_INSERT_ID().
    pub last_insert_id: u64,
    /// CONNECTION_ID().
    pub connection_id: u32,
    /// CURRENT_USER(): `user@account host pattern`.
    pub user: Arc<str>,
    /// USER(): `user@client host`.
    pub client_user: Arc<str>,
    /// FOUND_ROWS() / ROW_COUNT() are not tracked; they read as these.
    pub row_count: i64,
    /// System variables visible to the session (session values over global defaults).
    pub vars: Arc<std::collections::BTreeMap<String, Value>>,
    /// `tidb_isolation_read_engines` as parsed (None: a value that does not parse).
    pub read_engines: Option<crate::column::ReadEngines>,
    /// `tidb_default_string_match_selectivity`.
    pub like_share: f64,
    /// `sql_select_limit`: the most rows a top-level SELECT without a LIMIT returns (None:
    /// no cap).
    pub select_limit: Option<usize>,
    /// User variables (`@name`).
    pub user_vars: Arc<std::collections::HashMap<String, Value>>,
    /// The server state information_schema shows beyond the catalog (connections,
    /// accounts), as this session may see it.
    pub live: Option<Arc<dyn LiveTables>>,
    /// The schema the statement's transaction was started under (None: the newest).
    pub schema: Option<Arc<crate::catalog::Schema>>,
    /// The server's global system variable values (`@@global.x`, global-only variables).
    pub globals: Arc<std::collections::BTreeMap<String, Value>>,
    /// Where planning records the optimizer trace, when `optimizer_trace` is enabled.
    pub optimizer_trace: Option<Arc<crate::optimizer_trace::OptimizerTrace>>,
    /// The prepared plan cache, when the statement is an execution of a prepared query.
    pub plan_cache: Option<PlanCacheSlot>,
    /// Where the statement adds the time it spends planning (nanoseconds; the compile phase
    /// of `crate::metrics`).
    pub compile_nanos: Arc<std::sync::atomic::AtomicU64>,
    /// Set for an INSERT of literal rows (`crate::bulk_insert`): the statement's one VALUES
    /// row is this many placeholders, and its parameters are the rows, one after another.
    pub value_rows: Option<usize>,
}

impl SessionInfo {
    /// The statement's NOW(): the second it started.
    pub fn now(&self) -> DateTime {
        crate::session::datetime_at(self.now_us)
    }
}

/// An execution's place in the session's plan cache (`crate::plan_cache`).
#[derive(Clone)]
pub struct PlanCacheSlot {
    /// The session's cache.
    pub cache: Arc<parking_lot::Mutex<crate::plan_cache::PlanCache>>,
    /// The execution's key.
    pub key: crate::plan_cache::PlanKey,
    /// The version of the schema the statement binds against.
    pub schema_version: u64,
    /// `tidb_prepared_plan_cache_size`.
    pub capacity: usize,
    /// Set when the plan came from the cache.
    pub hit: Arc<std::sync::atomic::AtomicBool>,
    /// Set for a text statement run through the non-prepared plan cache
    /// (`crate::text_plan`): a plan that must not be cached is not warned about.
    pub text: bool,
    /// Set when the plan was made but must not be cached.
    pub refused: Arc<std::sync::atomic::AtomicBool>,
    /// Set when planning failed.
    pub failed: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for PlanCacheSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PlanCacheSlot({:?})", self.key)
    }
}

/// information_schema tables computed from server state rather than the catalog.
pub trait LiveTables: Send + Sync + std::fmt::Debug {
    /// The rows of `table` (lower case), or None when it is not one of these.
    fn rows(&self, table: &str) -> Option<Vec<Vec<Value>>>;
    /// Whether the account may see `db` (table None) or `db`.`table` — it holds some
    /// privilege there; other databases' and tables' rows are left out, as in MySQL.
    fn sees(&self, db: &str, table: Option<&str>) -> bool;
}

/// One column visible to name resolution.
#[derive(Clone, Debug)]
pub struct ScopeColumn {
    /// Table alias (lower case) or empty.
    pub table: String,
    /// Column name (lower case).
    pub name: String,
    /// Result metadata if selected.
    pub meta: OutputColumn,
}

/// The columns of a row, as names.
#[derive(Clone, Debug, Default)]
pub struct Scope {
    /// Columns in row order.
    pub columns: Vec<ScopeColumn>,
}

struct Cte {
    name: String,
    plan: LogicalPlan,
    columns: Vec<OutputColumn>,
}

/// Types of the names visible while binding.
struct BindEnv<'b, 'a> {
    binder: &'b Binder<'a>,
    scope: &'b Scope,
}

impl crate::typing::TypeEnv for BindEnv<'_, '_> {
    fn column(&self, i: usize) -> SqlType {
        self.scope.columns.get(i).map(|c| SqlType::of_output(&c.meta)).unwrap_or_else(SqlType::unknown)
    }

    fn outer(&self, depth: usize, i: usize) -> SqlType {
        let outer = &self.binder.outer;
        outer
            .len()
            .checked_sub(depth + 1)
            .and_then(|k| outer[k].columns.get(i))
            .map(|c| SqlType::of_output(&c.meta))
            .unwrap_or_else(SqlType::unknown)
    }

    fn subquery(&self, id: usize) -> SqlType {
        self.binder.subqueries.get(id).map(|s| s.ty.clone()).unwrap_or_else(SqlType::unknown)
    }

    fn param(&self, i: usize) -> SqlType {
        match self.binder.params.get(i) {
            Some(v) => SqlType::of_value(v).or_null(true),
            None => SqlType::unknown(),
        }
    }
}

/// Binds and plans statements.
pub struct Binder<'a> {
    /// Values of the statement's parameters, when known (they type `?` in result metadata).
    pub params: &'a [Value],
    catalog: &'a Catalog,
    session: &'a SessionInfo,
    outer: Vec<Scope>,
    correlated: Vec<bool>,
    subqueries: Vec<LogicalSubquery>,
    ctes: Vec<Cte>,
    /// Subqueries the rules replaced by joins (`rules::RuleCtx::retired`).
    retired: std::cell::RefCell<std::collections::BTreeSet<usize>>,
    /// Why the plan may not be reused by a later execution (`crate::plan_cache`): it holds
    /// a value of the moment (a session function, a variable, information_schema rows).
    pub uncacheable: Option<String>,
    /// Lock rows read (SELECT ... FOR UPDATE).
    pub lock_reads: bool,
    /// Recursive CTEs planned so far (numbers their work tables).
    work_tables: usize,
    /// Parsed view queries by `db.name` (a view is parsed once per statement).
    view_asts: std::collections::HashMap<String, Arc<ast::Query>>,
    /// Columns of views and derived tables already bound for a FROM scope. Planning a FROM
    /// binds each relation twice (its names for WHERE, then its plan); without these, a
    /// chain of n nested views or derived tables would be bound 2^n times.
    view_columns: std::collections::HashMap<String, Vec<OutputColumn>>,
    derived_columns: std::collections::HashMap<String, Vec<OutputColumn>>,
    /// Databases of the views being expanded, innermost last (names in a view's query
    /// resolve in its own database).
    view_db: Vec<String>,
    /// The named windows (WINDOW clause) of the SELECTs being bound, innermost last.
    windows: Vec<Vec<ast::NamedWindowDefinition>>,
}

fn lower(s: &str) -> String {
    s.to_ascii_lowercase()
}

fn ident_name(i: &ast::Ident) -> String {
    i.value.clone()
}

/// What kind of value an expression yields, as far as binding can tell (MySQL picks the
/// comparison from the kinds of both sides).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Integers, decimals, doubles.
    Number,
    /// Character and binary strings.
    String,
    /// DATE, DATETIME, TIMESTAMP, TIME.
    Temporal,
    /// Not known before evaluation.
    Unknown,
}

/// The class of a column type.
pub fn type_class(ty: &ColumnType) -> Class {
    match ty {
        t if t.is_string() => Class::String,
        ColumnType::Date | ColumnType::DateTime(_) | ColumnType::Timestamp(_) | ColumnType::Time(_) => Class::Temporal,
        _ => Class::Number,
    }
}

/// The class of a bound expression's values (columns by their declared types).
pub fn expr_class(e: &Expr, scope: &Scope) -> Class {
    match e {
        Expr::Column(i) => {
            scope.columns.get(*i).and_then(|c| c.meta.ty.as_ref()).map(type_class).unwrap_or(Class::Unknown)
        }
        Expr::Literal(v) => match v {
            Value::Null => Class::Unknown,
            Value::Bytes(_) => Class::String,
            Value::Date(_) | Value::DateTime(_) | Value::Time(_) => Class::Temporal,
            _ => Class::Number,
        },
        Expr::Binary(..) => Class::Number,
        Expr::Unary(..) | Expr::IsNull(..) | Expr::IsBool(..) | Expr::InList(..) | Expr::Between(..) => Class::Number,
        Expr::Like(..) | Expr::InSubquery(..) => Class::Number,
        Expr::Cast(_, t) => match t {
            CastType::Char => Class::String,
            CastType::Date | CastType::DateTime | CastType::Time => Class::Temporal,
            _ => Class::Number,
        },
        _ => Class::Unknown,
    }
}

/// Whether an index on a column of type `ty` can look up values of class `c`: a string
/// key cannot serve a comparison with a number or a date (those compare as numbers or
/// dates, not in the key's string order).
pub(crate) fn key_serves(ty: &Option<ColumnType>, c: Class) -> bool {
    match ty.as_ref().map(type_class) {
        Some(Class::String) => matches!(c, Class::String | Class::Unknown),
        _ => true,
    }
}

/// Hash join keys for `l = r`, converted so that equal keys encode alike: a string against
/// a number compares as doubles, a string against a date as dates (MySQL's rules).
pub(crate) fn comparable_keys(l: Expr, r: Expr, scope: &Scope) -> (Expr, Expr) {
    let cast = |e: Expr, t: CastType| Expr::Cast(Box::new(e), t);
    match (expr_class(&l, scope), expr_class(&r, scope)) {
        (Class::String, Class::Number)
        | (Class::Number, Class::String)
        | (Class::Temporal, Class::Number)
        | (Class::Number, Class::Temporal) => (cast(l, CastType::Double), cast(r, CastType::Double)),
        (Class::String, Class::Temporal) | (Class::Temporal, Class::String) => {
            (cast(l, CastType::DateTime), cast(r, CastType::DateTime))
        }
        _ => (l, r),
    }
}

/// Splits an expression into its AND-ed parts.
pub fn conjuncts(e: Expr, out: &mut Vec<Expr>) {
    match e {
        Expr::Binary(BinOp::And, a, b) => {
            conjuncts(*a, out);
            conjuncts(*b, out);
        }
        other => out.push(other),
    }
}

/// AND of expressions (None for none). Up to `CHAIN` (64) parts make a left-deep chain, as
/// written; longer lists (a row comparison of 100,000 columns) a balanced tree, so that a
/// flat list from the client never becomes a deep tree here.
pub fn and_all(es: Vec<Expr>) -> Option<Expr> {
    combine_all(BinOp::And, es)
}

/// Parts a chain of AND/OR may have before it is built as a balanced tree.
pub(crate) const CHAIN: usize = 64;

/// `op` over all of `es`, associatively (see `and_all`).
pub(crate) fn combine_all(op: BinOp, mut es: Vec<Expr>) -> Option<Expr> {
    if es.len() > CHAIN {
        let right = es.split_off(es.len() / 2);
        let (l, r) = (combine_all(op, es)?, combine_all(op, right)?);
        return Some(Expr::Binary(op, Box::new(l), Box::new(r)));
    }
    let mut it = es.into_iter();
    let first = it.next()?;
    Some(it.fold(first, |a, b| Expr::Binary(op, Box::new(a), Box::new(b))))
}

/// The object name's last part and optional database.
pub fn split_name(name: &ast::ObjectName) -> Result<(Option<String>, String)> {
    let parts: Vec<String> =
        name.0.iter().map(|p| p.as_ident().map(ident_name).unwrap_or_else(|| p.to_string())).collect();
    match parts.as_slice() {
        [t] => Ok((None, t.clone())),
        [d, t] => Ok((Some(d.clone()), t.clone())),
        _ => Err(Error::parse(format!("bad object name '{name}'"))),
    }
}

impl<'a> Binder<'a> {
    /// A binder for one statement.
    pub fn new(catalog: &'a Catalog, session: &'a SessionInfo) -> Binder<'a> {
        Binder {
            params: &[],
            view_db: Vec::new(),
            work_tables: 0,
            view_asts: std::collections::HashMap::new(),
            view_columns: std::collections::HashMap::new(),
            derived_columns: std::collections::HashMap::new(),
            catalog,
            session,
            outer: Vec::new(),
            correlated: Vec::new(),
            subqueries: Vec::new(),
            ctes: Vec::new(),
            retired: Default::default(),
            uncacheable: None,
            lock_reads: false,
            windows: Vec::new(),
        }
    }

    /// Subqueries collected so far, planned. Every subquery's logical plan goes through the
    /// rules before any is planned physically: decorrelating one may retire another nested
    /// in it, which is then planned as an empty row (nothing refers to it any more).
    pub fn take_subqueries(&mut self) -> Result<Arc<Vec<SubqueryPlan>>> {
        let subs = std::mem::take(&mut self.subqueries);
        let mut optimized = Vec::with_capacity(subs.len());
        for (id, sq) in subs.iter().enumerate() {
            let done = self.retired.borrow().contains(&id);
            optimized.push(if done {
                None
            } else {
                Some(self.optimize(sq.plan.clone(), &format!("subquery {id}"), &subs)?)
            });
        }
        let retired = std::mem::take(&mut *self.retired.borrow_mut());
        let planned = subs
            .into_iter()
            .zip(optimized)
            .enumerate()
            .map(|(id, (mut sq, plan))| match plan {
                Some(plan) if !retired.contains(&id) => {
                    sq.plan = plan;
                    crate::physical::subquery(sq)
                }
                _ => {
                    sq.plan = LogicalPlan::Values(vec![vec![Expr::Literal(Value::Null)]]);
                    sq.correlated = false;
                    Ok(SubqueryPlan { replaced: true, ..crate::physical::subquery(sq)? })
                }
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Arc::new(planned))
    }

    /// What the rules may consult, with the statement's subqueries `subqueries`.
    pub fn rule_ctx<'s>(&'s self, subqueries: &'s [LogicalSubquery]) -> crate::rules::RuleCtx<'s> {
        crate::rules::RuleCtx {
            stats: self.catalog,
            vars: &self.session.vars,
            params: self.params,
            subqueries,
            retired: &self.retired,
        }
    }

    /// The physical plan of a logical plan bound by this binder: the rules, then physical
    /// planning.
    pub fn physical(&self, plan: LogicalPlan) -> Result<Plan> {
        crate::physical::plan(self.optimize(plan, "query", &self.subqueries)?)
    }

    /// The rules over one query block's plan, recorded in the optimizer trace when the
    /// session traces.
    fn optimize(&self, plan: LogicalPlan, what: &str, subqueries: &[LogicalSubquery]) -> Result<LogicalPlan> {
        let ctx = self.rule_ctx(subqueries);
        let Some(sink) = &self.session.optimizer_trace else {
            return crate::rules::optimize(plan, &ctx, None);
        };
        let bound = plan.clone();
        let mut trace = crate::rules::Trace::new();
        let plan = crate::rules::optimize(plan, &ctx, Some(&mut trace))?;
        sink.record(&sink.next_block(what), &bound, trace);
        Ok(plan)
    }

    /// The current database or error 1046.
    pub fn current_db(&self) -> Result<String> {
        if let Some(db) = self.view_db.last() {
            return Ok(db.clone());
        }
        self.session.db.clone().ok_or_else(|| Error::user(Code::NoDb, "No database selected"))
    }

    /// A view as the statement's transaction sees it (from its pinned schema).
    pub fn view_info(&self, db: &str, name: &str) -> Option<Arc<ViewInfo>> {
        match &self.session.schema {
            Some(schema) => schema.try_view(db, name),
            None => self.catalog.try_view(db, name),
        }
    }

    /// Plans a view's query as a derived table: in the view's database, without the
    /// enclosing statement's CTEs or outer rows. Returns the plan and its columns, named
    /// by the view's column list.
    pub fn view_query(&mut self, view: &ViewInfo) -> Result<(LogicalPlan, Vec<OutputColumn>)> {
        let (plan, mut cols) = self.bind_view_query(view).map_err(|e| match e.code() {
            Code::NoSuchTable | Code::BadField | Code::BadDb | Code::FunctionNotExists | Code::TableAccessDenied => {
                invalid_view(view)
            }
            _ => e,
        })?;
        if !view.columns.is_empty() {
            if view.columns.len() != cols.len() {
                return Err(invalid_view(view));
            }
            for (c, n) in cols.iter_mut().zip(&view.columns) {
                c.name = n.clone();
            }
        }
        for c in &mut cols {
            c.table = view.name.clone();
            c.org_table = view.name.clone();
            c.db = view.db.clone();
            c.org_name = c.name.clone();
        }
        Ok((plan, cols))
    }

    /// Binds a view's stored query (errors as the query itself reports them).
    pub fn bind_view_query(&mut self, view: &ViewInfo) -> Result<(LogicalPlan, Vec<OutputColumn>)> {
        if self.view_db.len() >= MAX_VIEW_NESTING {
            return Err(Error::user(
                Code::ViewRecursive,
                format!("`{}`.`{}` contains view recursion", view.db, view.name),
            ));
        }
        let key = view_key(view);
        let q = match self.view_asts.get(&key) {
            Some(q) => q.clone(),
            None => {
                let q: Arc<ast::Query> = Arc::from(parse_view_query(&view.query)?);
                self.view_asts.insert(key, q.clone());
                q
            }
        };
        let outer = std::mem::take(&mut self.outer);
        let correlated = std::mem::take(&mut self.correlated);
        let ctes = std::mem::take(&mut self.ctes);
        let lock = std::mem::replace(&mut self.lock_reads, false);
        self.view_db.push(view.db.clone());
        let r = self.query(&q);
        self.view_db.pop();
        self.outer = outer;
        self.correlated = correlated;
        self.ctes = ctes;
        self.lock_reads = lock;
        let (plan, scope) = r?;
        Ok((plan, scope.columns.into_iter().map(|c| c.meta).collect()))
    }

    /// Resolves the name of a table a statement writes (a view is not one: views are
    /// read-only, 1288).
    pub fn table(&self, name: &ast::ObjectName) -> Result<Arc<TableInfo>> {
        let (db, t) = split_name(name)?;
        let db = match db {
            Some(d) => d,
            None => self.current_db()?,
        };
        if let Some(v) = self.view_info(&db, &t) {
            return Err(Error::user(Code::NonUpdatableTable, format!("The target table {} is not updatable", v.name)));
        }
        self.table_info(&db, &t)
    }

    /// A table's definition as the statement's transaction sees it: from the schema its
    /// snapshot was taken under, so a table altered, truncated or dropped since reads as it
    /// was (writes through the old definition fail at commit, 8028). A table that exists
    /// now but not in that schema was created after the snapshot; reading it at the
    /// snapshot would be wrong, so it is MySQL's 1412, as InnoDB answers a consistent read
    /// of a table created after it.
    fn table_info(&self, db: &str, t: &str) -> Result<Arc<TableInfo>> {
        let Some(schema) = &self.session.schema else { return self.catalog.table(db, t) };
        match schema.try_table(db, t) {
            Some(info) => Ok(info),
            None if self.catalog.try_table(db, t).is_some() => {
                Err(Error::user(Code::TableDefChanged, "Table definition has changed, please retry transaction"))
            }
            None => schema.table(db, t),
        }
    }

    /// Plans a whole query (the top level of a statement).
    pub fn plan_query(&mut self, q: &ast::Query) -> Result<Query> {
        let (plan, scope) = self.query(q)?;
        // Result metadata takes its types from the plan: NOT NULL only where the plan
        // cannot produce NULL (a column of an implicitly grouped query over no rows is NULL;
        // COUNT under ROLLUP is not).
        let mut columns: Vec<OutputColumn> = scope.columns.iter().map(|c| c.meta.clone()).collect();
        let schema = plan.schema(&crate::logical::SchemaEnv::new(&self.subqueries, self.params))?;
        debug_assert_eq!(schema.len(), columns.len(), "the plan's row and its columns");
        if schema.len() == columns.len() {
            for (c, t) in columns.iter_mut().zip(schema) {
                if t.ty.is_some() {
                    t.apply(c);
                }
            }
        }
        let mut plan = self.physical(plan)?;
        crate::prune::prune_scans(&mut plan);
        Ok(Query::new(plan, columns, self.take_subqueries()?))
    }

    /// Plans a query, returning the plan and its output scope.
    pub fn query(&mut self, q: &ast::Query) -> Result<(LogicalPlan, Scope)> {
        let saved_ctes = self.ctes.len();
        if let Some(with) = &q.with {
            for cte in &with.cte_tables {
                if with.recursive {
                    if let Some(c) = self.recursive_cte(cte)? {
                        self.ctes.push(c);
                        continue;
                    }
                }
                let (plan, scope) = self.query(&cte.query)?;
                let alias_cols: Vec<String> = cte.alias.columns.iter().map(|c| c.name.value.clone()).collect();
                let mut columns: Vec<OutputColumn> = scope.columns.iter().map(|c| c.meta.clone()).collect();
                for (c, n) in columns.iter_mut().zip(alias_cols) {
                    c.name = n;
                }
                let name = cte.alias.name.value.clone();
                self.ctes.push(Cte { name, plan, columns });
            }
        }
        if !q.locks.is_empty() {
            self.lock_reads = true;
        }
        let order_by: Vec<ast::OrderByExpr> = match &q.order_by {
            Some(ob) => match &ob.kind {
                ast::OrderByKind::Expressions(v) => v.clone(),
                ast::OrderByKind::All(_) => return Err(Error::unsupported("ORDER BY ALL")),
            },
            None => Vec::new(),
        };
        let (limit, offset) = match &q.limit_clause {
            Some(ast::LimitClause::LimitOffset { limit, offset, .. }) => {
                (limit.clone(), offset.as_ref().map(|o| o.value.clone()))
            }
            Some(ast::LimitClause::OffsetCommaLimit { offset, limit }) => (Some(limit.clone()), Some(offset.clone())),
            None => (None, None),
        };
        let result = match q.body.as_ref() {
            ast::SetExpr::Select(s) => self.select(s, &order_by)?,
            other => {
                let (plan, scope) = self.set_expr(other)?;
                if order_by.is_empty() {
                    (plan, scope)
                } else {
                    let mut keys = Vec::new();
                    for ob in &order_by {
                        let e = self.order_key_on_output(&ob.expr, &scope)?;
                        keys.push((e, matches!(ob.options.sort, Some(ast::OrderBySort::Desc))));
                    }
                    (LogicalPlan::Sort { input: Box::new(plan), keys }, scope)
                }
            }
        };
        let (mut plan, scope) = result;
        if limit.is_some() || offset.is_some() {
            let empty = Scope::default();
            let limit = limit.map(|l| self.expr(&l, &empty)).transpose()?;
            let offset = offset.map(|o| self.expr(&o, &empty)).transpose()?;
            plan = LogicalPlan::Limit { input: Box::new(plan), limit, offset };
        }
        self.ctes.truncate(saved_ctes);
        Ok((plan, scope))
    }

    /// Plans `cte` of a WITH RECURSIVE as a recursive CTE when its body is `seed UNION
    /// ALL step` (or UNION DISTINCT) and only `step` reads the CTE; None when it does not read itself (an
    /// ordinary CTE). The columns are named by the alias list and typed by the seed, as in
    /// MySQL.
    fn recursive_cte(&mut self, cte: &ast::Cte) -> Result<Option<Cte>> {
        let name = cte.alias.name.value.clone();
        if !reads_bare_name(&*cte.query, &name) {
            return Ok(None);
        }
        let recursive_err = || {
            Error::user(
                Code::CteRecursiveRequiresUnion,
                format!("Recursive Common Table Expression '{name}' should contain a UNION"),
            )
        };
        let q = &cte.query;
        if q.order_by.is_some() || q.limit_clause.is_some() || q.with.is_some() {
            return Err(Error::unsupported("ORDER BY, LIMIT or WITH in a recursive CTE"));
        }
        let ast::SetExpr::SetOperation { op: ast::SetOperator::Union, set_quantifier, left, right } = q.body.as_ref()
        else {
            return Err(recursive_err());
        };
        if reads_bare_name(&**left, &name) {
            return Err(recursive_err());
        }
        let (seed, seed_scope) = self.set_expr(left)?;
        let alias_cols: Vec<String> = cte.alias.columns.iter().map(|c| c.name.value.clone()).collect();
        if !alias_cols.is_empty() && alias_cols.len() != seed_scope.columns.len() {
            return Err(Error::user(
                Code::ViewWrongList,
                "In definition of view, derived table or common table expression, SELECT list and column names list have different column counts",
            ));
        }
        let mut columns: Vec<OutputColumn> = seed_scope.columns.iter().map(|c| c.meta.clone()).collect();
        for (i, c) in columns.iter_mut().enumerate() {
            if let Some(n) = alias_cols.get(i) {
                c.name = n.clone();
            }
            let ty = SqlType::of_output(c).or_null(true);
            *c = OutputColumn { name: c.name.clone(), ..Default::default() };
            ty.apply(c);
        }
        let id = self.work_tables;
        self.work_tables += 1;
        self.ctes.push(Cte { name: name.clone(), plan: LogicalPlan::WorkTable(id), columns: columns.clone() });
        let step = self.set_expr(right);
        self.ctes.pop();
        let (step, step_scope) = step?;
        if step_scope.columns.len() != columns.len() {
            return Err(Error::user(
                Code::WrongNumberOfColumnsInSelect,
                "The used SELECT statements have a different number of columns",
            ));
        }
        let max_depth = self.session.vars.get("cte_max_recursion_depth").and_then(|v| v.as_i64()).unwrap_or(1000);
        let plan = LogicalPlan::Recursive {
            seed: Box::new(seed),
            step: Box::new(step),
            id,
            all: matches!(set_quantifier, ast::SetQuantifier::All),
            max_depth: max_depth.max(0) as u64,
        };
        Ok(Some(Cte { name, plan, columns }))
    }

    fn order_key_on_output(&mut self, e: &ast::Expr, scope: &Scope) -> Result<Expr> {
        if let ast::Expr::Value(v) = e {
            if let ast::Value::Number(n, _) = &v.value {
                let i: usize = n.parse().map_err(|_| Error::parse("bad ORDER BY position"))?;
                if i == 0 || i > scope.columns.len() {
                    return Err(Error::user(Code::BadField, format!("Unknown column '{i}' in 'order clause'")));
                }
                return Ok(Expr::Column(i - 1));
            }
        }
        self.expr(e, scope)
    }

    fn set_expr(&mut self, body: &ast::SetExpr) -> Result<(LogicalPlan, Scope)> {
        match body {
            ast::SetExpr::Select(s) => self.select(s, &[]),
            ast::SetExpr::Query(q) => self.query(q),
            ast::SetExpr::Values(v) => {
                let empty = Scope::default();
                let rows = v
                    .rows
                    .iter()
                    .map(|r| r.content.iter().map(|e| self.expr(e, &empty)).collect::<Result<Vec<_>>>())
                    .collect::<Result<Vec<_>>>()?;
                let width = rows.first().map_or(0, |r| r.len());
                let scope = Scope {
                    columns: (0..width)
                        .map(|i| {
                            let mut meta = OutputColumn { name: format!("column_{i}"), ..Default::default() };
                            let types: Vec<SqlType> =
                                rows.iter().filter_map(|r| r.get(i)).map(|e| self.type_of(e, &empty)).collect();
                            crate::typing::merge(&types).apply(&mut meta);
                            ScopeColumn { table: String::new(), name: format!("column_{i}"), meta }
                        })
                        .collect(),
                };
                Ok((LogicalPlan::Values(rows), scope))
            }
            ast::SetExpr::SetOperation { op, set_quantifier, left, right } => {
                let kind = match op {
                    ast::SetOperator::Union => None,
                    ast::SetOperator::Intersect => Some(true),
                    ast::SetOperator::Except => Some(false),
                    other => return Err(Error::unsupported(format!("{other}"))),
                };
                let (lp, ls) = self.set_expr(left)?;
                let (rp, rs) = self.set_expr(right)?;
                if ls.columns.len() != rs.columns.len() {
                    return Err(Error::user(
                        Code::WrongNumberOfColumnsInSelect,
                        "The used SELECT statements have a different number of columns",
                    ));
                }
                let all = matches!(set_quantifier, ast::SetQuantifier::All);
                let lt: Vec<SqlType> = ls.columns.iter().map(|c| SqlType::of_output(&c.meta)).collect();
                let rt: Vec<SqlType> = rs.columns.iter().map(|c| SqlType::of_output(&c.meta)).collect();
                let mut scope = ls;
                let mut merged = Vec::new();
                for (c, r) in scope.columns.iter_mut().zip(&rs.columns) {
                    c.table.clear();
                    let ty = crate::typing::merge(&[SqlType::of_output(&c.meta), SqlType::of_output(&r.meta)]);
                    c.meta = OutputColumn { name: c.meta.name.clone(), ..Default::default() };
                    ty.apply(&mut c.meta);
                    merged.push(ty);
                }
                let lp = coerce_set_input(lp, &lt, &merged);
                let rp = coerce_set_input(rp, &rt, &merged);
                let plan = match kind {
                    None => LogicalPlan::Union { inputs: vec![lp, rp], all },
                    Some(intersect) => LogicalPlan::SetOp { left: Box::new(lp), right: Box::new(rp), intersect, all },
                };
                Ok((plan, scope))
            }
            other => Err(Error::unsupported(format!("{other}"))),
        }
    }

    // ----- FROM -----

    fn relation(&mut self, f: &ast::TableFactor) -> Result<Relation> {
        match f {
            ast::TableFactor::Table { name, alias, .. } => {
                let (db, tname) = split_name(name)?;
                if db.is_none() {
                    if let Some(cte) = self.ctes.iter().rev().find(|c| c.name.eq_ignore_ascii_case(&tname)) {
                        let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(tname.clone());
                        return Ok(Relation::derived(cte.plan.clone(), &cte.columns, &alias));
                    }
                }
                let db_name = match db {
                    Some(d) => d,
                    None => self.current_db()?,
                };
                if db_name.eq_ignore_ascii_case("information_schema") {
                    self.uncacheable.get_or_insert_with(|| "query reads information_schema".to_string());
                    if let (true, Some(sink)) =
                        (tname.eq_ignore_ascii_case("optimizer_trace"), &self.session.optimizer_trace)
                    {
                        sink.mark_reads_trace();
                    }
                    let (cols, mut rows) = crate::show::information_schema(self.catalog, &tname)?;
                    if let Some(live) = &self.session.live {
                        if let Some(r) = live.rows(&tname.to_ascii_lowercase()) {
                            rows = r;
                        } else {
                            let at = |names: &[&str]| {
                                cols.iter().position(|c| names.iter().any(|n| c.name.eq_ignore_ascii_case(n)))
                            };
                            let schema = at(&["TABLE_SCHEMA", "SCHEMA_NAME", "CONSTRAINT_SCHEMA"]);
                            let table = at(&["TABLE_NAME"]);
                            if let Some(sc) = schema {
                                rows.retain(|r| {
                                    let text =
                                        |i: usize| r[i].to_text().map(|b| String::from_utf8_lossy(&b).into_owned());
                                    let Some(db) = text(sc) else { return true };
                                    if db.eq_ignore_ascii_case("information_schema") {
                                        return true;
                                    }
                                    live.sees(&db, table.and_then(text).as_deref())
                                });
                            }
                        }
                    }
                    let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(tname.clone());
                    let cols = information_schema_types(cols, &rows);
                    let values = rows.into_iter().map(|r| r.into_iter().map(Expr::Literal).collect()).collect();
                    return Ok(Relation::derived(LogicalPlan::Values(values), &cols, &alias));
                }
                if let Some(view) = self.view_info(&db_name, &tname) {
                    let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(view.name.clone());
                    let (plan, cols) = self.view_query(&view)?;
                    return Ok(Relation::derived(plan, &cols, &alias));
                }
                let table = self.table_info(&db_name, &tname)?;
                let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(table.name.clone());
                Ok(Relation::table(table, &alias))
            }
            ast::TableFactor::Derived { subquery, alias, .. } => {
                let alias = alias
                    .as_ref()
                    .map(|a| a.name.value.clone())
                    .ok_or_else(|| Error::user(Code::Parse, "Every derived table must have its own alias"))?;
                let (plan, scope) = self.query(subquery)?;
                let cols: Vec<OutputColumn> = scope.columns.iter().map(|c| c.meta.clone()).collect();
                Ok(Relation::derived(plan, &cols, &alias))
            }
            ast::TableFactor::NestedJoin { table_with_joins, alias: None } => {
                let (plan, scope) = self.from(std::slice::from_ref(table_with_joins))?;
                Ok(Relation { table: None, plan: Some(plan), scope })
            }
            other => Err(Error::unsupported(format!("{other}"))),
        }
    }

    /// Plans FROM as one logical join of its relations, with their ON conditions bound (the
    /// `predicate_pushdown` rule brings WHERE into it).
    fn from(&mut self, from: &[ast::TableWithJoins]) -> Result<(LogicalPlan, Scope)> {
        // Flatten into (relation, join kind, ON).
        let mut items: Vec<(Relation, JoinKind, Option<ast::Expr>)> = Vec::new();
        for twj in from {
            items.push((self.relation(&twj.relation)?, JoinKind::Inner, None));
            for j in &twj.joins {
                let rel = self.relation(&j.relation)?;
                let (kind, constraint) = match &j.join_operator {
                    ast::JoinOperator::Join(c) | ast::JoinOperator::Inner(c) | ast::JoinOperator::CrossJoin(c) => {
                        (JoinKind::Inner, c)
                    }
                    ast::JoinOperator::Left(c) | ast::JoinOperator::LeftOuter(c) => (JoinKind::Left, c),
                    ast::JoinOperator::Right(c) | ast::JoinOperator::RightOuter(c) => {
                        // A RIGHT JOIN B == B LEFT JOIN A, with columns reordered afterwards.
                        let on = match c {
                            ast::JoinConstraint::On(e) => Some(e.clone()),
                            ast::JoinConstraint::None => None,
                            _ => return Err(Error::unsupported("RIGHT JOIN USING")),
                        };
                        let prev = items.pop().ok_or_else(|| Error::internal("right join without left"))?;
                        let left_width = prev.0.scope.columns.len();
                        let right_width = rel.scope.columns.len();
                        let mut scope = rel.scope.clone();
                        scope.columns.extend(prev.0.scope.columns.iter().cloned());
                        let left_plan = rel.into_plan(self.lock_reads);
                        let right_plan = prev.0.into_plan(self.lock_reads);
                        let mut on_preds = Vec::new();
                        if let Some(e) = on {
                            conjuncts(self.expr(&e, &scope)?, &mut on_preds);
                        }
                        let joined = LogicalPlan::Join {
                            inputs: vec![
                                JoinInput::new(left_plan, right_width, JoinKind::Inner, Vec::new()),
                                JoinInput::new(right_plan, left_width, JoinKind::Left, on_preds),
                            ],
                            filter: Vec::new(),
                            scope: scope.clone(),
                        };
                        let reorder: Vec<Expr> =
                            (right_width..right_width + left_width).chain(0..right_width).map(Expr::Column).collect();
                        let mut out_scope = Scope::default();
                        out_scope.columns.extend(scope.columns[right_width..].iter().cloned());
                        out_scope.columns.extend(scope.columns[..right_width].iter().cloned());
                        for c in &mut out_scope.columns[..left_width] {
                            c.meta.not_null = false;
                        }
                        let plan = LogicalPlan::Project { input: Box::new(joined), exprs: reorder };
                        items.push((Relation { table: None, plan: Some(plan), scope: out_scope }, prev.1, prev.2));
                        continue;
                    }
                    other => return Err(Error::unsupported(format!("join {other:?}"))),
                };
                let on = match constraint {
                    ast::JoinConstraint::On(e) => Some(e.clone()),
                    ast::JoinConstraint::None => None,
                    ast::JoinConstraint::Using(cols) => {
                        let names = cols.iter().map(|c| split_name(c).map(|(_, n)| n)).collect::<Result<Vec<_>>>()?;
                        using_condition(&items, &rel, &names)?
                    }
                    ast::JoinConstraint::Natural => {
                        // The columns both sides have, in the right side's order.
                        let names: Vec<String> = rel
                            .scope
                            .columns
                            .iter()
                            .filter(|c| items.iter().any(|i| i.0.scope.columns.iter().any(|l| l.name == c.name)))
                            .map(|c| c.name.clone())
                            .collect();
                        using_condition(&items, &rel, &names)?
                    }
                };
                items.push((rel, kind, on));
            }
        }
        // The inner side of an outer join reads as NULL where no row matched.
        for (rel, kind, _) in &mut items {
            if *kind == JoinKind::Left {
                for c in &mut rel.scope.columns {
                    c.meta.not_null = false;
                }
            }
        }
        // The joined row: each relation's columns in written order.
        let mut scope = Scope::default();
        let mut offsets = Vec::new();
        for (rel, _, _) in &items {
            offsets.push(scope.columns.len());
            scope.columns.extend(rel.scope.columns.iter().cloned());
        }
        check_unique_aliases(&items.iter().map(|i| &i.0).collect::<Vec<_>>())?;
        let mut inputs = Vec::with_capacity(items.len());
        for (k, (rel, kind, on)) in items.into_iter().enumerate() {
            let width = rel.scope.columns.len();
            let mut on_preds = Vec::new();
            if let Some(on) = &on {
                let prefix_scope = Scope { columns: scope.columns[..offsets[k] + width].to_vec() };
                conjuncts(self.expr(on, &prefix_scope)?, &mut on_preds);
            }
            inputs.push(JoinInput::new(rel.into_plan(self.lock_reads), width, kind, on_preds));
        }
        Ok((LogicalPlan::Join { inputs, filter: Vec::new(), scope: scope.clone() }, scope))
    }

    // ----- SELECT -----

    fn select(&mut self, s: &ast::Select, order_by: &[ast::OrderByExpr]) -> Result<(LogicalPlan, Scope)> {
        for (i, w) in s.named_window.iter().enumerate() {
            if s.named_window[..i].iter().any(|v| lower(&v.0.value) == lower(&w.0.value)) {
                return Err(Error::user(
                    Code::WindowDuplicateName,
                    format!("Window '{}' is defined twice.", w.0.value),
                ));
            }
        }
        self.windows.push(s.named_window.clone());
        let r = self.select_block(s, order_by);
        self.windows.pop();
        r
    }

    fn select_block(&mut self, s: &ast::Select, order_by: &[ast::OrderByExpr]) -> Result<(LogicalPlan, Scope)> {
        let mut preds = Vec::new();
        let (plan, scope) = if s.from.is_empty() {
            (LogicalPlan::Dual, Scope::default())
        } else {
            // Bind WHERE against the full scope first, so FROM planning can use it.
            let rels_scope = self.scope_of_from(&s.from)?;
            if let Some(w) = &s.selection {
                let bound = self.expr(w, &rels_scope)?;
                let mut window = false;
                bound.walk(&mut |x| window |= matches!(x, Expr::Window(_)));
                if window {
                    return Err(Error::user(
                        Code::WindowInvalidUse,
                        "You cannot use the window function in this context.",
                    ));
                }
                conjuncts(bound, &mut preds);
            }
            self.from(&s.from)?
        };
        let mut plan = match and_all(std::mem::take(&mut preds)) {
            Some(pred) => LogicalPlan::Filter { input: Box::new(plan), pred },
            None => plan,
        };
        if s.from.is_empty() {
            if let Some(w) = &s.selection {
                plan = LogicalPlan::Filter { input: Box::new(plan), pred: self.expr(w, &scope)? };
            }
        }
        // Projection items.
        let mut items: Vec<(Expr, OutputColumn, Option<String>)> = Vec::new();
        let mut has_agg = false;
        for item in &s.projection {
            match item {
                ast::SelectItem::Wildcard(_) => {
                    for (i, c) in scope.columns.iter().enumerate() {
                        items.push((Expr::Column(i), c.meta.clone(), None));
                    }
                }
                ast::SelectItem::QualifiedWildcard(kind, _) => {
                    let name = match kind {
                        ast::SelectItemQualifiedWildcardKind::ObjectName(n) => split_name(n)?.1,
                        ast::SelectItemQualifiedWildcardKind::Expr(e) => e.to_string(),
                    };
                    let mut any = false;
                    for (i, c) in scope.columns.iter().enumerate() {
                        if c.table == lower(&name) {
                            items.push((Expr::Column(i), c.meta.clone(), None));
                            any = true;
                        }
                    }
                    if !any {
                        return Err(Error::user(Code::UnknownTable, format!("Unknown table '{name}'")));
                    }
                }
                ast::SelectItem::UnnamedExpr(e) => {
                    has_agg |= contains_aggregate(e);
                    let bound = self.expr(e, &scope)?;
                    let meta = self.output_meta(&bound, &scope, &expr_text(e));
                    items.push((bound, meta, None));
                }
                ast::SelectItem::ExprWithAlias { expr, alias } => {
                    has_agg |= contains_aggregate(expr);
                    let bound = self.expr(expr, &scope)?;
                    let mut meta = self.output_meta(&bound, &scope, &alias.value);
                    meta.name = alias.value.clone();
                    items.push((bound, meta, Some(lower(&alias.value))));
                }
                other => return Err(Error::unsupported(format!("{other}"))),
            }
        }
        let (group_exprs, rollup): (Vec<ast::Expr>, bool) = match &s.group_by {
            ast::GroupByExpr::Expressions(v, modifiers) => {
                let mut rollup = false;
                for m in modifiers {
                    match m {
                        ast::GroupByWithModifier::Rollup => rollup = true,
                        other => return Err(Error::unsupported(format!("GROUP BY ... {other}"))),
                    }
                }
                match v.as_slice() {
                    // GROUP BY ROLLUP(a, b) is GROUP BY a, b WITH ROLLUP.
                    [ast::Expr::Rollup(sets)] if sets.iter().all(|s| s.len() == 1) => {
                        (sets.iter().flatten().cloned().collect(), true)
                    }
                    _ => (v.clone(), rollup),
                }
            }
            ast::GroupByExpr::All(_) => return Err(Error::unsupported("GROUP BY ALL")),
        };
        if rollup {
            // Super-aggregate rows hold NULL in the rolled-up columns.
            for item in &mut items {
                item.1.not_null = false;
            }
        }
        let having_agg = s.having.as_ref().is_some_and(contains_aggregate);
        let order_agg = order_by.iter().any(|o| contains_aggregate(&o.expr));
        let grouped = has_agg || having_agg || order_agg || !group_exprs.is_empty();
        // ORDER BY keys, before the aggregation rewrite (bound like projection items).
        let mut order_keys: Vec<(Expr, bool)> = Vec::new();
        for ob in order_by {
            let desc = matches!(ob.options.sort, Some(ast::OrderBySort::Desc));
            let key = self.order_item(&ob.expr, &items, &scope)?;
            order_keys.push((key, desc));
        }
        let mut having = match &s.having {
            Some(h) => Some(self.having_expr(h, &items, &scope)?),
            None => None,
        };
        let mut proj: Vec<Expr> = items.iter().map(|i| i.0.clone()).collect();
        // Width of the rows window functions see (the FROM row, or the grouped row).
        let mut input_width = scope.columns.len();
        if grouped {
            let mut group = Vec::new();
            for g in &group_exprs {
                group.push(self.group_item(g, &items, &scope)?);
            }
            let mut aggs: Vec<AggCall> = Vec::new();
            // A correlated subquery after the aggregation refers to the FROM row's columns
            // (`Outer(0, i)`): the aggregated rows then start with those columns (each a
            // group value or the group's first value), so its references stay true.
            let correlated = |e: &Expr| e.subquery_ids().iter().any(|&id| self.subqueries[id].correlated);
            let keep = (proj.iter().any(correlated)
                || order_keys.iter().any(|(k, _)| correlated(k))
                || having.as_ref().is_some_and(correlated))
            .then_some(scope.columns.len());
            let rewrite = |e, aggs: &mut Vec<AggCall>| match keep {
                Some(width) => rewrite_agg_keeping_row(e, &group, aggs, width),
                None => rewrite_agg(e, &group, aggs),
            };
            proj = proj.into_iter().map(|e| rewrite(e, &mut aggs)).collect::<Result<_>>()?;
            order_keys = order_keys.into_iter().map(|(e, d)| Ok((rewrite(e, &mut aggs)?, d))).collect::<Result<_>>()?;
            having = having.map(|h| rewrite(h, &mut aggs)).transpose()?;
            let row = keep.map(|width| {
                (0..width)
                    .map(|i| match group.iter().position(|g| *g == Expr::Column(i)) {
                        Some(g) => Expr::Column(g),
                        None => {
                            let call = AggCall { func: AggFunc::First, args: vec![Expr::Column(i)], distinct: false };
                            aggs.push(call);
                            Expr::Column(group.len() + aggs.len() - 1)
                        }
                    })
                    .collect::<Vec<_>>()
            });
            input_width = group.len() + aggs.len();
            plan = LogicalPlan::Aggregate { input: Box::new(plan), group, aggs, rollup };
            if let Some(mut exprs) = row {
                exprs.extend((0..input_width).map(Expr::Column));
                input_width = exprs.len();
                plan = LogicalPlan::Project { input: Box::new(plan), exprs };
            }
            if let Some(h) = having.take() {
                plan = LogicalPlan::Filter { input: Box::new(plan), pred: h };
            }
        } else if let Some(h) = having.take() {
            plan = LogicalPlan::Filter { input: Box::new(plan), pred: h };
        }
        // Window functions run over those rows, before DISTINCT, ORDER BY and LIMIT; each
        // call becomes a column after the input's.
        let mut calls: Vec<WindowCall> = Vec::new();
        proj = proj.into_iter().map(|e| extract_windows(e, input_width, &mut calls)).collect::<Result<_>>()?;
        order_keys = order_keys
            .into_iter()
            .map(|(e, d)| Ok((extract_windows(e, input_width, &mut calls)?, d)))
            .collect::<Result<_>>()?;
        if !calls.is_empty() {
            plan = LogicalPlan::Window { input: Box::new(plan), calls };
        }
        let width = proj.len();
        let distinct = matches!(s.distinct, Some(ast::Distinct::Distinct));
        if distinct {
            plan = LogicalPlan::Project { input: Box::new(plan), exprs: proj.clone() };
            plan = LogicalPlan::Distinct { input: Box::new(plan) };
            if !order_keys.is_empty() {
                let keys = order_keys
                    .into_iter()
                    .map(|(k, d)| match proj.iter().position(|p| *p == k) {
                        Some(i) => Ok((Expr::Column(i), d)),
                        None => Err(Error::user(
                            Code::BadField,
                            "ORDER BY expression is not in SELECT list of a DISTINCT query",
                        )),
                    })
                    .collect::<Result<Vec<_>>>()?;
                plan = LogicalPlan::Sort { input: Box::new(plan), keys };
            }
        } else if order_keys.is_empty() {
            plan = LogicalPlan::Project { input: Box::new(plan), exprs: proj };
        } else {
            let mut exprs = proj;
            let mut keys = Vec::new();
            for (k, d) in order_keys {
                exprs.push(k);
                keys.push((Expr::Column(exprs.len() - 1), d));
            }
            plan = LogicalPlan::Project { input: Box::new(plan), exprs };
            plan = LogicalPlan::Sort { input: Box::new(plan), keys };
            plan = LogicalPlan::Truncate { input: Box::new(plan), width };
        }
        let out_scope = Scope {
            columns: items
                .into_iter()
                .map(|(_, meta, _)| ScopeColumn { table: lower(&meta.table), name: lower(&meta.name), meta })
                .collect(),
        };
        Ok((plan, out_scope))
    }

    /// The columns a FROM list produces, by name, without planning it (WHERE is bound
    /// against this before `from` plans the joins).
    fn scope_of_from(&mut self, from: &[ast::TableWithJoins]) -> Result<Scope> {
        let mut scope = Scope::default();
        for r in from_relations(from) {
            scope.columns.extend(self.relation_scope(r)?.columns);
        }
        Ok(scope)
    }

    fn relation_scope(&mut self, f: &ast::TableFactor) -> Result<Scope> {
        Ok(match f {
            ast::TableFactor::Table { name, alias, .. } => {
                let (db, tname) = split_name(name)?;
                if db.is_none() {
                    if let Some(cte) = self.ctes.iter().rev().find(|c| c.name.eq_ignore_ascii_case(&tname)) {
                        let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(tname.clone());
                        return Ok(Relation::derived(LogicalPlan::Dual, &cte.columns, &alias).scope);
                    }
                }
                let db = match db {
                    Some(d) => d,
                    None => self.current_db()?,
                };
                if db.eq_ignore_ascii_case("information_schema") {
                    let (cols, rows) = crate::show::information_schema(self.catalog, &tname)?;
                    let cols = information_schema_types(cols, &rows);
                    let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(tname.clone());
                    return Ok(Relation::derived(LogicalPlan::Dual, &cols, &alias).scope);
                }
                if let Some(view) = self.view_info(&db, &tname) {
                    let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(view.name.clone());
                    let key = view_key(&view);
                    let cols = match self.view_columns.get(&key) {
                        Some(cols) => cols.clone(),
                        None => {
                            let saved = self.subqueries.len();
                            let (_, cols) = self.view_query(&view)?;
                            self.subqueries.truncate(saved);
                            self.view_columns.insert(key, cols.clone());
                            cols
                        }
                    };
                    return Ok(Relation::derived(LogicalPlan::Dual, &cols, &alias).scope);
                }
                let table = self.table_info(&db, &tname)?;
                let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or(table.name.clone());
                Relation::table(table, &alias).scope
            }
            ast::TableFactor::Derived { subquery, alias, .. } => {
                let alias = alias.as_ref().map(|a| a.name.value.clone()).unwrap_or_default();
                // Its text in its naming context (CTE names, the database of an enclosing view).
                let key = format!(
                    "{}|{}|{}",
                    self.ctes.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(","),
                    self.view_db.last().map(String::as_str).unwrap_or(""),
                    subquery
                );
                let cols = match self.derived_columns.get(&key) {
                    Some(cols) => cols.clone(),
                    None => {
                        let saved = self.subqueries.len();
                        let (_, scope) = self.query(subquery)?;
                        self.subqueries.truncate(saved);
                        let cols: Vec<OutputColumn> = scope.columns.iter().map(|c| c.meta.clone()).collect();
                        self.derived_columns.insert(key, cols.clone());
                        cols
                    }
                };
                Relation::derived(LogicalPlan::Dual, &cols, &alias).scope
            }
            ast::TableFactor::NestedJoin { table_with_joins, .. } => {
                let mut s = self.relation_scope(&table_with_joins.relation)?;
                for j in &table_with_joins.joins {
                    s.columns.extend(self.relation_scope(&j.relation)?.columns);
                }
                s
            }
            other => return Err(Error::unsupported(format!("{other}"))),
        })
    }

    fn output_meta(&self, e: &Expr, scope: &Scope, text: &str) -> OutputColumn {
        match e {
            Expr::Column(i) => scope.columns.get(*i).map(|c| c.meta.clone()).unwrap_or_default(),
            _ => {
                let mut meta = OutputColumn { name: text.to_string(), ..Default::default() };
                self.type_of(e, scope).apply(&mut meta);
                meta
            }
        }
    }

    /// The type of `e` bound against `scope` (and the enclosing queries' scopes).
    pub fn type_of(&self, e: &Expr, scope: &Scope) -> SqlType {
        crate::typing::expr_type(e, &BindEnv { binder: self, scope })
    }

    fn alias_item(&self, e: &ast::Expr, items: &[(Expr, OutputColumn, Option<String>)]) -> Option<Expr> {
        if let ast::Expr::Identifier(id) = e {
            let n = lower(&id.value);
            return items.iter().find(|i| i.2.as_deref() == Some(n.as_str())).map(|i| i.0.clone());
        }
        None
    }

    fn position_item(&self, e: &ast::Expr, items: &[(Expr, OutputColumn, Option<String>)]) -> Result<Option<Expr>> {
        if let ast::Expr::Value(v) = e {
            if let ast::Value::Number(n, _) = &v.value {
                let i: usize = n.parse().map_err(|_| Error::parse("bad position"))?;
                if i == 0 || i > items.len() {
                    return Err(Error::user(Code::BadField, format!("Unknown column '{i}' in 'order clause'")));
                }
                return Ok(Some(items[i - 1].0.clone()));
            }
        }
        Ok(None)
    }

    fn order_item(
        &mut self,
        e: &ast::Expr,
        items: &[(Expr, OutputColumn, Option<String>)],
        scope: &Scope,
    ) -> Result<Expr> {
        if let Some(p) = self.position_item(e, items)? {
            return Ok(p);
        }
        if let Some(a) = self.alias_item(e, items) {
            return Ok(a);
        }
        self.expr(e, scope)
    }

    fn group_item(
        &mut self,
        e: &ast::Expr,
        items: &[(Expr, OutputColumn, Option<String>)],
        scope: &Scope,
    ) -> Result<Expr> {
        if let Some(p) = self.position_item(e, items)? {
            return Ok(p);
        }
        match self.expr(e, scope) {
            Ok(x) => Ok(x),
            Err(err) => self.alias_item(e, items).ok_or(err),
        }
    }

    fn having_expr(
        &mut self,
        e: &ast::Expr,
        items: &[(Expr, OutputColumn, Option<String>)],
        scope: &Scope,
    ) -> Result<Expr> {
        // HAVING may use select aliases: substitute them textually by binding each alias
        // reference to its item expression.
        let mut aliases = Scope::default();
        let mut alias_exprs = Vec::new();
        for (ex, _, a) in items {
            if let Some(a) = a {
                aliases.columns.push(ScopeColumn {
                    table: String::new(),
                    name: a.clone(),
                    meta: OutputColumn::default(),
                });
                alias_exprs.push(ex.clone());
            }
        }
        match self.expr(e, scope) {
            Ok(x) => Ok(x),
            Err(err) => {
                // Bind against the aliases and substitute.
                let mut combined = scope.clone();
                let base = combined.columns.len();
                combined.columns.extend(aliases.columns);
                let bound = self.expr(e, &combined).map_err(|_| err)?;
                bound.transform(&mut |x| match x {
                    Expr::Column(i) if i >= base => Ok(alias_exprs[i - base].clone()),
                    other => Ok(other),
                })
            }
        }
    }

    // ----- expressions -----

    fn resolve(&mut self, parts: &[String], scope: &Scope) -> Result<Expr> {
        if let Some(first) = parts.first() {
            if let Some(rest) = first.strip_prefix("@@") {
                let first = lower(rest);
                let (qualifier, name) = if parts.len() > 1 && matches!(first.as_str(), "session" | "global" | "local") {
                    (Some(first), lower(&parts[parts.len() - 1]))
                } else {
                    (None, first)
                };
                use crate::variables::{scope, Scope};
                let from_globals = match (qualifier.as_deref(), scope(&name)) {
                    (Some("global"), Scope::Session) => {
                        return Err(Error::user(
                            Code::IncorrectGlobalLocalVar,
                            format!("Variable '{name}' is a SESSION variable"),
                        ))
                    }
                    (Some("session" | "local"), Scope::Global) => {
                        return Err(Error::user(
                            Code::IncorrectGlobalLocalVar,
                            format!("Variable '{name}' is a GLOBAL variable"),
                        ))
                    }
                    (Some("global"), _) | (_, Scope::Global) => true,
                    _ => false,
                };
                let found = if from_globals { self.session.globals.get(&name) } else { self.session.vars.get(&name) };
                self.uncacheable.get_or_insert_with(|| format!("query reads system variable '{name}'"));
                return match found {
                    Some(v) => Ok(Expr::Literal(v.clone())),
                    None => Err(Error::user(Code::UnknownSystemVariable, format!("Unknown system variable '{name}'"))),
                };
            }
            if let Some(name) = first.strip_prefix('@') {
                self.uncacheable.get_or_insert_with(|| format!("query reads user variable '@{name}'"));
                return Ok(Expr::Literal(self.session.user_vars.get(&lower(name)).cloned().unwrap_or(Value::Null)));
            }
        }
        let (table, name) = match parts {
            [n] => (None, lower(n)),
            [t, n] => (Some(lower(t)), lower(n)),
            [_, t, n] => (Some(lower(t)), lower(n)),
            _ => return Err(Error::parse(format!("bad column reference {}", parts.join(".")))),
        };
        let find = |s: &Scope| -> Result<Option<usize>> {
            let mut hit = None;
            for (i, c) in s.columns.iter().enumerate() {
                // `__new__` (the row of INSERT ... ON DUPLICATE KEY UPDATE) is only visible
                // through VALUES(col), which the DML layer rewrites to a qualified name.
                let visible = match &table {
                    Some(t) => *t == c.table,
                    None => c.table != "__new__" && c.table != crate::load::VARS_TABLE,
                };
                if c.name == name && visible {
                    if hit.is_some() {
                        return Err(Error::user(
                            Code::NonUniq,
                            format!("Column '{}' in field list is ambiguous", parts.join(".")),
                        ));
                    }
                    hit = Some(i);
                }
            }
            Ok(hit)
        };
        if let Some(i) = find(scope)? {
            return Ok(Expr::Column(i));
        }
        for depth in 0..self.outer.len() {
            let s = &self.outer[self.outer.len() - 1 - depth];
            if let Some(i) = find(s)? {
                // The reference makes every subquery between here and that scope correlated.
                for c in self.correlated.iter_mut().rev().take(depth + 1) {
                    *c = true;
                }
                return Ok(Expr::Outer(depth, i));
            }
        }
        Err(unknown_column(&parts.join("."), "field list"))
    }

    fn subquery(&mut self, q: &ast::Query, scope: &Scope, kind: SubqueryKind) -> Result<usize> {
        self.outer.push(scope.clone());
        self.correlated.push(false);
        let saved_lock = self.lock_reads;
        self.lock_reads = false;
        let r = self.query(q);
        self.lock_reads = saved_lock;
        self.outer.pop();
        let correlated = self.correlated.pop().unwrap_or(true);
        let (plan, sub_scope) = r?;
        if kind == SubqueryKind::Scalar && sub_scope.columns.len() != 1 {
            return Err(Error::user(Code::OperandColumns, "Operand should contain 1 column(s)"));
        }
        let ty = sub_scope.columns.first().map(|c| SqlType::of_output(&c.meta)).unwrap_or_else(SqlType::null);
        self.subqueries.push(LogicalSubquery { plan, kind, correlated, ty, outer: scope.clone() });
        Ok(self.subqueries.len() - 1)
    }

    /// Binds an expression against `scope`.
    pub fn expr(&mut self, e: &ast::Expr, scope: &Scope) -> Result<Expr> {
        use ast::Expr as A;
        crate::depth::ensure_stack()?;
        Ok(match e {
            A::Identifier(id) => self.resolve(std::slice::from_ref(&id.value), scope)?,
            A::CompoundIdentifier(ids) => {
                let parts: Vec<String> = ids.iter().map(|i| i.value.clone()).collect();
                self.resolve(&parts, scope)?
            }
            A::Value(v) => self.value(&v.value)?,
            A::Nested(inner) => self.expr(inner, scope)?,
            A::Tuple(items) => Expr::Row(items.iter().map(|i| self.expr(i, scope)).collect::<Result<_>>()?),
            A::UnaryOp { op, expr } => {
                let inner = self.expr(expr, scope)?;
                match op {
                    ast::UnaryOperator::Not => Expr::Unary(UnaryOp::Not, Box::new(inner)),
                    ast::UnaryOperator::Minus => match inner {
                        Expr::Literal(v) if v.is_numeric() => Expr::Literal(negate_literal(v)?),
                        other => Expr::Unary(UnaryOp::Neg, Box::new(other)),
                    },
                    ast::UnaryOperator::Plus => inner,
                    ast::UnaryOperator::BitwiseNot => Expr::Unary(UnaryOp::BitNot, Box::new(inner)),
                    other => return Err(Error::unsupported(format!("operator {other}"))),
                }
            }
            A::BinaryOp { left, op, right } => {
                let l = self.expr(left, scope)?;
                let r = self.expr(right, scope)?;
                let bop = match op {
                    ast::BinaryOperator::Plus => BinOp::Add,
                    ast::BinaryOperator::Minus => BinOp::Sub,
                    ast::BinaryOperator::Multiply => BinOp::Mul,
                    ast::BinaryOperator::Divide => BinOp::Div,
                    ast::BinaryOperator::MyIntegerDivide => BinOp::IntDiv,
                    ast::BinaryOperator::Modulo => BinOp::Mod,
                    ast::BinaryOperator::Eq => BinOp::Eq,
                    ast::BinaryOperator::Spaceship => BinOp::NullSafeEq,
                    ast::BinaryOperator::NotEq => BinOp::NotEq,
                    ast::BinaryOperator::Lt => BinOp::Lt,
                    ast::BinaryOperator::LtEq => BinOp::LtEq,
                    ast::BinaryOperator::Gt => BinOp::Gt,
                    ast::BinaryOperator::GtEq => BinOp::GtEq,
                    ast::BinaryOperator::And => BinOp::And,
                    ast::BinaryOperator::Or => BinOp::Or,
                    ast::BinaryOperator::Xor => BinOp::Xor,
                    ast::BinaryOperator::BitwiseAnd => BinOp::BitAnd,
                    ast::BinaryOperator::BitwiseOr => BinOp::BitOr,
                    ast::BinaryOperator::BitwiseXor => BinOp::BitXor,
                    ast::BinaryOperator::PGBitwiseShiftLeft => BinOp::Shl,
                    ast::BinaryOperator::PGBitwiseShiftRight => BinOp::Shr,
                    ast::BinaryOperator::StringConcat if self.pipes_as_concat() => {
                        return Ok(Expr::Func("concat".into(), vec![l, r]))
                    }
                    ast::BinaryOperator::StringConcat => BinOp::Or,
                    other => return Err(Error::unsupported(format!("operator {other}"))),
                };
                // (a, b) = (c, d) compares element-wise.
                if let (Expr::Row(ls), Expr::Row(rs)) = (&l, &r) {
                    if ls.len() != rs.len() {
                        return Err(Error::user(
                            Code::OperandColumns,
                            format!("Operand should contain {} column(s)", ls.len()),
                        ));
                    }
                    if bop == BinOp::Eq {
                        let parts = ls
                            .iter()
                            .zip(rs)
                            .map(|(a, b)| Expr::Binary(BinOp::Eq, Box::new(a.clone()), Box::new(b.clone())))
                            .collect();
                        return Ok(and_all(parts).unwrap_or(Expr::Literal(Value::Int(1))));
                    }
                }
                if matches!(r, Expr::Func(ref n, _) if n == "__interval")
                    || matches!(l, Expr::Func(ref n, _) if n == "__interval")
                {
                    return interval_arith(bop, l, r);
                }
                Expr::Binary(bop, Box::new(l), Box::new(r))
            }
            A::IsNull(x) => Expr::IsNull(Box::new(self.expr(x, scope)?), false),
            A::IsNotNull(x) => Expr::IsNull(Box::new(self.expr(x, scope)?), true),
            A::IsTrue(x) => Expr::IsBool(Box::new(self.expr(x, scope)?), true, false),
            A::IsNotTrue(x) => Expr::IsBool(Box::new(self.expr(x, scope)?), true, true),
            A::IsFalse(x) => Expr::IsBool(Box::new(self.expr(x, scope)?), false, false),
            A::IsNotFalse(x) => Expr::IsBool(Box::new(self.expr(x, scope)?), false, true),
            A::InList { expr, list, negated } => Expr::InList(
                Box::new(self.expr(expr, scope)?),
                list.iter().map(|i| self.expr(i, scope)).collect::<Result<_>>()?,
                *negated,
            ),
            A::InSubquery { expr, subquery, negated } => {
                let x = self.expr(expr, scope)?;
                let id = self.subquery(subquery, scope, SubqueryKind::Rows)?;
                Expr::InSubquery(Box::new(x), id, *negated)
            }
            A::Exists { subquery, negated } => {
                let id = self.subquery(subquery, scope, SubqueryKind::Exists)?;
                let e = Expr::Subquery(id, SubqueryKind::Exists);
                if *negated {
                    Expr::Unary(UnaryOp::Not, Box::new(e))
                } else {
                    e
                }
            }
            A::Subquery(q) => Expr::Subquery(self.subquery(q, scope, SubqueryKind::Scalar)?, SubqueryKind::Scalar),
            A::Between { expr, negated, low, high } => Expr::Between(
                Box::new(self.expr(expr, scope)?),
                Box::new(self.expr(low, scope)?),
                Box::new(self.expr(high, scope)?),
                *negated,
            ),
            A::Like { negated, expr, pattern, escape_char, any: false } => {
                let esc = match escape_char.as_deref() {
                    Some(A::Value(v)) => match &v.value {
                        ast::Value::SingleQuotedString(s) => s.chars().next().unwrap_or('\\'),
                        _ => '\\',
                    },
                    _ => '\\',
                };
                Expr::Like(Box::new(self.expr(expr, scope)?), Box::new(self.expr(pattern, scope)?), esc, *negated)
            }
            A::RLike { negated, expr, pattern, .. } => {
                let m = Expr::Func("regexp_like".into(), vec![self.expr(expr, scope)?, self.expr(pattern, scope)?]);
                if *negated {
                    Expr::Unary(UnaryOp::Not, Box::new(m))
                } else {
                    m
                }
            }
            A::Case { operand, conditions, else_result, .. } => {
                let operand = operand.as_ref().map(|o| self.expr(o, scope).map(Box::new)).transpose()?;
                let mut arms: Vec<(Expr, Expr)> = conditions
                    .iter()
                    .map(|c| Ok((self.expr(&c.condition, scope)?, self.expr(&c.result, scope)?)))
                    .collect::<Result<_>>()?;
                let mut els = else_result.as_ref().map(|e| self.expr(e, scope)).transpose()?;
                let mut results: Vec<Expr> = arms.iter().map(|(_, t)| t.clone()).chain(els.clone()).collect();
                let ty = self.type_of(&Expr::Case(None, arms.clone(), els.clone().map(Box::new)), scope);
                self.coerce_numeric(&mut results, &ty, scope);
                let mut results = results.into_iter();
                for arm in arms.iter_mut() {
                    arm.1 = results.next().unwrap_or(Expr::Literal(Value::Null));
                }
                if els.is_some() {
                    els = results.next();
                }
                Expr::Case(operand, arms, els.map(Box::new))
            }
            A::Cast { expr, data_type, .. } => Expr::Cast(Box::new(self.expr(expr, scope)?), cast_type(data_type)?),
            A::Convert { expr, data_type: Some(dt), .. } => {
                Expr::Cast(Box::new(self.expr(expr, scope)?), cast_type(dt)?)
            }
            A::Convert { expr, data_type: None, .. } => self.expr(expr, scope)?,
            A::Extract { field, expr, .. } => {
                let f = lower(&field.to_string());
                Expr::Func(f, vec![self.expr(expr, scope)?])
            }
            A::Ceil { expr, .. } => Expr::Func("ceil".into(), vec![self.expr(expr, scope)?]),
            A::Floor { expr, .. } => Expr::Func("floor".into(), vec![self.expr(expr, scope)?]),
            A::Position { expr, r#in } => {
                Expr::Func("locate".into(), vec![self.expr(expr, scope)?, self.expr(r#in, scope)?])
            }
            A::Substring { expr, substring_from, substring_for, .. } => {
                let mut args = vec![self.expr(expr, scope)?];
                args.push(match substring_from {
                    Some(f) => self.expr(f, scope)?,
                    None => Expr::Literal(Value::Int(1)),
                });
                if let Some(f) = substring_for {
                    args.push(self.expr(f, scope)?);
                }
                Expr::Func("substring".into(), args)
            }
            A::Trim { expr, trim_where, trim_what, .. } => {
                let f = match trim_where {
                    Some(ast::TrimWhereField::Leading) => "ltrim",
                    Some(ast::TrimWhereField::Trailing) => "rtrim",
                    _ => "trim",
                };
                match trim_what {
                    // TRIM([BOTH|LEADING|TRAILING] remstr FROM str): internal 2-argument form.
                    Some(what) => {
                        Expr::Func(format!("__{f}_str"), vec![self.expr(expr, scope)?, self.expr(what, scope)?])
                    }
                    None => Expr::Func(f.into(), vec![self.expr(expr, scope)?]),
                }
            }
            A::Interval(iv) => {
                let unit = match &iv.leading_field {
                    Some(f) => lower(&f.to_string()),
                    None => "second".into(),
                };
                Expr::Func("__interval".into(), vec![self.expr(&iv.value, scope)?, Expr::Literal(Value::str(unit))])
            }
            A::TypedString(ts) => {
                let text = match &ts.value.value {
                    ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
                    other => other.to_string(),
                };
                Expr::Cast(Box::new(Expr::Literal(Value::str(text))), cast_type(&ts.data_type)?)
            }
            A::Function(f) => self.function(f, scope)?,
            A::Collate { expr, .. } => self.expr(expr, scope)?,
            other => return Err(Error::unsupported(format!("expression {other}"))),
        })
    }

    fn value(&mut self, v: &ast::Value) -> Result<Expr> {
        Ok(Expr::Literal(match v {
            ast::Value::Number(n, _) => number_literal(n)?,
            ast::Value::SingleQuotedString(s)
            | ast::Value::DoubleQuotedString(s)
            | ast::Value::EscapedStringLiteral(s) => Value::str(s.clone()),
            ast::Value::NationalStringLiteral(s) => Value::str(s.clone()),
            ast::Value::HexStringLiteral(h) => Value::Bytes(
                (0..h.len())
                    .step_by(2)
                    .map(|i| {
                        u8::from_str_radix(h.get(i..i + 2).unwrap_or("0"), 16)
                            .map_err(|_| Error::parse("bad hex literal"))
                    })
                    .collect::<Result<_>>()?,
            ),
            ast::Value::Boolean(b) => Value::Int(*b as i64),
            ast::Value::Null => Value::Null,
            ast::Value::Placeholder(p) => {
                let n: usize = p.trim_start_matches('?').parse().map_err(|_| Error::parse("bad placeholder"))?;
                return Ok(Expr::Param(n));
            }
            other => return Err(Error::unsupported(format!("literal {other}"))),
        }))
    }

    fn function(&mut self, f: &ast::Function, scope: &Scope) -> Result<Expr> {
        let name = lower(&f.name.to_string());
        let (args, distinct, star) = match &f.args {
            ast::FunctionArguments::None => (Vec::new(), false, false),
            ast::FunctionArguments::List(list) => {
                let distinct = matches!(list.duplicate_treatment, Some(ast::DuplicateTreatment::Distinct));
                let mut star = false;
                let mut args = Vec::new();
                for a in &list.args {
                    match a {
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Expr(e)) => args.push(e.clone()),
                        ast::FunctionArg::Unnamed(ast::FunctionArgExpr::Wildcard) => star = true,
                        other => return Err(Error::unsupported(format!("argument {other}"))),
                    }
                }
                (args, distinct, star)
            }
            ast::FunctionArguments::Subquery(_) => return Err(Error::unsupported("subquery as function argument")),
        };
        if let Some(over) = &f.over {
            return self.window_function(&name, &args, distinct, star, over, scope);
        }
        if is_aggregate(&name) {
            let func = match name.as_str() {
                "count" if star => AggFunc::CountStar,
                "count" => AggFunc::Count,
                "sum" => AggFunc::Sum,
                "avg" => AggFunc::Avg,
                "min" => AggFunc::Min,
                "max" => AggFunc::Max,
                "grouping" => AggFunc::Grouping,
                _ => AggFunc::GroupConcat,
            };
            let bound = args.iter().map(|a| self.expr(a, scope)).collect::<Result<Vec<_>>>()?;
            if bound.iter().any(|b| matches!(b, Expr::Agg(_))) {
                return Err(Error::user(Code::InvalidGroupFuncUse, "Invalid use of group function"));
            }
            return Ok(Expr::Agg(Box::new(AggCall { func, args: bound, distinct })));
        }
        if is_session_function(&name) {
            self.uncacheable.get_or_insert_with(|| format!("query has '{name}' function"));
            return self.session_function(&name, &args, scope);
        }
        let mut bound = args.iter().map(|a| self.expr(a, scope)).collect::<Result<Vec<_>>>()?;
        match name.as_str() {
            "date_add" | "adddate" | "date_sub" | "subdate" => {
                let sub = name.starts_with("date_sub") || name == "subdate";
                if bound.len() != 2 {
                    return Err(Error::user(
                        Code::WrongParamcountToNativeFct,
                        format!("Incorrect parameter count in the call to native function '{name}'"),
                    ));
                }
                let iv = bound.pop().unwrap_or(Expr::Literal(Value::Null));
                let d = bound.pop().unwrap_or(Expr::Literal(Value::Null));
                let (amount, unit) = match iv {
                    Expr::Func(n, mut a) if n == "__interval" && a.len() == 2 => {
                        let unit = a.pop().unwrap_or(Expr::Literal(Value::str("day")));
                        (a.pop().unwrap_or(Expr::Literal(Value::Null)), unit)
                    }
                    other => (other, Expr::Literal(Value::str("day"))),
                };
                let fname = if sub { "date_sub_interval" } else { "date_add_interval" };
                Ok(Expr::Func(fname.into(), vec![d, amount, unit]))
            }
            _ => {
                // Validate the name and the argument count now, so bad calls fail at bind time.
                let Some((min, max)) = crate::functions::arity(&name) else {
                    return Err(Error::user(Code::FunctionNotExists, format!("FUNCTION {name} does not exist")));
                };
                if bound.len() < min || bound.len() > max {
                    return Err(Error::user(
                        Code::WrongParamcountToNativeFct,
                        format!("Incorrect parameter count in the call to native function '{name}'"),
                    ));
                }
                let mut bound = bound;
                // Branches of a numeric result are converted to it (MySQL: IF(c, 0, 1.5)
                // is DECIMAL, so its 0 reads 0.0).
                let ty = self.type_of(&Expr::Func(name.clone(), bound.clone()), scope);
                match name.as_str() {
                    "if" if bound.len() == 3 => self.coerce_numeric(&mut bound[1..], &ty, scope),
                    "ifnull" | "coalesce" => self.coerce_numeric(&mut bound, &ty, scope),
                    _ => {}
                }
                Ok(Expr::Func(name, bound))
            }
        }
    }

    /// Makes MySQL's implicit conversion of result branches explicit: when the result type
    /// is DECIMAL or DOUBLE, integer and other-scale decimal branches are cast to it.
    fn coerce_numeric(&self, branches: &mut [Expr], ty: &crate::typing::SqlType, scope: &Scope) {
        for b in branches.iter_mut() {
            if let Some(target) = numeric_coercion(&self.type_of(b, scope), ty) {
                *b = Expr::Cast(Box::new(std::mem::replace(b, Expr::Literal(Value::Null))), target);
            }
        }
    }

    /// Binds `name(args) OVER (...)`. Frames other than the default (and the whole
    /// partition) and named windows are not supported yet.
    fn window_function(
        &mut self,
        name: &str,
        args: &[ast::Expr],
        distinct: bool,
        star: bool,
        over: &ast::WindowType,
        scope: &Scope,
    ) -> Result<Expr> {
        let spec = self.window_spec(over, 0)?;
        let (func, arity) = match name {
            "row_number" => (WindowFunc::RowNumber, (0, 0)),
            "rank" => (WindowFunc::Rank, (0, 0)),
            "dense_rank" => (WindowFunc::DenseRank, (0, 0)),
            "percent_rank" => (WindowFunc::PercentRank, (0, 0)),
            "cume_dist" => (WindowFunc::CumeDist, (0, 0)),
            "ntile" => (WindowFunc::Ntile, (1, 1)),
            "lag" => (WindowFunc::Lag, (1, 3)),
            "lead" => (WindowFunc::Lead, (1, 3)),
            "first_value" => (WindowFunc::FirstValue, (1, 1)),
            "last_value" => (WindowFunc::LastValue, (1, 1)),
            "nth_value" => (WindowFunc::NthValue, (2, 2)),
            "count" if star => (WindowFunc::Agg(AggFunc::CountStar), (0, 0)),
            "count" => (WindowFunc::Agg(AggFunc::Count), (1, 1)),
            "sum" => (WindowFunc::Agg(AggFunc::Sum), (1, 1)),
            "avg" => (WindowFunc::Agg(AggFunc::Avg), (1, 1)),
            "min" => (WindowFunc::Agg(AggFunc::Min), (1, 1)),
            "max" => (WindowFunc::Agg(AggFunc::Max), (1, 1)),
            other => return Err(Error::unsupported(format!("window function {}", other.to_uppercase()))),
        };
        if args.len() < arity.0 || args.len() > arity.1 {
            return Err(Error::user(
                Code::WrongParamcountToNativeFct,
                format!("Incorrect parameter count in the call to native function '{name}'"),
            ));
        }
        if distinct {
            return Err(Error::unsupported("<window function>(DISTINCT ..)"));
        }
        let frame = window_frame(spec.window_frame.as_ref())?;
        let args = args.iter().map(|a| self.expr(a, scope)).collect::<Result<Vec<_>>>()?;
        let partition = spec.partition_by.iter().map(|p| self.expr(p, scope)).collect::<Result<Vec<_>>>()?;
        let mut order = Vec::with_capacity(spec.order_by.len());
        for ob in &spec.order_by {
            order.push((self.expr(&ob.expr, scope)?, matches!(ob.options.sort, Some(ast::OrderBySort::Desc))));
        }
        let nested = args.iter().chain(&partition).chain(order.iter().map(|o| &o.0));
        let mut inner_window = false;
        for e in nested {
            e.walk(&mut |x| inner_window |= matches!(x, Expr::Window(_)));
        }
        if inner_window {
            return Err(Error::user(
                Code::WindowInvalidUse,
                "You cannot nest a window function in the specification of window",
            ));
        }
        // NTILE's bucket count, NTH_VALUE's position and LAG/LEAD's offset: constant
        // positive (non-negative for offsets) integers, as MySQL requires.
        let positional = match func {
            WindowFunc::Ntile => Some((0, 1)),
            WindowFunc::NthValue => Some((1, 1)),
            WindowFunc::Lag | WindowFunc::Lead => Some((1, 0)),
            _ => None,
        };
        if let Some((i, min)) = positional {
            if let Some(a) = args.get(i) {
                if matches!(a, Expr::Param(_)) {
                    self.uncacheable.get_or_insert_with(|| "a window function's position is a parameter".to_string());
                }
                let unbound = matches!(a, Expr::Param(_)) && self.params.is_empty();
                let ok = unbound
                    || matches!(crate::rules::constant_value(a, self.params), Some(v) if v.as_i64().is_some_and(|n| n >= min));
                if !ok {
                    return Err(Error::user(
                        Code::WrongArguments,
                        format!("Incorrect arguments to {}", name.to_uppercase()),
                    ));
                }
            }
        }
        Ok(Expr::Window(Box::new(WindowCall { func, args, partition, order, frame })))
    }

    /// The window an OVER clause means: its own specification, or a named window (WINDOW
    /// clause of the enclosing SELECT), or a specification that extends a named one with an
    /// ORDER BY or a frame.
    fn window_spec(&self, over: &ast::WindowType, depth: usize) -> Result<ast::WindowSpec> {
        if depth > 32 {
            return Err(Error::user(Code::WindowCircularity, "There is a circularity in the window dependency graph."));
        }
        let named = |name: &ast::Ident| -> Result<ast::WindowSpec> {
            let defs = self.windows.last().map(Vec::as_slice).unwrap_or(&[]);
            let Some(def) = defs.iter().find(|d| lower(&d.0.value) == lower(&name.value)) else {
                return Err(Error::user(
                    Code::WindowNoSuchWindow,
                    format!("Window name '{}' is not defined.", name.value),
                ));
            };
            match &def.1 {
                ast::NamedWindowExpr::NamedWindow(other) => {
                    self.window_spec(&ast::WindowType::NamedWindow(other.clone()), depth + 1)
                }
                ast::NamedWindowExpr::WindowSpec(spec) => {
                    self.window_spec(&ast::WindowType::WindowSpec(spec.clone()), depth + 1)
                }
            }
        };
        match over {
            ast::WindowType::NamedWindow(name) => named(name),
            ast::WindowType::WindowSpec(spec) => {
                let Some(base_name) = &spec.window_name else { return Ok(spec.clone()) };
                let base = named(base_name)?;
                if !spec.partition_by.is_empty() {
                    return Err(Error::user(
                        Code::WindowNoChildPartitioning,
                        "A window which depends on another cannot define partitioning.",
                    ));
                }
                if base.window_frame.is_some() {
                    return Err(Error::user(
                        Code::WindowNoInheritFrame,
                        format!(
                            "Window '{}' has a frame definition, so cannot be referenced by another window.",
                            base_name.value
                        ),
                    ));
                }
                if !base.order_by.is_empty() && !spec.order_by.is_empty() {
                    return Err(Error::user(
                        Code::WindowNoRedefineOrderBy,
                        format!(
                            "Window '<unnamed window>' cannot inherit '{}' since both contain an ORDER BY clause.",
                            base_name.value
                        ),
                    ));
                }
                Ok(ast::WindowSpec {
                    window_name: None,
                    partition_by: base.partition_by,
                    order_by: if spec.order_by.is_empty() { base.order_by } else { spec.order_by.clone() },
                    window_frame: spec.window_frame.clone(),
                })
            }
        }
    }

    fn session_function(&mut self, name: &str, args: &[ast::Expr], scope: &Scope) -> Result<Expr> {
        let s = self.session;
        let now = s.now();
        Ok(Expr::Literal(match name {
            "now" | "current_timestamp" | "sysdate" | "localtime" | "localtimestamp" | "utc_timestamp" => {
                Value::DateTime(now)
            }
            "curdate" | "current_date" => Value::Date(DateTime::from_ymd(now.year, now.month, now.day)),
            "curtime" | "current_time" => {
                Value::Time(((now.hour as i64 * 60 + now.minute as i64) * 60 + now.second as i64) * 1_000_000)
            }
            "database" | "schema" => s.db.clone().map(Value::str).unwrap_or(Value::Null),
            "last_insert_id" => {
                if let Some(a) = args.first() {
                    return self.expr(a, scope);
                }
                Value::UInt(s.last_insert_id)
            }
            "connection_id" => Value::UInt(s.connection_id as u64),
            "version" => Value::str(crate::VERSION),
            "current_user" => Value::str(&*s.user),
            "user" | "session_user" | "system_user" => Value::str(&*s.client_user),
            "unix_timestamp" => {
                if let Some(a) = args.first() {
                    let e = self.expr(a, scope)?;
                    return Ok(Expr::Func("__unix_timestamp".into(), vec![e]));
                }
                Value::Int(s.now_us.div_euclid(1_000_000))
            }
            "found_rows" | "row_count" => Value::Int(s.row_count),
            _ => Value::Null,
        }))
    }
}

/// The types of an information_schema table's columns: those of its values (they are
/// constants, like a VALUES list), VARCHAR where every value is NULL.
pub(crate) fn information_schema_types(mut cols: Vec<OutputColumn>, rows: &[Vec<Value>]) -> Vec<OutputColumn> {
    for (i, c) in cols.iter_mut().enumerate() {
        let types: Vec<SqlType> = rows.iter().filter_map(|r| r.get(i)).map(SqlType::of_value).collect();
        let mut ty = crate::typing::merge(&types);
        if ty.ty.is_none() {
            ty = SqlType::nullable(ColumnType::Varchar(64));
        }
        // Strings widen to the longest value; report the usual catalog width at least.
        if let Some(ColumnType::Varchar(n)) = &mut ty.ty {
            *n = (*n).max(64);
        }
        ty.nullable = true;
        ty.apply(c);
    }
    cols
}

/// Whether `node` reads a relation named `name` without a database (a CTE reference).
fn reads_bare_name<T: ast::Visit>(node: &T, name: &str) -> bool {
    ast::visit_relations(node, |n: &ast::ObjectName| {
        if n.0.len() == 1 && n.0[0].as_ident().is_some_and(|i| i.value.eq_ignore_ascii_case(name)) {
            std::ops::ControlFlow::Break(())
        } else {
            std::ops::ControlFlow::Continue(())
        }
    })
    .is_break()
}

/// 1356: a view refers to something that is gone.
fn invalid_view(view: &ViewInfo) -> Error {
    Error::user(
        Code::ViewInvalid,
        format!(
            "View '{}.{}' references invalid table(s) or column(s) or function(s) or definer/invoker of view lack rights to use them",
            view.db, view.name
        ),
    )
}

/// The key of a view in the binder's caches.
fn view_key(view: &ViewInfo) -> String {
    format!("{}.{}", view.db, view.name).to_ascii_lowercase()
}

/// Views expanded inside views, at most (deeper is reported as recursion).
const MAX_VIEW_NESTING: usize = 32;

/// Parses a stored view query.
pub fn parse_view_query(sql: &str) -> Result<Box<ast::Query>> {
    let dialect = crate::dialect::StrataDialect::default();
    let mut stmts = sqlparser::parser::Parser::parse_sql(&dialect, sql)
        .map_err(|e| Error::internal(format!("stored view query does not parse: {e}")))?;
    crate::depth::check_statements(&mut stmts)?;
    match stmts.pop() {
        Some(ast::Statement::Query(q)) if stmts.is_empty() => Ok(q),
        _ => Err(Error::internal("stored view query is not a query")),
    }
}

/// A window's frame: MySQL's default without one; ROWS and RANGE frames with UNBOUNDED and
/// CURRENT ROW bounds, ROWS also with constant offsets.
fn window_frame(f: Option<&ast::WindowFrame>) -> Result<Frame> {
    let Some(f) = f else { return Ok(Frame::DEFAULT) };
    let rows = match f.units {
        ast::WindowFrameUnits::Rows => true,
        ast::WindowFrameUnits::Range => false,
        ast::WindowFrameUnits::Groups => return Err(Error::parse("GROUPS frames are not MySQL syntax")),
    };
    let illegal = || {
        Error::user(
            Code::WindowFrameIllegal,
            "Window '<unnamed window>': frame start or end is negative, NULL or of non-integral type",
        )
    };
    let offset = |e: &Option<Box<ast::Expr>>| -> Result<Option<u64>> {
        let Some(e) = e else { return Ok(None) };
        if !rows {
            return Err(Error::unsupported("RANGE frames with an offset"));
        }
        match e.as_ref() {
            ast::Expr::Value(v) => match &v.value {
                ast::Value::Number(n, _) => n.parse::<u64>().map(Some).map_err(|_| illegal()),
                _ => Err(illegal()),
            },
            _ => Err(illegal()),
        }
    };
    let bound = |b: &ast::WindowFrameBound| -> Result<FrameBound> {
        Ok(match b {
            ast::WindowFrameBound::CurrentRow => FrameBound::CurrentRow,
            ast::WindowFrameBound::Preceding(e) => match offset(e)? {
                None => FrameBound::UnboundedPreceding,
                Some(n) => FrameBound::Preceding(n),
            },
            ast::WindowFrameBound::Following(e) => match offset(e)? {
                None => FrameBound::UnboundedFollowing,
                Some(n) => FrameBound::Following(n),
            },
        })
    };
    let start = bound(&f.start_bound)?;
    let end = match &f.end_bound {
        Some(b) => bound(b)?,
        None => FrameBound::CurrentRow,
    };
    if start == FrameBound::UnboundedFollowing {
        return Err(Error::user(
            Code::WindowFrameStartIllegal,
            "Window '<unnamed window>': frame start cannot be UNBOUNDED FOLLOWING.",
        ));
    }
    if end == FrameBound::UnboundedPreceding {
        return Err(Error::user(
            Code::WindowFrameEndIllegal,
            "Window '<unnamed window>': frame end cannot be UNBOUNDED PRECEDING.",
        ));
    }
    Ok(Frame { rows, start, end })
}

fn interval_arith(op: BinOp, l: Expr, r: Expr) -> Result<Expr> {
    let (date, iv, sub) = match (l, r) {
        (d, Expr::Func(n, a)) if n == "__interval" => (d, a, op == BinOp::Sub),
        (Expr::Func(n, a), d) if n == "__interval" && op == BinOp::Add => (d, a, false),
        _ => return Err(Error::parse("bad INTERVAL arithmetic")),
    };
    let mut iv = iv;
    let unit = iv.pop().unwrap_or(Expr::Literal(Value::str("day")));
    let amount = iv.pop().unwrap_or(Expr::Literal(Value::Null));
    Ok(Expr::Func(if sub { "date_sub_interval" } else { "date_add_interval" }.into(), vec![date, amount, unit]))
}

/// A numeric literal with a minus sign before it, as MySQL reads it:
/// -9223372036854775808 is BIGINT's minimum, not 0 minus an unsigned.
pub(crate) fn negate_literal(v: Value) -> Result<Value> {
    match v {
        Value::UInt(u) => Ok(i64::try_from(-(u as i128))
            .map(Value::Int)
            .unwrap_or_else(|_| Value::Decimal(-rust_decimal::Decimal::from(u)))),
        v => crate::expr::binary(BinOp::Sub, Value::Int(0), v),
    }
}

/// Unknown column error.
pub fn unknown_column(name: &str, clause: &str) -> Error {
    Error::user(Code::BadField, format!("Unknown column '{name}' in '{clause}'"))
}

fn expr_text(e: &ast::Expr) -> String {
    match e {
        ast::Expr::Identifier(i) => i.value.clone(),
        ast::Expr::CompoundIdentifier(ids) => ids.last().map(|i| i.value.clone()).unwrap_or_default(),
        ast::Expr::Value(v) => match &v.value {
            ast::Value::SingleQuotedString(s) | ast::Value::DoubleQuotedString(s) => s.clone(),
            other => other.to_string(),
        },
        other => other.to_string(),
    }
}

/// The relations of a FROM list, in column order.
fn from_relations(from: &[ast::TableWithJoins]) -> impl Iterator<Item = &ast::TableFactor> {
    from.iter().flat_map(|twj| std::iter::once(&twj.relation).chain(twj.joins.iter().map(|j| &j.relation)))
}

impl Binder<'_> {
    /// `||` concatenates (sql_mode PIPES_AS_CONCAT or ANSI) rather than ORs.
    fn pipes_as_concat(&self) -> bool {
        let mode = self.session.vars.get("sql_mode").and_then(|v| v.to_text()).unwrap_or_default();
        crate::dialect::StrataDialect::for_sql_mode(&String::from_utf8_lossy(&mode)).pipes_as_concat
    }
}

/// `left.c = right.c AND ...` for the USING / NATURAL columns `names` (None when there are
/// none: a NATURAL JOIN without common columns is a cross join). Built as syntax, not text.
fn using_condition(
    items: &[(Relation, JoinKind, Option<ast::Expr>)],
    rel: &Relation,
    names: &[String],
) -> Result<Option<ast::Expr>> {
    let mut cond: Option<ast::Expr> = None;
    for n in names {
        let l = items
            .iter()
            .flat_map(|i| i.0.scope.columns.iter())
            .find(|x| x.name == lower(n))
            .ok_or_else(|| unknown_column(n, "from clause"))?;
        if !rel.scope.columns.iter().any(|x| x.name == lower(n)) {
            return Err(unknown_column(n, "from clause"));
        }
        let col = |t: &str| ast::Expr::CompoundIdentifier(vec![ast::Ident::new(t), ast::Ident::new(n.clone())]);
        let eq = ast::Expr::BinaryOp {
            left: Box::new(col(&l.table)),
            op: ast::BinaryOperator::Eq,
            right: Box::new(col(&rel.alias())),
        };
        cond = Some(match cond {
            None => eq,
            Some(c) => ast::Expr::BinaryOp { left: Box::new(c), op: ast::BinaryOperator::And, right: Box::new(eq) },
        });
    }
    Ok(cond)
}

fn cast_type(dt: &ast::DataType) -> Result<CastType> {
    use ast::DataType as D;
    Ok(match dt {
        D::Signed | D::SignedInteger | D::Int(_) | D::Integer(_) | D::BigInt(_) => CastType::Signed,
        D::Unsigned | D::UnsignedInteger => CastType::Unsigned,
        D::Decimal(info) | D::Numeric(info) | D::Dec(info) => {
            let (p, s) = match info {
                ast::ExactNumberInfo::None => (10, 0),
                ast::ExactNumberInfo::Precision(p) => (*p as u8, 0),
                ast::ExactNumberInfo::PrecisionAndScale(p, s) => (*p as u8, *s as u8),
            };
            CastType::Decimal(p, s)
        }
        D::Double(_) | D::DoublePrecision | D::Float(_) | D::Real => CastType::Double,
        D::Char(_)
        | D::Varchar(_)
        | D::Binary(_)
        | D::Text
        | D::Nvarchar(_)
        | D::CharacterVarying(_)
        | D::Character(_) => CastType::Char,
        D::Date => CastType::Date,
        D::Datetime(_) | D::Timestamp(_, _) => CastType::DateTime,
        D::Time(_, _) => CastType::Time,
        other => return Err(Error::unsupported(format!("CAST AS {other}"))),
    })
}

/// Whether an AST expression contains an aggregate call (not looking into subqueries).
pub fn contains_aggregate(e: &ast::Expr) -> bool {
    use sqlparser::ast::Visit;
    use std::ops::ControlFlow;
    struct V(bool);
    impl ast::Visitor for V {
        type Break = ();
        fn pre_visit_expr(&mut self, e: &ast::Expr) -> ControlFlow<()> {
            if let ast::Expr::Function(f) = e {
                // `SUM(x) OVER (..)` is a window function, not an aggregate.
                if f.over.is_none() && is_aggregate(&lower(&f.name.to_string())) {
                    self.0 = true;
                    return ControlFlow::Break(());
                }
            }
            if matches!(e, ast::Expr::Subquery(_) | ast::Expr::Exists { .. } | ast::Expr::InSubquery { .. }) {
                // Aggregates inside a subquery belong to it; only look at the left side of IN.
                if let ast::Expr::InSubquery { expr, .. } = e {
                    if contains_aggregate(expr) {
                        self.0 = true;
                        return ControlFlow::Break(());
                    }
                }
                return ControlFlow::Continue(());
            }
            ControlFlow::Continue(())
        }
    }
    // The visitor descends into subqueries too; run it on a copy with subqueries stripped.
    let mut v = V(false);
    let stripped = strip_subqueries(e);
    let _ = stripped.visit(&mut v);
    v.0
}

fn strip_subqueries(e: &ast::Expr) -> ast::Expr {
    use sqlparser::ast::VisitMut;
    use std::ops::ControlFlow;
    struct S;
    impl ast::VisitorMut for S {
        type Break = ();
        fn post_visit_expr(&mut self, e: &mut ast::Expr) -> ControlFlow<()> {
            if matches!(e, ast::Expr::Subquery(_) | ast::Expr::Exists { .. }) {
                *e = ast::Expr::Value(ast::Value::Null.into());
            }
            if let ast::Expr::InSubquery { expr, .. } = e {
                *e = (**expr).clone();
            }
            ControlFlow::Continue(())
        }
    }
    let mut c = e.clone();
    let _ = c.visit(&mut S);
    c
}

/// Rewrites an expression over the input rows into one over the aggregation output
/// (group values, then aggregates).
pub fn rewrite_agg(e: Expr, group: &[Expr], aggs: &mut Vec<AggCall>) -> Result<Expr> {
    if let Some(i) = group.iter().position(|g| *g == e) {
        return Ok(Expr::Column(i));
    }
    match e {
        Expr::Agg(call) => {
            let mut call = *call;
            if call.func == AggFunc::Grouping {
                // GROUPING's arguments must be group columns; it refers to them by position.
                let mut positions = Vec::with_capacity(call.args.len());
                for (n, a) in call.args.iter().enumerate() {
                    match group.iter().position(|g| g == a) {
                        Some(i) => positions.push(Expr::Literal(Value::Int(i as i64))),
                        None => {
                            return Err(Error::user(
                                Code::FieldInGroupingNotGroupBy,
                                format!("Argument #{} of GROUPING function is not in GROUP BY", n + 1),
                            ))
                        }
                    }
                }
                call.args = positions;
            }
            let pos = match aggs.iter().position(|a| *a == call) {
                Some(p) => p,
                None => {
                    aggs.push(call);
                    aggs.len() - 1
                }
            };
            Ok(Expr::Column(group.len() + pos))
        }
        Expr::Column(c) => {
            let call = AggCall { func: AggFunc::First, args: vec![Expr::Column(c)], distinct: false };
            let pos = match aggs.iter().position(|a| *a == call) {
                Some(p) => p,
                None => {
                    aggs.push(call);
                    aggs.len() - 1
                }
            };
            Ok(Expr::Column(group.len() + pos))
        }
        other => other.map_children(&mut |c| rewrite_agg(c, group, aggs)),
    }
}

/// [`rewrite_agg`] for aggregated rows that start with the `width` columns of the input
/// row: columns keep their positions, group values and aggregates follow them.
fn rewrite_agg_keeping_row(e: Expr, group: &[Expr], aggs: &mut Vec<AggCall>, width: usize) -> Result<Expr> {
    match e {
        Expr::Column(c) if !group.contains(&Expr::Column(c)) => Ok(Expr::Column(c)),
        e => rewrite_agg(e, group, aggs)?.transform(&mut |x| {
            Ok(match x {
                Expr::Column(i) => Expr::Column(width + i),
                other => other,
            })
        }),
    }
}

/// Replaces the window function calls in `e` by columns after the first `width` ones,
/// collecting the calls (an identical call is computed once).
fn extract_windows(e: Expr, width: usize, calls: &mut Vec<WindowCall>) -> Result<Expr> {
    e.transform(&mut |x| {
        Ok(match x {
            Expr::Window(call) => {
                let pos = match calls.iter().position(|c| *c == *call) {
                    Some(p) => p,
                    None => {
                        calls.push(*call);
                        calls.len() - 1
                    }
                };
                Expr::Column(width + pos)
            }
            other => other,
        })
    })
}

fn check_unique_aliases(rels: &[&Relation]) -> Result<()> {
    let mut seen = std::collections::HashSet::new();
    for r in rels {
        let a = r.alias();
        if !a.is_empty() && !seen.insert(a.clone()) {
            return Err(Error::user(Code::NonUniqTable, format!("Not unique table/alias: '{a}'")));
        }
    }
    Ok(())
}

/// One FROM item being planned.
struct Relation {
    table: Option<Arc<TableInfo>>,
    plan: Option<LogicalPlan>,
    scope: Scope,
}

impl Relation {
    fn table(table: Arc<TableInfo>, alias: &str) -> Relation {
        let scope = Scope {
            columns: table
                .columns
                .iter()
                .enumerate()
                .map(|(i, c)| ScopeColumn {
                    table: lower(alias),
                    name: lower(&c.name),
                    meta: OutputColumn {
                        name: c.name.clone(),
                        table: alias.to_string(),
                        org_table: table.name.clone(),
                        org_name: c.name.clone(),
                        db: table.db.clone(),
                        ty: Some(c.ty.clone()),
                        not_null: !c.nullable,
                        primary: table.pk.as_ref().is_some_and(|p| p.contains(&i)),
                    },
                })
                .collect(),
        };
        Relation { table: Some(table), plan: None, scope }
    }

    fn derived(plan: LogicalPlan, cols: &[OutputColumn], alias: &str) -> Relation {
        let scope = Scope {
            columns: cols
                .iter()
                .map(|c| ScopeColumn {
                    table: lower(alias),
                    name: lower(&c.name),
                    meta: OutputColumn { table: alias.to_string(), ..c.clone() },
                })
                .collect(),
        };
        Relation { table: None, plan: Some(plan), scope }
    }

    fn alias(&self) -> String {
        self.scope.columns.first().map(|c| c.table.clone()).unwrap_or_default()
    }

    /// The relation's rows: a table's scan (locked with `lock`) or the derived plan.
    fn into_plan(self, lock: bool) -> LogicalPlan {
        match (self.table, self.plan) {
            (_, Some(p)) => p,
            (Some(table), None) => LogicalPlan::Scan { table, lock },
            (None, None) => LogicalPlan::Dual,
        }
    }
}

/// The cast that converts a value of type `from` to the numeric result type `to` (DECIMAL
/// or DOUBLE) as MySQL does implicitly, when one is needed: integers, decimals of another
/// scale, decimals into DOUBLE.
fn numeric_coercion(from: &SqlType, to: &SqlType) -> Option<CastType> {
    let cast = match &to.ty {
        Some(ColumnType::Decimal { precision, scale }) => CastType::Decimal(*precision, *scale),
        Some(ColumnType::Double) => CastType::Double,
        _ => return None,
    };
    match (&from.ty, cast) {
        (Some(ColumnType::Int { .. }), _) => Some(cast),
        (Some(ColumnType::Decimal { scale, .. }), CastType::Decimal(_, s)) if *scale != s => Some(cast),
        (Some(ColumnType::Decimal { .. }), CastType::Double) => Some(cast),
        _ => None,
    }
}

/// One input of a set operation with its numeric columns converted to the result's type
/// (MySQL: `SELECT 1 UNION SELECT 2.50` gives 1.00), as casts in a projection.
fn coerce_set_input(plan: LogicalPlan, types: &[SqlType], merged: &[SqlType]) -> LogicalPlan {
    let casts: Vec<Option<CastType>> = types.iter().zip(merged).map(|(t, m)| numeric_coercion(t, m)).collect();
    if casts.iter().all(Option::is_none) {
        return plan;
    }
    let exprs = casts
        .iter()
        .enumerate()
        .map(|(i, c)| match c {
            Some(c) => Expr::Cast(Box::new(Expr::Column(i)), *c),
            None => Expr::Column(i),
        })
        .collect();
    LogicalPlan::Project { input: Box::new(plan), exprs }
}

impl Binder<'_> {
    /// The scope of one table's columns under `alias`.
    pub fn table_scope(table: &Arc<TableInfo>, alias: &str) -> Scope {
        Relation::table(table.clone(), alias).scope
    }

    /// Plans the joined rows of a multi-table UPDATE or DELETE: FROM with WHERE, every row
    /// read locked. Returns the plan, its scope, and for each FROM relation its first column
    /// and its base table (None for a derived table).
    pub fn dml_join(
        &mut self,
        from: &[ast::TableWithJoins],
        selection: Option<&ast::Expr>,
    ) -> Result<(Plan, Scope, Vec<DmlRelation>)> {
        let mut rels = Vec::new();
        let mut rels_scope = Scope::default();
        for r in from_relations(from) {
            // Views of information_schema and CTEs are not base tables.
            let table = match r {
                ast::TableFactor::Table { name, .. } => self.table(name).ok(),
                _ => None,
            };
            rels.push((rels_scope.columns.len(), table));
            rels_scope.columns.extend(self.relation_scope(r)?.columns);
        }
        let mut preds = Vec::new();
        if let Some(w) = selection {
            conjuncts(self.expr(w, &rels_scope)?, &mut preds);
        }
        self.lock_reads = true;
        let (plan, scope) = self.from(from)?;
        let plan = match and_all(preds) {
            Some(pred) => LogicalPlan::Filter { input: Box::new(plan), pred },
            None => plan,
        };
        Ok((self.physical(plan)?, scope, rels))
    }

    /// Plans the row source of a single-table UPDATE or DELETE through the rules and
    /// physical planning, as a one-table join: the access path, the predicate checked on
    /// each row, and the conjuncts that need subqueries (evaluated by the caller).
    pub fn dml_scan(
        &mut self,
        table: &Arc<TableInfo>,
        scope: &Scope,
        selection: Option<&ast::Expr>,
    ) -> Result<(Access, Option<Expr>, Option<Expr>)> {
        let mut preds = Vec::new();
        if let Some(w) = selection {
            conjuncts(self.expr(w, scope)?, &mut preds);
        }
        let (with_sub, local): (Vec<Expr>, Vec<Expr>) = preds.into_iter().partition(|p| p.has_subquery());
        let scan = LogicalPlan::Scan { table: table.clone(), lock: true };
        let join = LogicalPlan::Join {
            inputs: vec![JoinInput::new(scan, table.columns.len(), JoinKind::Inner, Vec::new())],
            filter: local,
            scope: scope.clone(),
        };
        // Conjuncts without columns filter the scan's rows.
        let (scan, constant) = match self.physical(join)? {
            Plan::Filter { input, pred } => (*input, Some(pred)),
            other => (other, None),
        };
        let Plan::Scan { access, filter, .. } = scan else {
            return Err(Error::internal("a one-table join planned as something other than a scan"));
        };
        Ok((access, and_all(filter.into_iter().chain(constant).collect()), and_all(with_sub)))
    }
}
