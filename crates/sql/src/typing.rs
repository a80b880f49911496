//! Types of bound expressions, by MySQL's rules: the result type of each operator, function
//! and aggregate (integer, DECIMAL(p, s), DOUBLE, string, temporal), and whether it can be
//! NULL. Result set metadata comes from these types, never from the values a query returns;
//! the column engine's translation relies on them too.

use strata_common::Value;

use crate::expr::{AggCall, AggFunc, BinOp, CastType, Expr, SubqueryKind, UnaryOp, WindowFunc};
use crate::plan::OutputColumn;
use crate::types::ColumnType;

/// `div_precision_increment` of the running statement: digits `/` and AVG add to the scale
/// of a decimal result (MySQL's default 4 outside a statement). Bound plans depend on it,
/// so the plan cache keys on it.
pub fn div_precision_increment() -> u8 {
    crate::context::limits().div_precision_increment
}
/// Largest DECIMAL precision.
pub const MAX_PRECISION: u8 = 65;
/// Largest DECIMAL scale.
pub const MAX_SCALE: u8 = 30;

/// The type of an expression's values.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SqlType {
    /// The MySQL type; None for the type of a bare NULL.
    pub ty: Option<ColumnType>,
    /// Whether a value can be NULL.
    pub nullable: bool,
}

const BIGINT: ColumnType = ColumnType::Int { bytes: 8, unsigned: false };
const UBIGINT: ColumnType = ColumnType::Int { bytes: 8, unsigned: true };

impl SqlType {
    /// A type whose values may be NULL.
    pub fn nullable(ty: ColumnType) -> SqlType {
        SqlType { ty: Some(ty), nullable: true }
    }

    /// A type whose values are never NULL.
    pub fn not_null(ty: ColumnType) -> SqlType {
        SqlType { ty: Some(ty), nullable: false }
    }

    /// The type of NULL.
    pub fn null() -> SqlType {
        SqlType { ty: None, nullable: true }
    }

    /// The type of a value not known before execution (a string, as MySQL types an
    /// untyped parameter).
    pub fn unknown() -> SqlType {
        SqlType::nullable(ColumnType::Varchar(255))
    }

    /// BIGINT, as comparisons and logical operators return.
    pub fn boolean(nullable: bool) -> SqlType {
        SqlType { ty: Some(BIGINT), nullable }
    }

    /// The same type, possibly NULL.
    pub fn or_null(mut self, nullable: bool) -> SqlType {
        self.nullable |= nullable;
        self
    }

    /// The type of a constant.
    pub fn of_value(v: &Value) -> SqlType {
        let ty = match v {
            Value::Null => return SqlType::null(),
            Value::Int(_) => BIGINT,
            Value::UInt(_) => UBIGINT,
            Value::Double(_) => ColumnType::Double,
            Value::Decimal(d) => {
                let scale = d.scale().min(MAX_SCALE as u32) as u8;
                let digits = d.mantissa().unsigned_abs().to_string().len() as u8;
                ColumnType::Decimal { precision: digits.max(scale + 1).min(MAX_PRECISION), scale }
            }
            Value::Bytes(b) => ColumnType::Varchar(char_count(b).max(1)),
            Value::Date(_) => ColumnType::Date,
            Value::DateTime(d) => ColumnType::DateTime(if d.micro > 0 { 6 } else { 0 }),
            Value::Time(t) => ColumnType::Time(if t % 1_000_000 != 0 { 6 } else { 0 }),
        };
        SqlType::not_null(ty)
    }

    /// The column metadata of a result column of this type.
    pub fn apply(&self, col: &mut OutputColumn) {
        col.ty = self.ty.clone();
        col.not_null = !self.nullable;
    }

    /// The type of an output column.
    pub fn of_output(c: &OutputColumn) -> SqlType {
        SqlType { ty: c.ty.clone(), nullable: !c.not_null }
    }
}

fn char_count(b: &[u8]) -> u32 {
    std::str::from_utf8(b).map(|s| s.chars().count()).unwrap_or(b.len()) as u32
}

/// What typing needs from the surrounding query.
pub trait TypeEnv {
    /// The type of column `i` of the input row.
    fn column(&self, i: usize) -> SqlType;
    /// The type of column `i` of the enclosing query `depth` levels out.
    fn outer(&self, _depth: usize, _i: usize) -> SqlType {
        SqlType::unknown()
    }
    /// The type of the first column of subquery `id`.
    fn subquery(&self, _id: usize) -> SqlType {
        SqlType::unknown()
    }
    /// The type of parameter `i`.
    fn param(&self, _i: usize) -> SqlType {
        SqlType::unknown()
    }
}

/// A row described by output metadata.
pub struct Columns<'a>(pub &'a [OutputColumn]);

impl TypeEnv for Columns<'_> {
    fn column(&self, i: usize) -> SqlType {
        self.0.get(i).map(SqlType::of_output).unwrap_or_else(SqlType::unknown)
    }
}

/// How a type computes: the classes MySQL's arithmetic and comparisons distinguish.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Int,
    Decimal,
    Double,
    String,
    Temporal,
}

fn kind(t: &ColumnType) -> Kind {
    match t {
        ColumnType::Int { .. } => Kind::Int,
        ColumnType::Decimal { .. } => Kind::Decimal,
        ColumnType::Float | ColumnType::Double => Kind::Double,
        ColumnType::Date | ColumnType::DateTime(_) | ColumnType::Timestamp(_) | ColumnType::Time(_) => Kind::Temporal,
        _ => Kind::String,
    }
}

/// Integer digits of an integer type: its precision as a DECIMAL and its
/// information_schema NUMERIC_PRECISION.
pub fn int_digits(bytes: u8, unsigned: bool) -> u8 {
    match (bytes, unsigned) {
        (1, _) => 3,
        (2, _) => 5,
        (3, _) => 7,
        (4, _) => 10,
        (_, false) => 19,
        (_, true) => 20,
    }
}

/// (precision, scale) of a numeric type read as a DECIMAL.
fn decimal_shape(t: &ColumnType) -> (u8, u8) {
    match t {
        ColumnType::Int { bytes, unsigned } => (int_digits(*bytes, *unsigned), 0),
        ColumnType::Decimal { precision, scale } => (*precision, *scale),
        ColumnType::Date => (8, 0),
        ColumnType::DateTime(f) | ColumnType::Timestamp(f) => (14 + f, *f),
        ColumnType::Time(f) => (6 + f, *f),
        _ => (MAX_PRECISION, MAX_SCALE),
    }
}

fn decimal(precision: u8, scale: u8) -> ColumnType {
    let scale = scale.min(MAX_SCALE);
    ColumnType::Decimal { precision: precision.clamp(scale.max(1), MAX_PRECISION), scale }
}

/// The length in characters a string type holds.
fn string_len(t: &ColumnType) -> u32 {
    match t {
        ColumnType::Char(n) | ColumnType::Varchar(n) | ColumnType::Text(n) | ColumnType::Blob(n) => *n,
        other => other.display_len(),
    }
}

/// A string type of `len` characters (TEXT beyond VARCHAR's range), binary when `binary`.
fn string_type(len: u32, binary: bool) -> ColumnType {
    match (binary, len) {
        (true, _) => ColumnType::Blob(len.max(1)),
        (false, 0..=16383) => ColumnType::Varchar(len.max(1)),
        (false, 16384..=65535) => ColumnType::Text(65535),
        (false, 65536..=16_777_215) => ColumnType::Text(16_777_215),
        _ => ColumnType::Text(u32::MAX),
    }
}

/// The common type of values from several sources (CASE branches, IF, COALESCE, UNION
/// columns): NULLs ignored; numbers widen to the widest class; temporals of one kind
/// stay that kind, DATE with DATETIME is DATETIME; anything else mixed is a string.
pub fn merge(types: &[SqlType]) -> SqlType {
    let nullable = types.iter().any(|t| t.nullable);
    let known: Vec<&ColumnType> = types.iter().filter_map(|t| t.ty.as_ref()).collect();
    let Some(first) = known.first() else { return SqlType::null() };
    if known.iter().all(|t| *t == *first) {
        return SqlType { ty: Some((*first).clone()), nullable };
    }
    let kinds: Vec<Kind> = known.iter().map(|t| kind(t)).collect();
    let numeric = kinds.iter().all(|k| matches!(k, Kind::Int | Kind::Decimal | Kind::Double));
    let ty = if numeric {
        if kinds.contains(&Kind::Double) {
            ColumnType::Double
        } else if kinds.contains(&Kind::Decimal) {
            let int_part = known.iter().map(|t| decimal_shape(t)).map(|(p, s)| p - s).max().unwrap_or(1);
            let scale = known.iter().map(|t| decimal_shape(t).1).max().unwrap_or(0);
            decimal(int_part + scale, scale)
        } else {
            let unsigned = known.iter().all(|t| matches!(t, ColumnType::Int { unsigned: true, .. }));
            let bytes = known
                .iter()
                .map(|t| match t {
                    ColumnType::Int { bytes, .. } => *bytes,
                    _ => 8,
                })
                .max()
                .unwrap_or(8);
            // Signed with unsigned needs the next size up to hold both ranges.
            let mixed = !unsigned && known.iter().any(|t| matches!(t, ColumnType::Int { unsigned: true, .. }));
            if mixed && bytes >= 8 {
                decimal(20, 0)
            } else {
                ColumnType::Int { bytes: if mixed { (bytes * 2).min(8) } else { bytes }, unsigned }
            }
        }
    } else if kinds.iter().all(|k| *k == Kind::Temporal) {
        let fsp = known.iter().map(|t| t.decimals()).max().unwrap_or(0);
        let times = known.iter().filter(|t| matches!(t, ColumnType::Time(_))).count();
        if times == known.len() {
            ColumnType::Time(fsp)
        } else if times > 0 {
            string_type(26, false)
        } else if known.iter().all(|t| matches!(t, ColumnType::Date)) {
            ColumnType::Date
        } else {
            ColumnType::DateTime(fsp)
        }
    } else {
        let len = known.iter().map(|t| string_len(t)).max().unwrap_or(1);
        string_type(len, known.iter().any(|t| t.is_binary()))
    };
    SqlType { ty: Some(ty), nullable }
}

/// The type of `e` over the row described by `env`.
pub fn expr_type(e: &Expr, env: &dyn TypeEnv) -> SqlType {
    let t = |x: &Expr| expr_type(x, env);
    match e {
        Expr::Column(i) => env.column(*i),
        Expr::Outer(d, i) => env.outer(*d, *i),
        Expr::Literal(v) => SqlType::of_value(v),
        Expr::Param(i) => env.param(*i),
        Expr::Unary(UnaryOp::Not, x) => SqlType::boolean(t(x).nullable),
        Expr::Unary(UnaryOp::BitNot, x) => SqlType { ty: Some(UBIGINT), nullable: t(x).nullable },
        Expr::Unary(UnaryOp::Neg, x) => {
            let a = t(x);
            let ty = match a.ty {
                Some(ColumnType::Int { .. }) => BIGINT,
                Some(ColumnType::Decimal { precision, scale }) => decimal(precision, scale),
                Some(ColumnType::Float | ColumnType::Double) | None => ColumnType::Double,
                Some(ref other) if kind(other) == Kind::Temporal => {
                    let (p, s) = decimal_shape(other);
                    if s == 0 {
                        BIGINT
                    } else {
                        decimal(p, s)
                    }
                }
                Some(_) => ColumnType::Double,
            };
            SqlType { ty: Some(ty), nullable: a.nullable }
        }
        Expr::Binary(op, l, r) => binary_type(*op, &t(l), &t(r)),
        Expr::IsNull(..) | Expr::IsBool(..) => SqlType::boolean(false),
        Expr::InList(x, list, _) => SqlType::boolean(t(x).nullable || list.iter().any(|i| t(i).nullable)),
        Expr::Between(a, b, c, _) => SqlType::boolean(t(a).nullable || t(b).nullable || t(c).nullable),
        Expr::Like(a, b, _, _) => SqlType::boolean(t(a).nullable || t(b).nullable),
        Expr::Case(_, arms, els) => {
            let mut branches: Vec<SqlType> = arms.iter().map(|(_, then)| t(then)).collect();
            match els {
                Some(x) => branches.push(t(x)),
                None => branches.push(SqlType::null()),
            }
            merge(&branches)
        }
        Expr::Cast(x, c) => {
            let a = t(x);
            let ty = match c {
                CastType::Signed => BIGINT,
                CastType::Unsigned => UBIGINT,
                CastType::Decimal(p, s) => decimal(*p, *s),
                CastType::Double => ColumnType::Double,
                CastType::Char => match &a.ty {
                    Some(ty) if kind(ty) == Kind::String => ty.clone(),
                    Some(ty) => string_type(ty.display_len(), false),
                    None => string_type(1, false),
                },
                CastType::Date => ColumnType::Date,
                CastType::DateTime => ColumnType::DateTime(match &a.ty {
                    Some(ColumnType::DateTime(f) | ColumnType::Timestamp(f)) => *f,
                    _ => 0,
                }),
                CastType::Time => ColumnType::Time(0),
            };
            // String to number or date conversions give NULL for bad input.
            let may_fail = matches!(c, CastType::Date | CastType::DateTime | CastType::Time)
                && !matches!(a.ty.as_ref().map(kind), Some(Kind::Temporal));
            SqlType { ty: Some(ty), nullable: a.nullable || may_fail }
        }
        Expr::Func(name, args) => function_type(name, args, env),
        Expr::Agg(call) => agg_type(call, env),
        Expr::Window(call) => match call.func {
            WindowFunc::RowNumber | WindowFunc::Rank | WindowFunc::DenseRank => SqlType::not_null(BIGINT),
            // NULL for a NULL bucket count (MySQL refuses it; LAG-style constant anyway).
            WindowFunc::Ntile => SqlType::not_null(BIGINT).or_null(call.args.first().is_none_or(|a| t(a).nullable)),
            WindowFunc::PercentRank | WindowFunc::CumeDist => SqlType::not_null(ColumnType::Double),
            WindowFunc::Agg(func) => agg_type(&AggCall { func, args: call.args.clone(), distinct: false }, env),
            WindowFunc::Lag | WindowFunc::Lead => {
                let a = call.args.first().map(t).unwrap_or_else(SqlType::null);
                match call.args.get(2) {
                    Some(d) => merge(&[a, t(d)]).or_null(true),
                    None => a.or_null(true),
                }
            }
            WindowFunc::FirstValue | WindowFunc::LastValue | WindowFunc::NthValue => {
                call.args.first().map(t).unwrap_or_else(SqlType::null).or_null(true)
            }
        },
        Expr::Subquery(id, SubqueryKind::Scalar) => env.subquery(*id).or_null(true),
        Expr::Subquery(_, _) => SqlType::boolean(false),
        Expr::InSubquery(x, _, _) => SqlType::boolean(true).or_null(t(x).nullable),
        Expr::Row(_) => SqlType::unknown(),
    }
}

/// The type of an arithmetic, comparison or logical operation.
pub fn binary_type(op: BinOp, l: &SqlType, r: &SqlType) -> SqlType {
    let nullable = l.nullable || r.nullable;
    let (lt, rt) = match (&l.ty, &r.ty) {
        (Some(a), Some(b)) => (a, b),
        // Arithmetic with NULL is NULL; its type is that of the other side's class.
        _ => {
            return match op {
                BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Div | BinOp::Mod => SqlType {
                    ty: Some(match l.ty.as_ref().or(r.ty.as_ref()).map(kind) {
                        Some(Kind::Int) if op != BinOp::Div => BIGINT,
                        Some(Kind::Double | Kind::String) => ColumnType::Double,
                        _ => {
                            let dpi = div_precision_increment();
                            decimal(dpi + 1, dpi)
                        }
                    }),
                    nullable: true,
                },
                BinOp::NullSafeEq => SqlType::boolean(false),
                BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr => {
                    SqlType { ty: Some(UBIGINT), nullable: true }
                }
                _ => SqlType::boolean(true),
            }
        }
    };
    let (lk, rk) = (kind(lt), kind(rt));
    // Temporal values take part in arithmetic as numbers (YYYYMMDDhhmmss).
    let num = |k: Kind, t: &ColumnType| match k {
        Kind::Temporal if decimal_shape(t).1 == 0 => Kind::Int,
        Kind::Temporal => Kind::Decimal,
        Kind::String => Kind::Double,
        k => k,
    };
    let (ln, rn) = (num(lk, lt), num(rk, rt));
    let class = if ln == Kind::Double || rn == Kind::Double {
        Kind::Double
    } else if ln == Kind::Decimal || rn == Kind::Decimal {
        Kind::Decimal
    } else {
        Kind::Int
    };
    let unsigned =
        matches!(lt, ColumnType::Int { unsigned: true, .. }) || matches!(rt, ColumnType::Int { unsigned: true, .. });
    let ty = match op {
        BinOp::Add | BinOp::Sub | BinOp::Mul | BinOp::Mod => match class {
            Kind::Double => ColumnType::Double,
            Kind::Int => {
                if unsigned {
                    UBIGINT
                } else {
                    BIGINT
                }
            }
            _ => {
                let ((p1, s1), (p2, s2)) = (decimal_shape(lt), decimal_shape(rt));
                match op {
                    BinOp::Mul => decimal(p1 + p2, s1 + s2),
                    BinOp::Mod => {
                        let scale = s1.max(s2);
                        decimal((p1 - s1).max(p2 - s2) + scale, scale)
                    }
                    _ => {
                        let scale = s1.max(s2);
                        decimal((p1 - s1).max(p2 - s2) + scale + 1, scale)
                    }
                }
            }
        },
        BinOp::Div => match class {
            Kind::Double => ColumnType::Double,
            _ => {
                let ((p1, s1), (_, s2)) = (decimal_shape(lt), decimal_shape(rt));
                let scale = (s1 + div_precision_increment()).min(MAX_SCALE);
                decimal(p1 - s1 + s2 + scale, scale)
            }
        },
        // Division by zero gives NULL.
        BinOp::IntDiv => return SqlType { ty: Some(BIGINT), nullable: true },
        BinOp::BitAnd | BinOp::BitOr | BinOp::BitXor | BinOp::Shl | BinOp::Shr => UBIGINT,
        BinOp::NullSafeEq => return SqlType::boolean(false),
        _ => BIGINT,
    };
    let nullable = nullable || matches!(op, BinOp::Div | BinOp::Mod);
    SqlType { ty: Some(ty), nullable }
}

fn agg_type(call: &AggCall, env: &dyn TypeEnv) -> SqlType {
    let arg = call.args.first().map(|a| expr_type(a, env)).unwrap_or_else(SqlType::null);
    match call.func {
        AggFunc::CountStar | AggFunc::Count | AggFunc::Grouping => SqlType::not_null(BIGINT),
        AggFunc::Sum => SqlType::nullable(match arg.ty.as_ref() {
            Some(t) if matches!(kind(t), Kind::Int | Kind::Decimal) => {
                let (p, s) = decimal_shape(t);
                decimal(p + 22, s)
            }
            _ => ColumnType::Double,
        }),
        AggFunc::Avg => SqlType::nullable(match arg.ty.as_ref() {
            Some(t) if matches!(kind(t), Kind::Int | Kind::Decimal) => {
                let (p, s) = decimal_shape(t);
                let dpi = div_precision_increment();
                decimal(p + dpi, s + dpi)
            }
            _ => ColumnType::Double,
        }),
        AggFunc::Min | AggFunc::Max | AggFunc::First => arg.or_null(true),
        AggFunc::GroupConcat => SqlType::nullable(ColumnType::Text(65535)),
    }
}

/// The type of a scalar function call.
pub fn function_type(name: &str, args: &[Expr], env: &dyn TypeEnv) -> SqlType {
    let types: Vec<SqlType> = args.iter().map(|a| expr_type(a, env)).collect();
    let any_null = types.iter().any(|t| t.nullable);
    let arg = |i: usize| types.get(i).cloned().unwrap_or_else(SqlType::null);
    let int = |nullable: bool| SqlType { ty: Some(BIGINT), nullable };
    let double = SqlType { ty: Some(ColumnType::Double), nullable: true };
    let string = |len: u32| SqlType { ty: Some(string_type(len, false)), nullable: any_null };
    let first_len = types.first().and_then(|t| t.ty.as_ref()).map(string_len).unwrap_or(1);
    match name {
        "length" | "octet_length" | "char_length" | "character_length" | "ascii" | "ord" | "bit_length" | "crc32"
        | "sign" | "strcmp" | "locate" | "instr" | "position" | "find_in_set" | "bit_count" => int(any_null),
        "year" | "month" | "day" | "dayofmonth" | "hour" | "minute" | "second" | "microsecond" | "dayofweek"
        | "weekday" | "dayofyear" | "quarter" | "week" | "datediff" | "to_days" | "inet_aton" | "regexp_instr"
        | "__unix_timestamp" => int(true),
        "field" | "isnull" | "is_ipv4" | "is_ipv6" => int(false),
        "regexp_like" => int(any_null),
        "pi" => SqlType::not_null(ColumnType::Double),
        "rand" => SqlType::not_null(ColumnType::Double),
        "log" | "ln" | "log10" | "log2" | "sqrt" | "exp" | "pow" | "power" | "sin" | "cos" | "tan" | "asin"
        | "acos" | "atan" | "atan2" | "cot" | "degrees" | "radians" => double,
        "concat" => {
            let len = types.iter().map(|t| t.ty.as_ref().map(string_len).unwrap_or(0)).sum::<u32>();
            SqlType {
                ty: Some(string_type(len, types.iter().any(|t| t.ty.as_ref().is_some_and(|t| t.is_binary())))),
                nullable: any_null,
            }
        }
        "concat_ws" => {
            let len = types.iter().map(|t| t.ty.as_ref().map(string_len).unwrap_or(0)).sum::<u32>();
            SqlType { ty: Some(string_type(len, false)), nullable: arg(0).nullable }
        }
        "upper" | "ucase" | "lower" | "lcase" | "trim" | "ltrim" | "rtrim" | "__trim_str" | "__ltrim_str"
        | "__rtrim_str" | "reverse" | "substring" | "substr" | "mid" | "left" | "right" | "replace"
        | "substring_index" | "quote" | "soundex" | "regexp_replace" | "regexp_substr" => {
            SqlType { ty: Some(string_type(first_len.max(1), false)), nullable: any_null || name.starts_with("regexp") }
        }
        "lpad" | "rpad" | "repeat" | "space" | "insert" | "format" | "conv" | "bin" | "oct" | "hex" | "elt"
        | "char" | "inet_ntoa" | "inet6_ntoa" | "to_base64" => {
            SqlType { ty: Some(string_type(255, false)), nullable: true }
        }
        "md5" => string(32),
        "sha" | "sha1" => string(40),
        "sha2" => SqlType { ty: Some(string_type(128, false)), nullable: true },
        "uuid" => SqlType::not_null(string_type(36, false)),
        "date_format" => SqlType { ty: Some(string_type(255, false)), nullable: true },
        "unhex" | "from_base64" | "inet6_aton" => SqlType { ty: Some(string_type(255, true)), nullable: true },
        "date" | "last_day" => SqlType::nullable(ColumnType::Date),
        "date_add_interval" | "date_sub_interval" => {
            let unit = match args.get(2) {
                Some(Expr::Literal(Value::Bytes(u))) => String::from_utf8_lossy(u).to_lowercase(),
                _ => String::new(),
            };
            let date_unit = matches!(unit.as_str(), "day" | "week" | "month" | "quarter" | "year" | "year_month");
            let ty = match arg(0).ty {
                Some(ColumnType::Date) if date_unit => ColumnType::Date,
                Some(ColumnType::Date) => ColumnType::DateTime(0),
                Some(ColumnType::DateTime(f) | ColumnType::Timestamp(f)) => ColumnType::DateTime(f),
                Some(ColumnType::Time(f)) => ColumnType::Time(f),
                _ => string_type(29, false),
            };
            SqlType::nullable(ty)
        }
        "abs" => {
            let a = arg(0);
            match a.ty.as_ref().map(kind) {
                Some(Kind::Int | Kind::Decimal | Kind::Double) => a,
                _ => double,
            }
        }
        "ceil" | "ceiling" | "floor" => {
            let a = arg(0);
            SqlType {
                ty: Some(match a.ty.as_ref() {
                    Some(ColumnType::Int { .. }) => BIGINT,
                    Some(ColumnType::Decimal { precision, scale }) if precision - scale <= 18 => BIGINT,
                    Some(ColumnType::Decimal { precision, scale }) => decimal(precision - scale + 1, 0),
                    _ => ColumnType::Double,
                }),
                nullable: a.nullable,
            }
        }
        "round" | "truncate" => {
            let a = arg(0);
            let places = match args.get(1) {
                None => Some(0i64),
                Some(Expr::Literal(v)) => v.as_i64(),
                Some(_) => None,
            };
            let ty = match (a.ty.as_ref(), places) {
                (Some(ColumnType::Int { .. }), Some(p)) if p >= 0 => BIGINT,
                (Some(ColumnType::Int { bytes, unsigned }), _) => decimal(int_digits(*bytes, *unsigned), 0),
                (Some(ColumnType::Decimal { precision, scale }), Some(p)) => {
                    let s = p.clamp(0, MAX_SCALE as i64) as u8;
                    decimal(precision - scale + s + 1, s)
                }
                (Some(ColumnType::Decimal { precision, scale }), None) => decimal(precision + 1, *scale),
                _ => ColumnType::Double,
            };
            SqlType { ty: Some(ty), nullable: any_null }
        }
        "mod" => binary_type(BinOp::Mod, &arg(0), &arg(1)),
        "coalesce" => {
            let m = merge(&types);
            SqlType { nullable: types.iter().all(|t| t.nullable), ..m }
        }
        "ifnull" => {
            let m = merge(&types);
            SqlType { nullable: types.iter().all(|t| t.nullable), ..m }
        }
        "nullif" => arg(0).or_null(true),
        "if" => merge(&[arg(1), arg(2)]),
        "greatest" | "least" => merge(&types),
        _ => SqlType::unknown(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(v: Value) -> Expr {
        Expr::Literal(v)
    }

    fn ty(e: &Expr, cols: &[OutputColumn]) -> Option<ColumnType> {
        expr_type(e, &Columns(cols)).ty
    }

    fn col(t: ColumnType, not_null: bool) -> OutputColumn {
        OutputColumn { ty: Some(t), not_null, ..Default::default() }
    }

    #[test]
    fn decimal_arithmetic_follows_mysql() {
        let cols = [
            col(ColumnType::Decimal { precision: 15, scale: 2 }, true),
            col(ColumnType::Int { bytes: 4, unsigned: false }, false),
        ];
        let price = || Box::new(Expr::Column(0));
        let mul = Expr::Binary(
            BinOp::Mul,
            price(),
            Box::new(Expr::Binary(BinOp::Sub, Box::new(lit(Value::Int(1))), price())),
        );
        assert_eq!(ty(&mul, &cols), Some(ColumnType::Decimal { precision: 37, scale: 4 }));
        let div = Expr::Binary(BinOp::Div, Box::new(Expr::Column(1)), Box::new(lit(Value::Int(3))));
        assert_eq!(ty(&div, &cols), Some(ColumnType::Decimal { precision: 14, scale: 4 }));
        assert!(expr_type(&div, &Columns(&cols)).nullable);
        let sum = Expr::Agg(Box::new(AggCall { func: AggFunc::Sum, args: vec![Expr::Column(0)], distinct: false }));
        assert_eq!(ty(&sum, &cols), Some(ColumnType::Decimal { precision: 37, scale: 2 }));
        let avg = Expr::Agg(Box::new(AggCall { func: AggFunc::Avg, args: vec![Expr::Column(1)], distinct: false }));
        assert_eq!(ty(&avg, &cols), Some(ColumnType::Decimal { precision: 14, scale: 4 }));
        let count = Expr::Agg(Box::new(AggCall { func: AggFunc::CountStar, args: vec![], distinct: false }));
        assert_eq!(expr_type(&count, &Columns(&cols)), SqlType::not_null(BIGINT));
    }

    #[test]
    fn merged_types() {
        let int = SqlType::not_null(ColumnType::Int { bytes: 4, unsigned: false });
        let dec = SqlType::not_null(ColumnType::Decimal { precision: 5, scale: 2 });
        assert_eq!(merge(&[int.clone(), dec.clone()]).ty, Some(ColumnType::Decimal { precision: 12, scale: 2 }));
        assert_eq!(
            merge(&[int.clone(), SqlType::null()]),
            SqlType::nullable(ColumnType::Int { bytes: 4, unsigned: false })
        );
        assert_eq!(merge(&[int, SqlType::not_null(ColumnType::Varchar(3))]).ty, Some(ColumnType::Varchar(11)));
        let date = SqlType::not_null(ColumnType::Date);
        assert_eq!(
            merge(&[date.clone(), SqlType::not_null(ColumnType::DateTime(0))]).ty,
            Some(ColumnType::DateTime(0))
        );
        assert_eq!(merge(&[date.clone(), date]).ty, Some(ColumnType::Date));
    }

    #[test]
    fn literals_and_date_arithmetic() {
        let cols: [OutputColumn; 0] = [];
        assert_eq!(
            ty(&lit(Value::Decimal("12.50".parse().expect("decimal"))), &cols),
            Some(ColumnType::Decimal { precision: 4, scale: 2 })
        );
        assert_eq!(ty(&lit(Value::str("héllo")), &cols), Some(ColumnType::Varchar(5)));
        let d = Expr::Cast(Box::new(lit(Value::str("1998-12-01"))), CastType::Date);
        let minus =
            Expr::Func("date_sub_interval".into(), vec![d.clone(), lit(Value::Int(90)), lit(Value::str("day"))]);
        assert_eq!(ty(&minus, &cols), Some(ColumnType::Date));
        let hours = Expr::Func("date_add_interval".into(), vec![d, lit(Value::Int(1)), lit(Value::str("hour"))]);
        assert_eq!(ty(&hours, &cols), Some(ColumnType::DateTime(0)));
    }
}
