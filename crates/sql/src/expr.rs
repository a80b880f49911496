//! Bound expressions and their evaluation with MySQL semantics: three-valued logic, integer
//! arithmetic that errors on overflow, exact decimal arithmetic, division by zero giving
//! NULL, and string/number/date coercions.

use std::cmp::Ordering;

use rust_decimal::prelude::{FromPrimitive, ToPrimitive};
use rust_decimal::{Decimal, RoundingStrategy};
use strata_common::time::DateTime;
use strata_common::{Code, Error, Result, Value};

use crate::functions;

/// A row of values.
pub type Row = Vec<Value>;

/// Binary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BinOp {
    /// +
    Add,
    /// -
    Sub,
    /// *
    Mul,
    /// /
    Div,
    /// DIV
    IntDiv,
    /// % / MOD
    Mod,
    /// =
    Eq,
    /// <=>
    NullSafeEq,
    /// <> / !=
    NotEq,
    /// <
    Lt,
    /// <=
    LtEq,
    /// >
    Gt,
    /// >=
    GtEq,
    /// AND
    And,
    /// OR
    Or,
    /// XOR
    Xor,
    /// &
    BitAnd,
    /// |
    BitOr,
    /// ^
    BitXor,
    /// <<
    Shl,
    /// >>
    Shr,
}

/// Unary operators.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UnaryOp {
    /// NOT / !
    Not,
    /// -
    Neg,
    /// ~
    BitNot,
}

/// Aggregate functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFunc {
    /// COUNT(*)
    CountStar,
    /// COUNT(expr)
    Count,
    /// SUM
    Sum,
    /// AVG
    Avg,
    /// MIN
    Min,
    /// MAX
    Max,
    /// Any value of the group (non-aggregated columns, as MySQL without ONLY_FULL_GROUP_BY).
    First,
    /// GROUP_CONCAT(expr) with ',' separator.
    GroupConcat,
    /// GROUPING(a, ...) under WITH ROLLUP; its arguments are the positions of the group
    /// columns (as integer literals) once the aggregation rewrite has run.
    Grouping,
}

/// An aggregate call.
#[derive(Clone, Debug, PartialEq)]
pub struct AggCall {
    /// The function.
    pub func: AggFunc,
    /// Its arguments (one, or several for COUNT(DISTINCT a, b)).
    pub args: Vec<Expr>,
    /// DISTINCT.
    pub distinct: bool,
}

/// Window functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowFunc {
    /// ROW_NUMBER()
    RowNumber,
    /// RANK()
    Rank,
    /// DENSE_RANK()
    DenseRank,
    /// LAG(expr [, offset [, default]])
    Lag,
    /// LEAD(expr [, offset [, default]])
    Lead,
    /// FIRST_VALUE(expr)
    FirstValue,
    /// LAST_VALUE(expr)
    LastValue,
    /// NTH_VALUE(expr, n)
    NthValue,
    /// NTILE(n)
    Ntile,
    /// PERCENT_RANK()
    PercentRank,
    /// CUME_DIST()
    CumeDist,
    /// An aggregate over the frame (never DISTINCT: MySQL has no DISTINCT window
    /// aggregates).
    Agg(AggFunc),
}

/// One end of a window frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameBound {
    /// UNBOUNDED PRECEDING
    UnboundedPreceding,
    /// N PRECEDING
    Preceding(u64),
    /// CURRENT ROW (in a RANGE frame: the row's first or last peer)
    CurrentRow,
    /// N FOLLOWING
    Following(u64),
    /// UNBOUNDED FOLLOWING
    UnboundedFollowing,
}

/// A window frame: by position (ROWS) or by peers (RANGE, whose offsets are not supported
/// yet).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    /// ROWS, else RANGE.
    pub rows: bool,
    /// Where it starts.
    pub start: FrameBound,
    /// Where it ends.
    pub end: FrameBound,
}

impl Frame {
    /// MySQL's default frame: with ORDER BY from the partition's start to the current row's
    /// last peer (RANGE UNBOUNDED PRECEDING); without, the whole partition (every row is a
    /// peer).
    pub const DEFAULT: Frame =
        Frame { rows: false, start: FrameBound::UnboundedPreceding, end: FrameBound::CurrentRow };

    /// The frame of the partition's row `k` of `n` as a range of positions, given the
    /// row's peer group `peers` (positions, in window order).
    pub fn at(&self, k: usize, n: usize, peers: std::ops::Range<usize>) -> std::ops::Range<usize> {
        let start = match self.start {
            FrameBound::UnboundedPreceding => 0,
            FrameBound::Preceding(o) => k.saturating_sub(o.min(usize::MAX as u64) as usize),
            FrameBound::CurrentRow if self.rows => k,
            FrameBound::CurrentRow => peers.start,
            FrameBound::Following(o) => k.saturating_add(o.min(usize::MAX as u64) as usize),
            FrameBound::UnboundedFollowing => n,
        };
        let end = match self.end {
            FrameBound::UnboundedPreceding => 0,
            FrameBound::Preceding(o) => (k + 1).saturating_sub(o.min(usize::MAX as u64) as usize),
            FrameBound::CurrentRow if self.rows => k + 1,
            FrameBound::CurrentRow => peers.end,
            FrameBound::Following(o) => k.saturating_add(o.min(usize::MAX as u64) as usize).saturating_add(1),
            FrameBound::UnboundedFollowing => n,
        };
        let (start, end) = (start.min(n), end.min(n));
        start..end.max(start)
    }
}

/// A window function call: `func(args) OVER (PARTITION BY .. ORDER BY .. frame)`. The
/// frame matters to FIRST_VALUE, LAST_VALUE, NTH_VALUE and aggregates; the ranking
/// functions, LAG and LEAD ignore it (as in MySQL).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowCall {
    /// The function.
    pub func: WindowFunc,
    /// Its arguments.
    pub args: Vec<Expr>,
    /// PARTITION BY.
    pub partition: Vec<Expr>,
    /// ORDER BY (expression, descending).
    pub order: Vec<(Expr, bool)>,
    /// The frame.
    pub frame: Frame,
}

/// Target types of CAST/CONVERT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastType {
    /// SIGNED (INTEGER)
    Signed,
    /// UNSIGNED (INTEGER)
    Unsigned,
    /// DECIMAL(p, s)
    Decimal(u8, u8),
    /// DOUBLE / FLOAT / REAL
    Double,
    /// CHAR / VARCHAR / BINARY
    Char,
    /// DATE
    Date,
    /// DATETIME
    DateTime,
    /// TIME
    Time,
}

/// How a subquery is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SubqueryKind {
    /// `(SELECT x ...)` as a value.
    Scalar,
    /// `EXISTS (...)`.
    Exists,
    /// `expr IN (SELECT ...)`: the result rows.
    Rows,
}

/// A bound expression: names resolved to positions.
#[derive(Clone, Debug, PartialEq)]
pub enum Expr {
    /// A column of the input row.
    Column(usize),
    /// A column of an enclosing query's row (correlated subqueries); depth 0 is the
    /// innermost enclosing query.
    Outer(usize, usize),
    /// A constant.
    Literal(Value),
    /// A `?` parameter of a prepared statement.
    Param(usize),
    /// Unary operation.
    Unary(UnaryOp, Box<Expr>),
    /// Binary operation.
    Binary(BinOp, Box<Expr>, Box<Expr>),
    /// IS (NOT) NULL.
    IsNull(Box<Expr>, bool),
    /// IS (NOT) TRUE / FALSE: (expr, want_true, negated).
    IsBool(Box<Expr>, bool, bool),
    /// (NOT) IN (list).
    InList(Box<Expr>, Vec<Expr>, bool),
    /// (NOT) BETWEEN.
    Between(Box<Expr>, Box<Expr>, Box<Expr>, bool),
    /// (NOT) LIKE with escape character.
    Like(Box<Expr>, Box<Expr>, char, bool),
    /// CASE (operand) WHEN .. THEN .. ELSE .. END.
    Case(Option<Box<Expr>>, Vec<(Expr, Expr)>, Option<Box<Expr>>),
    /// CAST.
    Cast(Box<Expr>, CastType),
    /// A scalar function by (lower-case) name.
    Func(String, Vec<Expr>),
    /// An aggregate (only before the aggregation rewrite).
    Agg(Box<AggCall>),
    /// A subquery, by its index in the statement's subquery list.
    Subquery(usize, SubqueryKind),
    /// `expr (NOT) IN (subquery)`.
    InSubquery(Box<Expr>, usize, bool),
    /// A row constructor `(a, b)`.
    Row(Vec<Expr>),
    /// A window function (only before the window rewrite).
    Window(Box<WindowCall>),
}

/// Results of the subqueries of the expression being evaluated, computed for the current
/// row before evaluation.
#[derive(Default, Clone, Debug)]
pub struct SubqueryValues {
    /// Indexed by subquery id.
    pub values: Vec<Option<SubqueryValue>>,
}

/// One subquery's result.
#[derive(Clone, Debug)]
pub enum SubqueryValue {
    /// Scalar value.
    Scalar(Value),
    /// Whether any row exists.
    Exists(bool),
    /// All rows.
    Rows(Vec<Row>),
}

/// What evaluation needs besides the row.
pub struct EvalCtx<'a> {
    /// Prepared statement parameters.
    pub params: &'a [Value],
    /// Enclosing rows, innermost last.
    pub outer: &'a [Row],
    /// Subquery results for the current row.
    pub subqueries: &'a SubqueryValues,
}

impl Expr {
    /// A literal.
    pub fn lit(v: Value) -> Expr {
        Expr::Literal(v)
    }

    /// Whether the expression refers to no column of the current row (it may refer to
    /// parameters and enclosing rows): such an expression is constant during one execution.
    pub fn is_row_constant(&self) -> bool {
        let mut constant = true;
        self.walk(&mut |e| {
            if matches!(e, Expr::Column(_) | Expr::Agg(_) | Expr::Window(_) | Expr::Subquery(..) | Expr::InSubquery(..))
            {
                constant = false;
            }
            if let Expr::Func(name, _) = e {
                if matches!(name.as_str(), "rand" | "uuid") {
                    constant = false;
                }
            }
        });
        constant
    }

    /// Visits every node.
    pub fn walk(&self, f: &mut dyn FnMut(&Expr)) {
        f(self);
        match self {
            Expr::Unary(_, a)
            | Expr::IsNull(a, _)
            | Expr::IsBool(a, _, _)
            | Expr::Cast(a, _)
            | Expr::InSubquery(a, _, _) => a.walk(f),
            Expr::Binary(_, a, b) | Expr::Like(a, b, _, _) => {
                a.walk(f);
                b.walk(f);
            }
            Expr::Between(a, b, c, _) => {
                a.walk(f);
                b.walk(f);
                c.walk(f);
            }
            Expr::InList(a, l, _) => {
                a.walk(f);
                l.iter().for_each(|e| e.walk(f));
            }
            Expr::Case(op, whens, els) => {
                if let Some(o) = op {
                    o.walk(f);
                }
                for (w, t) in whens {
                    w.walk(f);
                    t.walk(f);
                }
                if let Some(e) = els {
                    e.walk(f);
                }
            }
            Expr::Func(_, args) | Expr::Row(args) => args.iter().for_each(|e| e.walk(f)),
            Expr::Agg(call) => call.args.iter().for_each(|e| e.walk(f)),
            Expr::Window(call) => {
                call.args.iter().chain(&call.partition).for_each(|e| e.walk(f));
                call.order.iter().for_each(|(e, _)| e.walk(f));
            }
            Expr::Column(_) | Expr::Outer(..) | Expr::Literal(_) | Expr::Param(_) | Expr::Subquery(..) => {}
        }
    }

    /// Rewrites every node bottom-up.
    pub fn transform(self, f: &mut dyn FnMut(Expr) -> Result<Expr>) -> Result<Expr> {
        let node = self.map_children(&mut |c| c.transform(f))?;
        f(node)
    }

    /// Applies `f` to each direct child, rebuilding this node.
    pub fn map_children(self, f: &mut dyn FnMut(Expr) -> Result<Expr>) -> Result<Expr> {
        let mut b = |e: Box<Expr>| -> Result<Box<Expr>> { Ok(Box::new(f(*e)?)) };
        Ok(match self {
            Expr::Unary(op, a) => Expr::Unary(op, b(a)?),
            Expr::IsNull(a, n) => Expr::IsNull(b(a)?, n),
            Expr::IsBool(a, t, n) => Expr::IsBool(b(a)?, t, n),
            Expr::Cast(a, t) => Expr::Cast(b(a)?, t),
            Expr::InSubquery(a, id, n) => Expr::InSubquery(b(a)?, id, n),
            Expr::Binary(op, l, r) => {
                let l = b(l)?;
                Expr::Binary(op, l, b(r)?)
            }
            Expr::Like(a, p, e, n) => {
                let a = b(a)?;
                Expr::Like(a, b(p)?, e, n)
            }
            Expr::Between(a, l, h, n) => {
                let a = b(a)?;
                let l = b(l)?;
                Expr::Between(a, l, b(h)?, n)
            }
            Expr::InList(a, l, n) => {
                let a = b(a)?;
                Expr::InList(a, l.into_iter().map(&mut *f).collect::<Result<_>>()?, n)
            }
            Expr::Case(op, whens, els) => {
                let op = op.map(&mut b).transpose()?;
                let whens = whens.into_iter().map(|(w, t)| Ok((f(w)?, f(t)?))).collect::<Result<_>>()?;
                Expr::Case(op, whens, els.map(|e| Ok::<_, Error>(Box::new(f(*e)?))).transpose()?)
            }
            Expr::Func(n, args) => Expr::Func(n, args.into_iter().map(&mut *f).collect::<Result<_>>()?),
            Expr::Row(args) => Expr::Row(args.into_iter().map(&mut *f).collect::<Result<_>>()?),
            Expr::Agg(call) => {
                let AggCall { func, args, distinct } = *call;
                Expr::Agg(Box::new(AggCall {
                    func,
                    args: args.into_iter().map(&mut *f).collect::<Result<_>>()?,
                    distinct,
                }))
            }
            Expr::Window(call) => {
                let WindowCall { func, args, partition, order, frame } = *call;
                Expr::Window(Box::new(WindowCall {
                    func,
                    args: args.into_iter().map(&mut *f).collect::<Result<_>>()?,
                    partition: partition.into_iter().map(&mut *f).collect::<Result<_>>()?,
                    order: order.into_iter().map(|(e, d)| Ok((f(e)?, d))).collect::<Result<_>>()?,
                    frame,
                }))
            }
            other => other,
        })
    }

    /// Shifts column references: `Column(i)` becomes `Column(i - by)`; with `into_outer`,
    /// columns below `by` become `Outer(0, i)` and existing outer references move one level
    /// out (the expression will run with the current row pushed as an outer row).
    pub fn rebase(self, by: usize, into_outer: bool) -> Result<Expr> {
        self.transform(&mut |e| {
            Ok(match e {
                Expr::Column(i) if i >= by => Expr::Column(i - by),
                Expr::Column(i) if into_outer => Expr::Outer(0, i),
                Expr::Column(_) => return Err(Error::internal("rebase of a column outside the target")),
                Expr::Outer(d, i) if into_outer => Expr::Outer(d + 1, i),
                other => other,
            })
        })
    }

    /// Turns every column reference into a reference to the innermost outer row (the
    /// expression will run with the current row pushed as an outer row).
    pub fn to_outer(self) -> Result<Expr> {
        self.transform(&mut |e| {
            Ok(match e {
                Expr::Column(i) => Expr::Outer(0, i),
                Expr::Outer(d, i) => Expr::Outer(d + 1, i),
                other => other,
            })
        })
    }

    /// The set of column indexes the expression reads.
    pub fn columns(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.walk(&mut |e| {
            if let Expr::Column(i) = e {
                out.push(*i);
            }
        });
        out
    }

    /// Whether the expression contains a subquery.
    pub fn has_subquery(&self) -> bool {
        let mut found = false;
        self.walk(&mut |e| {
            if matches!(e, Expr::Subquery(..) | Expr::InSubquery(..)) {
                found = true;
            }
        });
        found
    }

    /// Ids of the subqueries the expression uses.
    pub fn subquery_ids(&self) -> Vec<usize> {
        let mut out = Vec::new();
        self.walk(&mut |e| match e {
            Expr::Subquery(id, _) | Expr::InSubquery(_, id, _) => out.push(*id),
            _ => {}
        });
        out
    }

    /// Evaluates the expression on `row`.
    pub fn eval(&self, row: &[Value], ctx: &EvalCtx) -> Result<Value> {
        crate::depth::ensure_stack()?;
        Ok(match self {
            Expr::Column(i) => {
                row.get(*i).cloned().ok_or_else(|| Error::internal(format!("column {i} out of range")))?
            }
            Expr::Outer(depth, i) => {
                let r = ctx
                    .outer
                    .len()
                    .checked_sub(depth + 1)
                    .and_then(|d| ctx.outer.get(d))
                    .ok_or_else(|| Error::internal("outer row missing"))?;
                r.get(*i).cloned().ok_or_else(|| Error::internal("outer column out of range"))?
            }
            Expr::Literal(v) => v.clone(),
            Expr::Param(i) => ctx
                .params
                .get(*i)
                .cloned()
                .ok_or_else(|| Error::user(Code::WrongArguments, "Incorrect arguments to mysqld_stmt_execute"))?,
            Expr::Unary(op, a) => unary(*op, a.eval(row, ctx)?)?,
            Expr::Binary(BinOp::And, a, b) => {
                let l = a.eval(row, ctx)?.as_bool();
                if l == Some(false) {
                    return Ok(Value::Int(0));
                }
                logic_value(and3(l, b.eval(row, ctx)?.as_bool()))
            }
            Expr::Binary(BinOp::Or, a, b) => {
                let l = a.eval(row, ctx)?.as_bool();
                if l == Some(true) {
                    return Ok(Value::Int(1));
                }
                logic_value(or3(l, b.eval(row, ctx)?.as_bool()))
            }
            Expr::Binary(op, a, b) => binary(*op, a.eval(row, ctx)?, b.eval(row, ctx)?)?,
            Expr::IsNull(a, negated) => bool_value(a.eval(row, ctx)?.is_null() != *negated),
            Expr::IsBool(a, want, negated) => {
                let v = a.eval(row, ctx)?.as_bool();
                bool_value((v == Some(*want)) != *negated)
            }
            Expr::InList(a, list, negated) if matches!(**a, Expr::Row(_)) => {
                let Expr::Row(items) = &**a else { return Err(Error::internal("row expected")) };
                let lhs = items.iter().map(|e| e.eval(row, ctx)).collect::<Result<Vec<_>>>()?;
                let mut saw_null = false;
                for e in list {
                    let Expr::Row(r) = e else {
                        return Err(Error::user(
                            Code::OperandColumns,
                            format!("Operand should contain {} column(s)", items.len()),
                        ));
                    };
                    if r.len() != lhs.len() {
                        return Err(Error::user(
                            Code::OperandColumns,
                            format!("Operand should contain {} column(s)", items.len()),
                        ));
                    }
                    let mut all = Some(true);
                    for (l, x) in lhs.iter().zip(r) {
                        match compare_values(l, &x.eval(row, ctx)?) {
                            Some(Ordering::Equal) => {}
                            Some(_) => {
                                all = Some(false);
                                break;
                            }
                            None => all = None,
                        }
                    }
                    match all {
                        Some(true) => return Ok(bool_value(!*negated)),
                        None => saw_null = true,
                        _ => {}
                    }
                }
                in_result(false, saw_null, *negated)
            }
            Expr::InList(a, list, negated) => {
                let v = a.eval(row, ctx)?;
                let mut saw_null = v.is_null();
                let mut found = false;
                for e in list {
                    match compare_values(&v, &e.eval(row, ctx)?) {
                        Some(Ordering::Equal) => {
                            found = true;
                            break;
                        }
                        None => saw_null = true,
                        _ => {}
                    }
                }
                in_result(found, saw_null, *negated)
            }
            Expr::Between(a, lo, hi, negated) => {
                let (v, l, h) = between_operands(a.eval(row, ctx)?, lo.eval(row, ctx)?, hi.eval(row, ctx)?);
                let ge = compare_values(&v, &l).map(|o| o != Ordering::Less);
                let le = compare_values(&v, &h).map(|o| o != Ordering::Greater);
                match (ge, le) {
                    (Some(a), Some(b)) => bool_value((a && b) != *negated),
                    (Some(false), None) | (None, Some(false)) => bool_value(*negated),
                    _ => Value::Null,
                }
            }
            Expr::Like(a, p, esc, negated) => {
                let v = a.eval(row, ctx)?;
                let pat = p.eval(row, ctx)?;
                if v.is_null() || pat.is_null() {
                    Value::Null
                } else {
                    let s = v.to_text().unwrap_or_default();
                    let pt = pat.to_text().unwrap_or_default();
                    bool_value(like_match(&s, &pt, *esc as u8) != *negated)
                }
            }
            Expr::Case(operand, whens, els) => {
                let op = operand.as_ref().map(|o| o.eval(row, ctx)).transpose()?;
                for (w, t) in whens {
                    let hit = match &op {
                        Some(o) => compare_values(o, &w.eval(row, ctx)?) == Some(Ordering::Equal),
                        None => w.eval(row, ctx)?.as_bool() == Some(true),
                    };
                    if hit {
                        return t.eval(row, ctx);
                    }
                }
                match els {
                    Some(e) => e.eval(row, ctx)?,
                    None => Value::Null,
                }
            }
            Expr::Cast(a, t) => cast(a.eval(row, ctx)?, *t)?,
            Expr::Func(name, args) => {
                let vals = args.iter().map(|a| a.eval(row, ctx)).collect::<Result<Vec<_>>>()?;
                functions::call(name, vals)?
            }
            Expr::Agg(_) => return Err(Error::user(Code::InvalidGroupFuncUse, "Invalid use of group function")),
            Expr::Window(_) => {
                return Err(Error::user(Code::WindowInvalidUse, "You cannot use the window function in this context."))
            }
            Expr::Subquery(id, kind) => match ctx.subqueries.values.get(*id).and_then(|v| v.as_ref()) {
                Some(SubqueryValue::Scalar(v)) => v.clone(),
                Some(SubqueryValue::Exists(b)) => bool_value(*b),
                Some(SubqueryValue::Rows(_)) | None => {
                    return Err(Error::internal(format!("subquery {id} ({kind:?}) was not evaluated")));
                }
            },
            Expr::InSubquery(a, id, negated) => {
                let v = a.eval(row, ctx)?;
                let Some(SubqueryValue::Rows(rows)) = ctx.subqueries.values.get(*id).and_then(|v| v.as_ref()) else {
                    return Err(Error::internal(format!("subquery {id} was not evaluated")));
                };
                let mut saw_null = v.is_null() && !rows.is_empty();
                let mut found = false;
                for r in rows {
                    let rv = if r.len() == 1 { r[0].clone() } else { Value::Null };
                    let c = match &v {
                        Value::Null => None,
                        _ if r.len() == 1 => compare_values(&v, &rv),
                        _ => None,
                    };
                    match c {
                        Some(Ordering::Equal) => {
                            found = true;
                            break;
                        }
                        None => saw_null = true,
                        _ => {}
                    }
                }
                in_result(found, saw_null, *negated)
            }
            Expr::Row(_) => return Err(Error::user(Code::OperandColumns, "Operand should contain 1 column(s)")),
        })
    }

    /// Evaluates a predicate: true only when the value is true (NULL counts as false).
    pub fn eval_pred(&self, row: &[Value], ctx: &EvalCtx) -> Result<bool> {
        Ok(self.eval(row, ctx)?.as_bool() == Some(true))
    }
}

fn in_result(found: bool, saw_null: bool, negated: bool) -> Value {
    if found {
        bool_value(!negated)
    } else if saw_null {
        Value::Null
    } else {
        bool_value(negated)
    }
}

/// Three-valued AND (None is unknown).
fn and3(l: Option<bool>, r: Option<bool>) -> Option<bool> {
    match (l, r) {
        (Some(false), _) | (_, Some(false)) => Some(false),
        (Some(true), Some(true)) => Some(true),
        _ => None,
    }
}

/// Three-valued OR (None is unknown).
fn or3(l: Option<bool>, r: Option<bool>) -> Option<bool> {
    match (l, r) {
        (Some(true), _) | (_, Some(true)) => Some(true),
        (Some(false), Some(false)) => Some(false),
        _ => None,
    }
}

fn logic_value(b: Option<bool>) -> Value {
    b.map(bool_value).unwrap_or(Value::Null)
}

/// 1 or 0.
pub fn bool_value(b: bool) -> Value {
    Value::Int(b as i64)
}

/// BETWEEN compares its three operands under one comparison type (MySQL aggregates it
/// over all three): a string tested against one string and one number bound compares as
/// doubles throughout, not as a string against the string bound.
fn between_operands(v: Value, lo: Value, hi: Value) -> (Value, Value, Value) {
    let is_str = |x: &Value| matches!(x, Value::Bytes(_));
    if is_str(&v) && (is_str(&lo) != is_str(&hi)) && (lo.is_numeric() || hi.is_numeric()) {
        let d = |x: Value| x.as_f64().map(Value::Double).unwrap_or(Value::Null);
        return (d(v), d(lo), d(hi));
    }
    (v, lo, hi)
}

/// Compares two values the SQL way (None if either is NULL).
pub fn compare_values(a: &Value, b: &Value) -> Option<Ordering> {
    a.sql_cmp(b)
}

fn unary(op: UnaryOp, v: Value) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    Ok(match op {
        UnaryOp::Not => bool_value(v.as_bool() == Some(false)),
        UnaryOp::Neg => match v {
            Value::Int(i) => match i.checked_neg() {
                Some(n) => Value::Int(n),
                None => Value::Decimal(-Decimal::from(i)),
            },
            Value::UInt(u) if u <= i64::MAX as u64 + 1 => Value::Int((u as i128).wrapping_neg() as i64),
            Value::UInt(u) => Value::Decimal(-Decimal::from(u)),
            Value::Decimal(d) => Value::Decimal(-d),
            other => Value::Double(-other.as_f64().unwrap_or(0.0)),
        },
        UnaryOp::BitNot => Value::UInt(!(v.as_i64().unwrap_or(0) as u64)),
    })
}

enum NumClass {
    Int,
    Decimal,
    Double,
}

fn num_class(v: &Value) -> NumClass {
    match v {
        Value::Int(_) | Value::UInt(_) => NumClass::Int,
        Value::Decimal(_) => NumClass::Decimal,
        Value::Date(_) | Value::DateTime(_) | Value::Time(_) => NumClass::Int,
        _ => NumClass::Double,
    }
}

fn overflow(op: &str, a: &Value, b: &Value) -> Error {
    Error::user(
        Code::DataOutOfRangeBigint,
        format!("BIGINT value is out of range in '({} {} {})'", a.to_display(), op, b.to_display()),
    )
}

/// A decimal quotient `q` of a dividend with `scale` digits after the point, as MySQL gives
/// it: `div_precision_increment` more digits (as far as the decimal type holds: 28, where
/// MySQL's holds 30). MySQL divides to the next multiple of 9 digits, truncating, and
/// rounds that half away from zero to the result's scale; so a result scale that is itself
/// a multiple of 9 (0 included: `7 / 2` is 3 when the increment is 0) is truncated.
pub fn div_round(q: Decimal, scale: u32) -> Decimal {
    let digits = scale + u32::from(crate::typing::div_precision_increment());
    let strategy =
        if digits.is_multiple_of(9) { RoundingStrategy::ToZero } else { RoundingStrategy::MidpointAwayFromZero };
    let digits = digits.min(28);
    let mut q = q.round_dp_with_strategy(digits, strategy);
    q.rescale(digits);
    q
}

fn arith(op: BinOp, a: Value, b: Value) -> Result<Value> {
    if a.is_null() || b.is_null() {
        return Ok(Value::Null);
    }
    let class = match (num_class(&a), num_class(&b)) {
        (NumClass::Double, _) | (_, NumClass::Double) => NumClass::Double,
        (NumClass::Decimal, _) | (_, NumClass::Decimal) => NumClass::Decimal,
        _ => NumClass::Int,
    };
    let class = if op == BinOp::Div && matches!(class, NumClass::Int) { NumClass::Decimal } else { class };
    match class {
        NumClass::Int => {
            let unsigned = matches!(a, Value::UInt(_)) || matches!(b, Value::UInt(_));
            let (x, y) = (a.as_i64().unwrap_or(0) as i128, b.as_i64().unwrap_or(0) as i128);
            let (x, y) = match (&a, &b) {
                (Value::UInt(u), _) => (*u as i128, y),
                _ => (x, y),
            };
            let y = match &b {
                Value::UInt(u) => *u as i128,
                _ => y,
            };
            let r = match op {
                BinOp::Add => x + y,
                BinOp::Sub => x - y,
                BinOp::Mul => x.checked_mul(y).ok_or_else(|| overflow("*", &a, &b))?,
                BinOp::IntDiv => {
                    if y == 0 {
                        return Ok(Value::Null);
                    }
                    x / y
                }
                BinOp::Mod => {
                    if y == 0 {
                        return Ok(Value::Null);
                    }
                    x % y
                }
                _ => return Err(Error::internal("not an arithmetic operator")),
            };
            if unsigned {
                if r < 0 || r > u64::MAX as i128 {
                    return Err(overflow(op_str(op), &a, &b));
                }
                Ok(Value::UInt(r as u64))
            } else {
                i64::try_from(r).map(Value::Int).map_err(|_| overflow(op_str(op), &a, &b))
            }
        }
        NumClass::Decimal => {
            let (x, y) = (a.as_decimal().unwrap_or_default(), b.as_decimal().unwrap_or_default());
            let r = match op {
                BinOp::Add => x.checked_add(y),
                BinOp::Sub => x.checked_sub(y),
                BinOp::Mul => x.checked_mul(y),
                BinOp::Div => {
                    if y.is_zero() {
                        return Ok(Value::Null);
                    }
                    x.checked_div(y).map(|q| div_round(q, x.scale()))
                }
                BinOp::IntDiv => {
                    if y.is_zero() {
                        return Ok(Value::Null);
                    }
                    return x
                        .checked_div(y)
                        .and_then(|q| q.trunc().to_i64())
                        .map(Value::Int)
                        .ok_or_else(|| overflow("DIV", &a, &b));
                }
                BinOp::Mod => {
                    if y.is_zero() {
                        return Ok(Value::Null);
                    }
                    x.checked_rem(y)
                }
                _ => None,
            };
            r.map(Value::Decimal).ok_or_else(|| Error::user(Code::DataOutOfRange, "DECIMAL value is out of range"))
        }
        NumClass::Double => {
            let (x, y) = (a.as_f64().unwrap_or(0.0), b.as_f64().unwrap_or(0.0));
            Ok(match op {
                BinOp::Add => Value::Double(x + y),
                BinOp::Sub => Value::Double(x - y),
                BinOp::Mul => Value::Double(x * y),
                BinOp::Div if y == 0.0 => Value::Null,
                BinOp::Div => Value::Double(x / y),
                BinOp::IntDiv if y == 0.0 => Value::Null,
                BinOp::IntDiv => Value::Int((x / y).trunc() as i64),
                BinOp::Mod if y == 0.0 => Value::Null,
                BinOp::Mod => Value::Double(x % y),
                _ => return Err(Error::internal("not an arithmetic operator")),
            })
        }
    }
}

fn op_str(op: BinOp) -> &'static str {
    match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::IntDiv => "DIV",
        BinOp::Mod => "%",
        _ => "?",
    }
}

/// Applies a binary operator (AND/OR short-circuit in `Expr::eval`).
pub fn binary(op: BinOp, a: Value, b: Value) -> Result<Value> {
    Ok(match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::IntDiv | BinOp::Mod => return arith(op, a, b),
        BinOp::NullSafeEq => bool_value(match (a.is_null(), b.is_null()) {
            (true, true) => true,
            (false, false) => compare_values(&a, &b) == Some(Ordering::Equal),
            _ => false,
        }),
        BinOp::Eq | BinOp::NotEq | BinOp::Lt | BinOp::LtEq | BinOp::Gt | BinOp::GtEq => match compare_values(&a, &b) {
            None => Value::Null,
            Some(o) => bool_value(match op {
                BinOp::Eq => o == Ordering::Equal,
                BinOp::NotEq => o != Ordering::Equal,
                BinOp::Lt => o == Ordering::Less,
                BinOp::LtEq => o != Ordering::Greater,
                BinOp::Gt => o == Ordering::Greater,
                _ => o != Ordering::Less,
            }),
        },
        BinOp::Xor => match (a.as_bool(), b.as_bool()) {
            (Some(x), Some(y)) => bool_value(x != y),
            _ => Value::Null,
        },
        BinOp::And => logic_value(and3(a.as_bool(), b.as_bool())),
        BinOp::Or => logic_value(or3(a.as_bool(), b.as_bool())),
        BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr => {
            if a.is_null() || b.is_null() {
                return Ok(Value::Null);
            }
            let (x, y) = (a.as_i64().unwrap_or(0) as u64, b.as_i64().unwrap_or(0) as u64);
            Value::UInt(match op {
                BinOp::BitAnd => x & y,
                BinOp::BitOr => x | y,
                BinOp::BitXor => x ^ y,
                BinOp::Shl => x.checked_shl(y as u32).unwrap_or(0),
                _ => x.checked_shr(y as u32).unwrap_or(0),
            })
        }
    })
}

/// LIKE matching on bytes: `%` any run, `_` one character, `esc` escapes.
pub fn like_match(s: &[u8], p: &[u8], esc: u8) -> bool {
    let s: Vec<char> = String::from_utf8_lossy(s).chars().collect();
    let p: Vec<char> = String::from_utf8_lossy(p).chars().collect();
    let esc = esc as char;
    let (mut si, mut pi) = (0usize, 0usize);
    let (mut star_p, mut star_s) = (usize::MAX, 0usize);
    while si < s.len() {
        if pi < p.len() {
            let (pc, literal, width) =
                if p[pi] == esc && pi + 1 < p.len() { (p[pi + 1], true, 2) } else { (p[pi], false, 1) };
            if !literal && pc == '%' {
                star_p = pi;
                star_s = si;
                pi += 1;
                continue;
            }
            if (!literal && pc == '_') || pc == s[si] {
                si += 1;
                pi += width;
                continue;
            }
        }
        if star_p != usize::MAX {
            pi = star_p + 1;
            star_s += 1;
            si = star_s;
            continue;
        }
        return false;
    }
    while pi < p.len() && p[pi] == '%' {
        pi += 1;
    }
    pi == p.len()
}

/// CAST(v AS t).
pub fn cast(v: Value, t: CastType) -> Result<Value> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    Ok(match t {
        CastType::Signed => Value::Int(match &v {
            Value::UInt(u) => *u as i64,
            Value::Double(f) => f.round() as i64,
            other => other.as_i64().unwrap_or(0),
        }),
        CastType::Unsigned => Value::UInt(match &v {
            Value::Int(i) => *i as u64,
            other => other.as_decimal().and_then(|d| d.round().to_u64()).unwrap_or(0),
        }),
        CastType::Decimal(_, s) => {
            let d = v
                .as_decimal()
                .unwrap_or_default()
                .round_dp_with_strategy(s as u32, RoundingStrategy::MidpointAwayFromZero);
            let mut d = d;
            d.rescale(s as u32);
            Value::Decimal(d)
        }
        CastType::Double => Value::Double(v.as_f64().unwrap_or(0.0)),
        CastType::Char => Value::Bytes(v.to_text().unwrap_or_default()),
        CastType::Date => match functions::to_datetime(&v) {
            Some(d) => Value::Date(DateTime::from_ymd(d.year, d.month, d.day)),
            None => Value::Null,
        },
        CastType::DateTime => match functions::to_datetime(&v) {
            Some(d) => Value::DateTime(d),
            None => Value::Null,
        },
        CastType::Time => match &v {
            Value::Time(_) => v,
            Value::DateTime(d) => {
                Value::Time(((d.hour as i64 * 60 + d.minute as i64) * 60 + d.second as i64) * 1_000_000)
            }
            other => strata_common::time::parse_duration(&other.to_display()).map(Value::Time).unwrap_or(Value::Null),
        },
    })
}

/// Parses a numeric literal the way MySQL types it: integers are BIGINT (or BIGINT
/// UNSIGNED / DECIMAL if too large), literals with a point are DECIMAL, with an exponent
/// DOUBLE.
pub fn number_literal(s: &str) -> Result<Value> {
    if s.contains(['e', 'E']) {
        return s.parse::<f64>().map(Value::Double).map_err(|_| Error::parse(format!("bad number '{s}'")));
    }
    if s.contains('.') {
        return s
            .parse::<Decimal>()
            .map(Value::Decimal)
            .or_else(|_| s.parse::<f64>().map(Value::Double))
            .map_err(|_| Error::parse(format!("bad number '{s}'")));
    }
    if let Ok(i) = s.parse::<i64>() {
        return Ok(Value::Int(i));
    }
    if let Ok(u) = s.parse::<u64>() {
        return Ok(Value::UInt(u));
    }
    s.parse::<Decimal>().map(Value::Decimal).map_err(|_| Error::parse(format!("bad number '{s}'")))
}

/// Converts an f64 to a decimal if it can.
pub fn decimal_from_f64(f: f64) -> Option<Decimal> {
    Decimal::from_f64(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(e: Expr) -> Value {
        let ctx = EvalCtx { params: &[], outer: &[], subqueries: &SubqueryValues::default() };
        e.eval(&[], &ctx).expect("eval")
    }

    fn lit(v: Value) -> Box<Expr> {
        Box::new(Expr::Literal(v))
    }

    #[test]
    fn three_valued_logic_and_arithmetic() {
        assert_eq!(ev(Expr::Binary(BinOp::And, lit(Value::Null), lit(Value::Int(0)))).to_display(), "0");
        assert!(ev(Expr::Binary(BinOp::Or, lit(Value::Null), lit(Value::Int(0)))).is_null());
        assert_eq!(ev(Expr::Binary(BinOp::Div, lit(Value::Int(1)), lit(Value::Int(3)))).to_display(), "0.3333");
        assert!(ev(Expr::Binary(BinOp::Div, lit(Value::Int(1)), lit(Value::Int(0)))).is_null());
        let big = Expr::Binary(BinOp::Mul, lit(Value::Int(i64::MAX)), lit(Value::Int(2)));
        let ctx = EvalCtx { params: &[], outer: &[], subqueries: &SubqueryValues::default() };
        assert_eq!(big.eval(&[], &ctx).map_err(|e| e.code().number()).err(), Some(1690));
        assert!(ev(Expr::InList(
            lit(Value::Int(1)),
            vec![Expr::Literal(Value::Null), Expr::Literal(Value::Int(2))],
            false
        ))
        .is_null());
    }

    #[test]
    fn like_patterns() {
        assert!(like_match(b"abcde", b"a%e", b'\\'));
        assert!(like_match(b"abc", b"_b_", b'\\'));
        assert!(!like_match(b"abc", b"a\\%", b'\\'));
        assert!(like_match(b"a%", b"a\\%", b'\\'));
        assert!(like_match(b"", b"%", b'\\'));
    }
}
