//! Plans: what the executor runs. A plan is a tree of operators over rows; each node's
//! output row layout is fixed when the plan is built, so expressions refer to columns by
//! position.

use std::sync::Arc;

use crate::catalog::TableInfo;
use crate::expr::{AggCall, Expr, SubqueryKind};
use crate::types::ColumnType;

/// How a scan finds its rows.
#[derive(Clone, Debug)]
pub enum Access {
    /// Every row of the table, in primary key order.
    Full,
    /// Rows whose primary key equals one of these tuples (point / batch point get).
    Points(Vec<Vec<Expr>>),
    /// Rows whose leading primary key columns equal one of these tuples (a range per tuple).
    Prefixes(Vec<Vec<Expr>>),
    /// Primary key: equality on leading columns, then an optional range on the next one.
    PkRange(KeyRange),
    /// An index (by position in `TableInfo::indexes`): equality prefix and optional range,
    /// then a lookup of each row by its handle.
    Index(usize, KeyRange),
}

/// Equality on leading key columns plus an optional range on the column after them.
#[derive(Clone, Debug, Default)]
pub struct KeyRange {
    /// Values of the leading columns.
    pub eq: Vec<Expr>,
    /// Lower bound on the next column: (value, inclusive).
    pub lower: Option<(Expr, bool)>,
    /// Upper bound on the next column: (value, inclusive).
    pub upper: Option<(Expr, bool)>,
    /// What of the scan's filter each row still needs when the key bounds are exact.
    pub residual: Residual,
}

/// What of a scan's filter a row read through an exact key range still has to satisfy.
/// The range's values come from conjuncts of the filter; when every one converts to a key
/// bound that means the same as the comparison (`keyconv::KeyConv::At` exact, or a bound
/// that excludes nothing), the key range alone decides those conjuncts (TiDB's access
/// conditions, as against its filter conditions), so sysbench's `id BETWEEN ? AND ?` is
/// not evaluated again on each of the 100 rows it reads. The scan decides per execution
/// (`exec::scan::KeyBounds::decide`): never for an index range that lets a nullable
/// column's NULLs in, nor for a locking index scan.
#[derive(Clone, Debug, Default)]
pub enum Residual {
    /// The whole filter (nothing is known about where the bounds came from).
    #[default]
    Whole,
    /// The filter less the conjuncts the range was built from (None: nothing is left).
    Rest(Option<Expr>),
}

/// Join kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JoinKind {
    /// INNER / CROSS.
    Inner,
    /// LEFT OUTER.
    Left,
}

/// A plan node.
#[derive(Clone, Debug)]
pub enum Plan {
    /// One row with no columns (SELECT without FROM).
    Dual,
    /// Literal rows.
    Values(Vec<Vec<Expr>>),
    /// Reads a table. `filter` is applied to each row (bound to the table's columns).
    /// With `lock`, rows are read with a current read under pessimistic locks.
    Scan {
        /// The table.
        table: Arc<TableInfo>,
        /// The access path.
        access: Access,
        /// Predicate on the table's row.
        filter: Option<Expr>,
        /// Lock the rows read (FOR UPDATE / DML).
        lock: bool,
        /// At most this many rows (LIMIT + OFFSET pushed down when the query's order is
        /// the access path's key order).
        limit: Option<Expr>,
        /// The columns the plan reads from its rows (None: all); the others are left NULL,
        /// never decoded (`prune::prune_scans`).
        columns: Option<Vec<bool>>,
    },
    /// Keeps rows satisfying the predicate.
    Filter {
        /// Input.
        input: Box<Plan>,
        /// Predicate.
        pred: Expr,
    },
    /// Computes new columns.
    Project {
        /// Input.
        input: Box<Plan>,
        /// Output expressions.
        exprs: Vec<Expr>,
    },
    /// Nested-loop join. When `correlated`, `right` is re-run for every left row with that row
    /// as its innermost outer row (this is how index lookup joins run).
    Join {
        /// Outer side.
        left: Box<Plan>,
        /// Inner side.
        right: Box<Plan>,
        /// Inner or left outer.
        kind: JoinKind,
        /// Condition over `left ++ right`.
        on: Option<Expr>,
        /// Number of columns of the right side (for NULL padding).
        right_width: usize,
        /// Re-run `right` per left row.
        correlated: bool,
    },
    /// Hash join on equal keys (inner or left outer).
    HashJoin {
        /// Probe side.
        left: Box<Plan>,
        /// Build side.
        right: Box<Plan>,
        /// Key expressions over the left row.
        left_keys: Vec<Expr>,
        /// Key expressions over the right row.
        right_keys: Vec<Expr>,
        /// Inner or left outer.
        kind: JoinKind,
        /// Remaining condition over `left ++ right`.
        on: Option<Expr>,
        /// Number of columns of the right side.
        right_width: usize,
        /// Build the hash table from the left side and probe it with the right (inner joins
        /// whose left side is estimated smaller); otherwise the right side is built.
        build_left: bool,
    },
    /// Grouping: output is group values followed by aggregate values.
    Aggregate {
        /// Input.
        input: Box<Plan>,
        /// Group expressions.
        group: Vec<Expr>,
        /// Aggregates.
        aggs: Vec<AggCall>,
        /// WITH ROLLUP: also the super-aggregate rows of each prefix of `group`.
        rollup: bool,
    },
    /// Sorts by keys (expression, descending).
    Sort {
        /// Input.
        input: Box<Plan>,
        /// Keys.
        keys: Vec<(Expr, bool)>,
    },
    /// OFFSET / LIMIT.
    Limit {
        /// Input.
        input: Box<Plan>,
        /// Maximum rows.
        limit: Option<Expr>,
        /// Rows to skip.
        offset: Option<Expr>,
    },
    /// Removes duplicate rows.
    Distinct {
        /// Input.
        input: Box<Plan>,
    },
    /// UNION (ALL) of same-width inputs.
    Union {
        /// Inputs.
        inputs: Vec<Plan>,
        /// Keep duplicates.
        all: bool,
    },
    /// INTERSECT or EXCEPT of same-width inputs (MySQL 8.0.31): rows of `left` that are
    /// (INTERSECT) or are not (EXCEPT) in `right`; with `all`, as multisets.
    SetOp {
        /// Left input.
        left: Box<Plan>,
        /// Right input.
        right: Box<Plan>,
        /// INTERSECT (true) or EXCEPT (false).
        intersect: bool,
        /// Keep duplicates (INTERSECT ALL / EXCEPT ALL).
        all: bool,
    },
    /// A recursive CTE: `seed`'s rows, then `step` run again and again over the rows the
    /// previous round produced (its `WorkTable(id)`) until a round produces none.
    Recursive {
        /// The non-recursive part.
        seed: Box<Plan>,
        /// The recursive part (reads `WorkTable(id)`).
        step: Box<Plan>,
        /// Which work table `step` reads.
        id: usize,
        /// UNION ALL (otherwise rows already produced are dropped).
        all: bool,
        /// `cte_max_recursion_depth`: rounds allowed.
        max_depth: u64,
    },
    /// Window functions: each input row followed by one value per call.
    Window {
        /// Input.
        input: Box<Plan>,
        /// The calls, by output position after the input's columns.
        calls: Vec<crate::expr::WindowCall>,
    },
    /// The rows the previous round of a recursive CTE produced.
    WorkTable(usize),
    /// Keeps the first `width` columns (drops hidden sort keys).
    Truncate {
        /// Input.
        input: Box<Plan>,
        /// Columns kept.
        width: usize,
    },
}

/// A subquery used by an expression.
#[derive(Clone, Debug)]
pub struct SubqueryPlan {
    /// The plan.
    pub plan: Plan,
    /// How its result is used.
    pub kind: SubqueryKind,
    /// Whether it refers to enclosing rows (otherwise it is run once).
    pub correlated: bool,
    /// The type of its first column.
    pub ty: crate::typing::SqlType,
    /// Replaced by a join by the rules (`rules::decorrelate`): no expression refers to it,
    /// its plan is one NULL row and EXPLAIN leaves it out.
    pub replaced: bool,
}

/// Metadata of a result column.
#[derive(Clone, Debug, Default)]
pub struct OutputColumn {
    /// Name shown to the client.
    pub name: String,
    /// Table alias it came from.
    pub table: String,
    /// Underlying table name.
    pub org_table: String,
    /// Underlying column name.
    pub org_name: String,
    /// Database.
    pub db: String,
    /// Declared type, when the column is a table column.
    pub ty: Option<ColumnType>,
    /// NOT NULL.
    pub not_null: bool,
    /// Part of the primary key.
    pub primary: bool,
}

/// A planned query: plan, result columns, and the subqueries its expressions use.
#[derive(Clone, Debug)]
pub struct Query {
    /// The plan.
    pub plan: Plan,
    /// Result columns.
    pub columns: Vec<OutputColumn>,
    /// Subqueries, by id.
    pub subqueries: Arc<Vec<SubqueryPlan>>,
    /// The result's column definitions, made on first execution and kept with the plan
    /// (a cached plan's executions share them, and the connection's encoding of them).
    pub result: std::sync::OnceLock<Arc<crate::result::ResultColumns>>,
}

impl Query {
    /// A query of this plan, result columns and subqueries.
    pub fn new(plan: Plan, columns: Vec<OutputColumn>, subqueries: Arc<Vec<SubqueryPlan>>) -> Query {
        Query { plan, columns, subqueries, result: Default::default() }
    }

    /// The result's column definitions (protocol metadata), made once.
    pub fn result_columns(&self) -> Arc<crate::result::ResultColumns> {
        self.result
            .get_or_init(|| {
                Arc::new(crate::result::ResultColumns::new(
                    self.columns.iter().map(crate::result::Column::from_output).collect(),
                ))
            })
            .clone()
    }
}

impl Plan {
    /// Renders the plan as indented text lines (EXPLAIN).
    pub fn explain(&self, depth: usize, out: &mut Vec<String>) {
        self.explain_with(depth, out, &|_| String::new());
    }

    /// `explain`, each operator's line followed by what `note` says of it (EXPLAIN
    /// ANALYZE's actual rows and time).
    pub fn explain_with(&self, depth: usize, out: &mut Vec<String>, note: &dyn Fn(&Plan) -> String) {
        let pad = "  ".repeat(depth);
        let line: String = match self {
            Plan::Dual => "Dual".into(),
            Plan::Values(rows) => format!("Values rows:{}", rows.len()),
            Plan::Scan { table, access, filter, lock, limit, .. } => {
                let a = match access {
                    Access::Full => "TableFullScan".to_string(),
                    Access::Points(p) => format!("PointGet keys:{}", p.len()),
                    Access::Prefixes(p) => format!("TableRangeScan prefixes:{}", p.len()),
                    Access::PkRange(r) => {
                        format!("TableRangeScan eq:{} range:{}", r.eq.len(), r.lower.is_some() || r.upper.is_some())
                    }
                    Access::Index(i, r) => format!(
                        "IndexLookUp index:{} eq:{} range:{}",
                        table.indexes.get(*i).map(|x| x.name.as_str()).unwrap_or("?"),
                        r.eq.len(),
                        r.lower.is_some() || r.upper.is_some()
                    ),
                };
                format!(
                    "{} table:{}{}{}{}",
                    a,
                    table.name,
                    if filter.is_some() { " filtered" } else { "" },
                    if *lock { " locked" } else { "" },
                    if limit.is_some() { " limited" } else { "" }
                )
            }
            Plan::Filter { .. } => "Selection".into(),
            Plan::Project { exprs, .. } => format!("Projection columns:{}", exprs.len()),
            Plan::Join { kind, correlated, .. } => {
                format!("{}Join {:?}", if *correlated { "IndexLookUp" } else { "NestedLoop" }, kind)
            }
            Plan::HashJoin { kind, build_left, .. } => {
                format!("HashJoin {kind:?}{}", if *build_left { " build:left" } else { "" })
            }
            Plan::Aggregate { group, aggs, rollup, .. } => {
                format!("HashAgg group:{} aggs:{}{}", group.len(), aggs.len(), if *rollup { " rollup" } else { "" })
            }
            Plan::Sort { keys, .. } => format!("Sort keys:{}", keys.len()),
            Plan::Limit { .. } => "Limit".into(),
            Plan::Distinct { .. } => "Distinct".into(),
            Plan::Union { all, .. } => format!("Union{}", if *all { " all" } else { "" }),
            Plan::SetOp { intersect, all, .. } => {
                format!("{}{}", if *intersect { "Intersect" } else { "Except" }, if *all { " all" } else { "" })
            }
            Plan::Recursive { all, .. } => format!("RecursiveCTE{}", if *all { " all" } else { "" }),
            Plan::WorkTable(id) => format!("WorkTable id:{id}"),
            Plan::Window { calls, .. } => format!("Window functions:{}", calls.len()),
            Plan::Truncate { input, .. } => return input.explain_with(depth, out, note),
        };
        out.push(format!("{pad}{line}{}", note(self)));
        for c in self.children() {
            c.explain_with(depth + 1, out, note);
        }
    }

    /// The plans this node reads from (not the subqueries its expressions use).
    pub fn children(&self) -> Vec<&Plan> {
        match self {
            Plan::Dual | Plan::Values(_) | Plan::Scan { .. } | Plan::WorkTable(_) => vec![],
            Plan::Filter { input, .. }
            | Plan::Project { input, .. }
            | Plan::Aggregate { input, .. }
            | Plan::Sort { input, .. }
            | Plan::Limit { input, .. }
            | Plan::Distinct { input }
            | Plan::Window { input, .. }
            | Plan::Truncate { input, .. } => vec![input],
            Plan::Join { left, right, .. } | Plan::HashJoin { left, right, .. } | Plan::SetOp { left, right, .. } => {
                vec![left, right]
            }
            Plan::Union { inputs, .. } => inputs.iter().collect(),
            Plan::Recursive { seed, step, .. } => vec![seed, step],
        }
    }

    /// The inputs, mutably.
    pub fn children_mut(&mut self) -> Vec<&mut Plan> {
        match self {
            Plan::Dual | Plan::Values(_) | Plan::Scan { .. } | Plan::WorkTable(_) => vec![],
            Plan::Filter { input, .. }
            | Plan::Project { input, .. }
            | Plan::Aggregate { input, .. }
            | Plan::Sort { input, .. }
            | Plan::Limit { input, .. }
            | Plan::Distinct { input }
            | Plan::Window { input, .. }
            | Plan::Truncate { input, .. } => vec![&mut **input],
            Plan::Join { left, right, .. } | Plan::HashJoin { left, right, .. } | Plan::SetOp { left, right, .. } => {
                vec![&mut **left, &mut **right]
            }
            Plan::Union { inputs, .. } => inputs.iter_mut().collect(),
            Plan::Recursive { seed, step, .. } => vec![&mut **seed, &mut **step],
        }
    }

    /// The expressions this node evaluates itself (not its children's, nor the plans of
    /// the subqueries they use).
    pub fn own_exprs(&self) -> Vec<&Expr> {
        let mut out: Vec<&Expr> = Vec::new();
        match self {
            Plan::Dual | Plan::WorkTable(_) | Plan::Distinct { .. } | Plan::Union { .. } => {}
            Plan::SetOp { .. } | Plan::Recursive { .. } | Plan::Truncate { .. } => {}
            Plan::Values(rows) => out.extend(rows.iter().flatten()),
            Plan::Scan { access, filter, limit, .. } => {
                match access {
                    Access::Full => {}
                    Access::Points(ts) | Access::Prefixes(ts) => out.extend(ts.iter().flatten()),
                    Access::PkRange(r) | Access::Index(_, r) => {
                        out.extend(&r.eq);
                        out.extend(r.lower.iter().chain(&r.upper).map(|(e, _)| e));
                    }
                }
                out.extend(filter.iter().chain(limit));
            }
            Plan::Filter { pred, .. } => out.push(pred),
            Plan::Project { exprs, .. } => out.extend(exprs),
            Plan::Join { on, .. } => out.extend(on),
            Plan::HashJoin { left_keys, right_keys, on, .. } => {
                out.extend(left_keys.iter().chain(right_keys).chain(on));
            }
            Plan::Aggregate { group, aggs, .. } => {
                out.extend(group);
                out.extend(aggs.iter().flat_map(|a| &a.args));
            }
            Plan::Sort { keys, .. } => out.extend(keys.iter().map(|(e, _)| e)),
            Plan::Limit { limit, offset, .. } => out.extend(limit.iter().chain(offset)),
            Plan::Window { calls, .. } => {
                for c in calls {
                    out.extend(c.args.iter().chain(&c.partition).chain(c.order.iter().map(|(e, _)| e)));
                }
            }
        }
        out
    }

    /// Every table scan in this plan (not in its subqueries), in plan order.
    pub fn scans(&self) -> Vec<&Plan> {
        let mut out = Vec::new();
        let mut stack = vec![self];
        while let Some(p) = stack.pop() {
            if let Plan::Scan { .. } = p {
                out.push(p);
            }
            stack.extend(p.children().into_iter().rev());
        }
        out
    }
}
