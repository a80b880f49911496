//! Logical plans: what a query computes, as the binder understands it, before anyone has
//! decided how. A table is read by a `Scan` that names the table and nothing else; the
//! tables of a FROM clause are one `Join` whose inputs keep their ON conditions, under a
//! `Filter` for WHERE. Rules (`crate::rules`) rewrite this plan (OR factoring, predicate
//! pushdown into joins, join order, constant propagation); `crate::physical` then chooses
//! access paths (point
//! get, ranges, indexes) and join algorithms (index lookup, hash, nested loop) and builds
//! the `plan::Plan` the row executor runs and the column engine translates.
//!
//! Expressions are bound as for the physical plan: columns by position in the node's
//! input row, the enclosing rows of a correlated subquery as `Expr::Outer`. Every node has
//! a schema (`LogicalPlan::schema`: MySQL type and nullability per output column, typed
//! from the tables' columns up through each node's expressions); a query's result
//! metadata takes its types from it.

use std::sync::Arc;

use crate::binder::Scope;
use crate::catalog::TableInfo;
use crate::expr::{AggCall, Expr, SubqueryKind, WindowCall};
use crate::plan::JoinKind;
use crate::typing::{expr_type, merge, SqlType, TypeEnv};

/// What `LogicalPlan::schema` needs besides the plan: the statement's subqueries (their
/// value types) and parameter values.
pub struct SchemaEnv<'a> {
    /// The statement's subqueries.
    pub subqueries: &'a [LogicalSubquery],
    /// Parameter values, when known.
    pub params: &'a [strata_common::Value],
    /// Work tables of the recursive CTEs being typed.
    work: std::cell::RefCell<Vec<(usize, Vec<SqlType>)>>,
}

impl<'a> SchemaEnv<'a> {
    /// An environment for a statement's plans.
    pub fn new(subqueries: &'a [LogicalSubquery], params: &'a [strata_common::Value]) -> SchemaEnv<'a> {
        SchemaEnv { subqueries, params, work: Default::default() }
    }

    fn row<'r>(&'r self, columns: &'r [SqlType]) -> RowTypes<'r> {
        RowTypes { columns, env: self }
    }
}

/// A row's column types, for `typing::expr_type`.
struct RowTypes<'r> {
    columns: &'r [SqlType],
    env: &'r SchemaEnv<'r>,
}

impl TypeEnv for RowTypes<'_> {
    fn column(&self, i: usize) -> SqlType {
        self.columns.get(i).cloned().unwrap_or_else(SqlType::unknown)
    }

    fn subquery(&self, id: usize) -> SqlType {
        self.env.subqueries.get(id).map(|s| s.ty.clone()).unwrap_or_else(SqlType::unknown)
    }

    fn param(&self, i: usize) -> SqlType {
        self.env.params.get(i).map(|v| SqlType::of_value(v).or_null(true)).unwrap_or_else(SqlType::unknown)
    }
}

/// A logical plan node.
#[derive(Clone, Debug)]
pub enum LogicalPlan {
    /// One row with no columns (SELECT without FROM).
    Dual,
    /// Literal rows.
    Values(Vec<Vec<Expr>>),
    /// Every row of a table (which rows a predicate keeps, and how to find them, is the
    /// physical planner's business). With `lock`, rows are read with a current read under
    /// pessimistic locks (FOR UPDATE, multi-table DML).
    Scan {
        /// The table.
        table: Arc<TableInfo>,
        /// Lock the rows read.
        lock: bool,
    },
    /// The FROM clause: inputs joined left to right, each row the concatenation of the
    /// inputs' rows.
    Join {
        /// Inputs in join order.
        inputs: Vec<JoinInput>,
        /// Conjuncts over the joined row, each applied as early as the columns it reads
        /// allow: WHERE conjuncts the `predicate_pushdown` rule moved here (and, for an
        /// inner join whose order a rule chose, its ON conjuncts). None reads a subquery.
        filter: Vec<Expr>,
        /// The joined row's columns (names and types).
        scope: Scope,
    },
    /// Keeps rows satisfying the predicate.
    Filter {
        /// Input.
        input: Box<LogicalPlan>,
        /// Predicate.
        pred: Expr,
    },
    /// Computes new columns.
    Project {
        /// Input.
        input: Box<LogicalPlan>,
        /// Output expressions.
        exprs: Vec<Expr>,
    },
    /// Grouping: output is group values followed by aggregate values.
    Aggregate {
        /// Input.
        input: Box<LogicalPlan>,
        /// Group expressions.
        group: Vec<Expr>,
        /// Aggregates.
        aggs: Vec<AggCall>,
        /// WITH ROLLUP.
        rollup: bool,
    },
    /// Sorts by keys (expression, descending).
    Sort {
        /// Input.
        input: Box<LogicalPlan>,
        /// Keys.
        keys: Vec<(Expr, bool)>,
    },
    /// OFFSET / LIMIT.
    Limit {
        /// Input.
        input: Box<LogicalPlan>,
        /// Maximum rows.
        limit: Option<Expr>,
        /// Rows to skip.
        offset: Option<Expr>,
    },
    /// Removes duplicate rows.
    Distinct {
        /// Input.
        input: Box<LogicalPlan>,
    },
    /// UNION (ALL) of same-width inputs.
    Union {
        /// Inputs.
        inputs: Vec<LogicalPlan>,
        /// Keep duplicates.
        all: bool,
    },
    /// INTERSECT or EXCEPT (see `plan::Plan::SetOp`).
    SetOp {
        /// Left input.
        left: Box<LogicalPlan>,
        /// Right input.
        right: Box<LogicalPlan>,
        /// INTERSECT (true) or EXCEPT (false).
        intersect: bool,
        /// Keep duplicates.
        all: bool,
    },
    /// A recursive CTE (see `plan::Plan::Recursive`).
    Recursive {
        /// The non-recursive part.
        seed: Box<LogicalPlan>,
        /// The recursive part.
        step: Box<LogicalPlan>,
        /// Which work table `step` reads.
        id: usize,
        /// UNION ALL.
        all: bool,
        /// Rounds allowed.
        max_depth: u64,
    },
    /// Window functions: each input row followed by one value per call.
    Window {
        /// Input.
        input: Box<LogicalPlan>,
        /// The calls.
        calls: Vec<WindowCall>,
    },
    /// The rows the previous round of a recursive CTE produced.
    WorkTable(usize),
    /// Keeps the first `width` columns.
    Truncate {
        /// Input.
        input: Box<LogicalPlan>,
        /// Columns kept.
        width: usize,
    },
}

/// One input of a `Join`.
#[derive(Clone, Debug)]
pub struct JoinInput {
    /// Its rows.
    pub plan: LogicalPlan,
    /// How it joins the inputs before it (the first input's kind is Inner).
    pub kind: JoinKind,
    /// ON conjuncts, over the joined row up to and including this input.
    pub on: Vec<Expr>,
    /// Columns of its rows.
    pub width: usize,
    /// A hint from join ordering: the rows joined so far are estimated fewer than this
    /// input's, so an inner hash join should build on them.
    pub build_left: bool,
}

impl JoinInput {
    /// An input of `width` columns joined with `kind` on `on`.
    pub fn new(plan: LogicalPlan, width: usize, kind: JoinKind, on: Vec<Expr>) -> JoinInput {
        JoinInput { plan, kind, on, width, build_left: false }
    }
}

/// A subquery used by an expression, before physical planning.
#[derive(Clone, Debug)]
pub struct LogicalSubquery {
    /// The plan.
    pub plan: LogicalPlan,
    /// How its result is used.
    pub kind: SubqueryKind,
    /// Whether it refers to enclosing rows.
    pub correlated: bool,
    /// The type of its first column.
    pub ty: crate::typing::SqlType,
    /// The row its `Expr::Outer(0, ..)` references read: the enclosing query's FROM row (or
    /// whichever row the expression holding the subquery was bound against).
    pub outer: Scope,
}

impl LogicalPlan {
    /// The plans this node reads from.
    pub fn children(&self) -> Vec<&LogicalPlan> {
        match self {
            LogicalPlan::Dual | LogicalPlan::Values(_) | LogicalPlan::Scan { .. } | LogicalPlan::WorkTable(_) => {
                vec![]
            }
            LogicalPlan::Join { inputs, .. } => inputs.iter().map(|i| &i.plan).collect(),
            LogicalPlan::Filter { input, .. }
            | LogicalPlan::Project { input, .. }
            | LogicalPlan::Aggregate { input, .. }
            | LogicalPlan::Sort { input, .. }
            | LogicalPlan::Limit { input, .. }
            | LogicalPlan::Distinct { input }
            | LogicalPlan::Window { input, .. }
            | LogicalPlan::Truncate { input, .. } => vec![input],
            LogicalPlan::SetOp { left, right, .. } => vec![left, right],
            LogicalPlan::Union { inputs, .. } => inputs.iter().collect(),
            LogicalPlan::Recursive { seed, step, .. } => vec![seed, step],
        }
    }

    /// The node with each of its children replaced by `f(child)`.
    pub fn map_children(
        self,
        f: &mut dyn FnMut(LogicalPlan) -> strata_common::Result<LogicalPlan>,
    ) -> strata_common::Result<LogicalPlan> {
        crate::depth::ensure_stack()?;
        let go = |p: Box<LogicalPlan>, f: &mut dyn FnMut(LogicalPlan) -> strata_common::Result<LogicalPlan>| {
            f(*p).map(Box::new)
        };
        Ok(match self {
            LogicalPlan::Join { inputs, filter, scope } => LogicalPlan::Join {
                inputs: inputs
                    .into_iter()
                    .map(|i| Ok(JoinInput { plan: f(i.plan)?, ..i }))
                    .collect::<strata_common::Result<_>>()?,
                filter,
                scope,
            },
            LogicalPlan::Filter { input, pred } => LogicalPlan::Filter { input: go(input, f)?, pred },
            LogicalPlan::Project { input, exprs } => LogicalPlan::Project { input: go(input, f)?, exprs },
            LogicalPlan::Aggregate { input, group, aggs, rollup } => {
                LogicalPlan::Aggregate { input: go(input, f)?, group, aggs, rollup }
            }
            LogicalPlan::Sort { input, keys } => LogicalPlan::Sort { input: go(input, f)?, keys },
            LogicalPlan::Limit { input, limit, offset } => LogicalPlan::Limit { input: go(input, f)?, limit, offset },
            LogicalPlan::Distinct { input } => LogicalPlan::Distinct { input: go(input, f)? },
            LogicalPlan::Window { input, calls } => LogicalPlan::Window { input: go(input, f)?, calls },
            LogicalPlan::Truncate { input, width } => LogicalPlan::Truncate { input: go(input, f)?, width },
            LogicalPlan::Union { inputs, all } => LogicalPlan::Union {
                inputs: inputs.into_iter().map(&mut *f).collect::<strata_common::Result<_>>()?,
                all,
            },
            LogicalPlan::SetOp { left, right, intersect, all } => {
                LogicalPlan::SetOp { left: go(left, f)?, right: go(right, f)?, intersect, all }
            }
            LogicalPlan::Recursive { seed, step, id, all, max_depth } => {
                LogicalPlan::Recursive { seed: go(seed, f)?, step: go(step, f)?, id, all, max_depth }
            }
            leaf @ (LogicalPlan::Dual
            | LogicalPlan::Values(_)
            | LogicalPlan::Scan { .. }
            | LogicalPlan::WorkTable(_)) => leaf,
        })
    }

    /// The node with each expression it evaluates itself (not its children's) replaced by
    /// `f(expr)`: predicates, projections, group keys and aggregate arguments, sort keys,
    /// limits, window calls, literal rows, join filters and ON conditions.
    pub fn map_exprs(
        self,
        f: &mut dyn FnMut(Expr) -> strata_common::Result<Expr>,
    ) -> strata_common::Result<LogicalPlan> {
        use strata_common::Result;
        let all =
            |es: Vec<Expr>, f: &mut dyn FnMut(Expr) -> Result<Expr>| es.into_iter().map(f).collect::<Result<Vec<_>>>();
        Ok(match self {
            LogicalPlan::Values(rows) => {
                LogicalPlan::Values(rows.into_iter().map(|r| all(r, &mut *f)).collect::<Result<_>>()?)
            }
            LogicalPlan::Join { inputs, filter, scope } => LogicalPlan::Join {
                inputs: inputs
                    .into_iter()
                    .map(|i| Ok(JoinInput { on: all(i.on, &mut *f)?, ..i }))
                    .collect::<Result<_>>()?,
                filter: all(filter, &mut *f)?,
                scope,
            },
            LogicalPlan::Filter { input, pred } => LogicalPlan::Filter { input, pred: f(pred)? },
            LogicalPlan::Project { input, exprs } => LogicalPlan::Project { input, exprs: all(exprs, &mut *f)? },
            LogicalPlan::Aggregate { input, group, aggs, rollup } => LogicalPlan::Aggregate {
                input,
                group: all(group, &mut *f)?,
                aggs: aggs
                    .into_iter()
                    .map(|a| Ok(AggCall { args: all(a.args, &mut *f)?, ..a }))
                    .collect::<Result<_>>()?,
                rollup,
            },
            LogicalPlan::Sort { input, keys } => LogicalPlan::Sort {
                input,
                keys: keys.into_iter().map(|(e, desc)| Ok((f(e)?, desc))).collect::<Result<_>>()?,
            },
            LogicalPlan::Limit { input, limit, offset } => LogicalPlan::Limit {
                input,
                limit: limit.map(&mut *f).transpose()?,
                offset: offset.map(&mut *f).transpose()?,
            },
            LogicalPlan::Window { input, calls } => LogicalPlan::Window {
                input,
                calls: calls
                    .into_iter()
                    .map(|c| {
                        Ok(WindowCall {
                            args: all(c.args, &mut *f)?,
                            partition: all(c.partition, &mut *f)?,
                            order: c.order.into_iter().map(|(e, d)| Ok((f(e)?, d))).collect::<Result<_>>()?,
                            ..c
                        })
                    })
                    .collect::<Result<_>>()?,
            },
            other @ (LogicalPlan::Dual
            | LogicalPlan::Scan { .. }
            | LogicalPlan::Distinct { .. }
            | LogicalPlan::Union { .. }
            | LogicalPlan::SetOp { .. }
            | LogicalPlan::Recursive { .. }
            | LogicalPlan::WorkTable(_)
            | LogicalPlan::Truncate { .. }) => other,
        })
    }

    /// Rewrites every node bottom-up with `f` (children first, then the node).
    pub fn transform_up(
        self,
        f: &mut dyn FnMut(LogicalPlan) -> strata_common::Result<LogicalPlan>,
    ) -> strata_common::Result<LogicalPlan> {
        let node = self.map_children(&mut |c| c.transform_up(&mut *f))?;
        f(node)
    }

    /// The types of the node's output columns (MySQL type, nullability, decimal shape),
    /// derived from the tables' column types through every node's expressions with
    /// `typing::expr_type`. A recursive CTE's work table has its seed's types; enclosing
    /// rows' columns are of unknown type.
    pub fn schema(&self, env: &SchemaEnv) -> strata_common::Result<Vec<SqlType>> {
        crate::depth::ensure_stack()?;
        let over = |input: &LogicalPlan| input.schema(env);
        Ok(match self {
            LogicalPlan::Dual => Vec::new(),
            LogicalPlan::Values(rows) => {
                let width = rows.first().map_or(0, Vec::len);
                (0..width)
                    .map(|c| {
                        let types: Vec<SqlType> =
                            rows.iter().filter_map(|r| r.get(c)).map(|e| expr_type(e, &env.row(&[]))).collect();
                        merge(&types)
                    })
                    .collect()
            }
            LogicalPlan::Scan { table, .. } => {
                table.columns.iter().map(|c| SqlType { ty: Some(c.ty.clone()), nullable: c.nullable }).collect()
            }
            LogicalPlan::Join { scope, .. } => scope.columns.iter().map(|c| SqlType::of_output(&c.meta)).collect(),
            LogicalPlan::Filter { input, .. }
            | LogicalPlan::Sort { input, .. }
            | LogicalPlan::Limit { input, .. }
            | LogicalPlan::Distinct { input } => over(input)?,
            LogicalPlan::Project { input, exprs } => {
                let row = over(input)?;
                exprs.iter().map(|e| expr_type(e, &env.row(&row))).collect()
            }
            LogicalPlan::Aggregate { input, group, aggs, rollup } => {
                let row = over(input)?;
                let types = env.row(&row);
                group
                    .iter()
                    .map(|g| expr_type(g, &types).or_null(*rollup))
                    .chain(aggs.iter().map(|a| expr_type(&Expr::Agg(Box::new(a.clone())), &types)))
                    .collect()
            }
            LogicalPlan::Union { inputs, .. } => {
                let schemas = inputs.iter().map(over).collect::<strata_common::Result<Vec<_>>>()?;
                let width = schemas.first().map_or(0, Vec::len);
                (0..width)
                    .map(|c| merge(&schemas.iter().filter_map(|s| s.get(c).cloned()).collect::<Vec<_>>()))
                    .collect()
            }
            LogicalPlan::SetOp { left, .. } => over(left)?,
            LogicalPlan::Recursive { seed, step, id, .. } => {
                let types = over(seed)?;
                env.work.borrow_mut().push((*id, types.clone()));
                let stepped = over(step);
                env.work.borrow_mut().pop();
                let stepped = stepped?;
                // Rows of the recursive part take the seed's types; either may hold NULLs.
                types.into_iter().zip(stepped).map(|(a, b)| a.or_null(b.nullable)).collect()
            }
            LogicalPlan::Window { input, calls } => {
                let row = over(input)?;
                let types = env.row(&row);
                let added: Vec<SqlType> =
                    calls.iter().map(|c| expr_type(&Expr::Window(Box::new(c.clone())), &types)).collect();
                row.into_iter().chain(added).collect()
            }
            LogicalPlan::WorkTable(id) => {
                env.work.borrow().iter().rev().find(|(w, _)| w == id).map(|(_, t)| t.clone()).unwrap_or_default()
            }
            LogicalPlan::Truncate { input, width } => over(input)?.into_iter().take(*width).collect(),
        })
    }

    /// Renders the plan as indented lines, with the expressions each node evaluates (a
    /// rule trace prints this after every rule).
    pub fn explain(&self, depth: usize, out: &mut Vec<String>) {
        let pad = "  ".repeat(depth);
        let list = |es: &[Expr]| es.iter().map(|e| format!("{e:?}")).collect::<Vec<_>>().join(", ");
        let line = match self {
            LogicalPlan::Dual => "Dual".to_string(),
            LogicalPlan::Values(rows) => format!("Values rows:{}", rows.len()),
            LogicalPlan::Scan { table, lock } => {
                format!("Scan table:{}{}", table.name, if *lock { " locked" } else { "" })
            }
            LogicalPlan::Join { inputs, filter, .. } => {
                let kinds = inputs
                    .iter()
                    .map(|i| {
                        let kind = match i.kind {
                            JoinKind::Inner => "inner",
                            JoinKind::Left => "left",
                        };
                        if i.on.is_empty() {
                            kind.to_string()
                        } else {
                            format!("{kind} on [{}]", list(&i.on))
                        }
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                format!("Join inputs:[{kinds}] filter:[{}]", list(filter))
            }
            LogicalPlan::Filter { pred, .. } => format!("Filter {pred:?}"),
            LogicalPlan::Project { exprs, .. } => format!("Project [{}]", list(exprs)),
            LogicalPlan::Aggregate { group, aggs, rollup, .. } => {
                format!("Aggregate group:[{}] aggs:{}{}", list(group), aggs.len(), if *rollup { " rollup" } else { "" })
            }
            LogicalPlan::Sort { keys, .. } => format!("Sort keys:{}", keys.len()),
            LogicalPlan::Limit { .. } => "Limit".to_string(),
            LogicalPlan::Distinct { .. } => "Distinct".to_string(),
            LogicalPlan::Union { all, .. } => format!("Union{}", if *all { " all" } else { "" }),
            LogicalPlan::SetOp { intersect, all, .. } => {
                format!("{}{}", if *intersect { "Intersect" } else { "Except" }, if *all { " all" } else { "" })
            }
            LogicalPlan::Recursive { all, .. } => format!("RecursiveCTE{}", if *all { " all" } else { "" }),
            LogicalPlan::Window { calls, .. } => format!("Window functions:{}", calls.len()),
            LogicalPlan::WorkTable(id) => format!("WorkTable id:{id}"),
            LogicalPlan::Truncate { width, .. } => format!("Truncate width:{width}"),
        };
        out.push(format!("{pad}{line}"));
        for c in self.children() {
            c.explain(depth + 1, out);
        }
    }
}
