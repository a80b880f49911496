//! An optimizer rule: cut a large scan to the join keys the other side of its join can
//! produce before the scan's costly filter runs. DataFusion filters a scan first and joins
//! after; when the filter compares strings and the join keeps few of the scan's rows, most
//! of that work is wasted. TPC-H Q19 filters all 6 M lineitem rows on `l_shipmode`,
//! `l_shipinstruct` and quantity ranges before joining the ~500 parts its branches select:
//! with this rule lineitem is first semi-joined to those parts' keys (a probe of an array
//! indexed by key, see `PERFECT_HASH_RANGE`), and the string predicates see ~15,000 rows.
//!
//! Why it is right: an inner join drops every row of the scan's side whose key matches no
//! row of the other side; the keys come from a join-free part of the other side that holds
//! every key value that side can produce (see [`crate::group_filter`]), so the semi join
//! drops only rows the join would drop. The filter keeps or drops each remaining row as
//! before, and a semi join neither duplicates rows nor adds columns.
//!
//! When it applies (the rule cannot see row counts after filters, so it asks for the
//! signs that pay): the scan's side is a filter over a table scan whose predicate compares
//! strings, the table is estimated at [`MIN_ROWS`] rows or more, and the other side's
//! keys come from a filtered scan of a table [`KEYS_SHARE`] times smaller.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::common::tree_node::{Transformed, TreeNode, TreeNodeRecursion};
use datafusion::common::{Column, DFSchema, Result};
use datafusion::datasource::source_as_provider;
use datafusion::logical_expr::{Expr, ExprSchemable, Filter, Join, JoinType, LogicalPlan};

use crate::group_filter::{key_set, key_source, keys_semi_join, passed_through, rebuild, MAX_DEPTH};
use crate::provider::ScanTable;

/// The alias of the key set a scan is semi-joined to: marks a scan already cut.
const KEYS_ALIAS: &str = "__strata_probe_keys";

/// Tables smaller than this are filtered as they are.
const MIN_ROWS: f64 = 100_000.0;

/// The keys' table must be this many times smaller than the scanned one. With the keys'
/// filter unseen DataFusion plans the semi join for a large key set and repartitions the
/// whole scan for it: TPC-H Q10 (lineitem against three months of orders, a quarter of
/// its size) ran 0.10 s -> 0.15 s; Q19 (parts, 1/30) 0.098 s -> 0.034 s.
const KEYS_SHARE: f64 = 16.0;

/// Applies the rule (see the module documentation) to every inner join of `plan`, after
/// DataFusion's optimizer: its filter pushdown would move the filter back under the semi
/// join.
pub fn apply(plan: LogicalPlan) -> Result<LogicalPlan> {
    plan.transform_down(|p| {
        let LogicalPlan::Join(join) = &p else { return Ok(Transformed::no(p)) };
        if join.join_type != JoinType::Inner || join.null_aware {
            return Ok(Transformed::no(p));
        }
        for (l, r) in &join.on {
            let (Expr::Column(lc), Expr::Column(rc)) = (l, r) else { continue };
            if let Some(right) = cut_side(&join.right, rc, &join.left, lc, join)? {
                return Ok(Transformed::yes(rebuild(join, join.left.clone(), Arc::new(right))?));
            }
            if let Some(left) = cut_side(&join.left, lc, &join.right, rc, join)? {
                return Ok(Transformed::yes(rebuild(join, Arc::new(left), join.right.clone())?));
            }
        }
        Ok(Transformed::no(p))
    })
    .map(|t| t.data)
}

/// `side` with its filtered scan semi-joined to the keys `other` can produce for
/// `other_col`, when the rule applies (see the module documentation); None otherwise.
fn cut_side(
    side: &Arc<LogicalPlan>,
    col: &Column,
    other: &Arc<LogicalPlan>,
    other_col: &Column,
    join: &Join,
) -> Result<Option<LogicalPlan>> {
    let Some(rows) = filtered_scan_rows(side, col, 0) else { return Ok(None) };
    let Some((source, key)) = key_source(other, other_col, 0) else { return Ok(None) };
    match scan_rows(&source) {
        Some(keys_rows) if keys_rows * KEYS_SHARE <= rows => {}
        _ => return Ok(None),
    }
    let (keys, key) = key_set(source, key, KEYS_ALIAS)?;
    cut(side, col, keys, &key, join, 0)
}

/// The estimated rows of the table `plan` (through pass-through projections, aliases and
/// filters) scans under a string-comparing filter, with `col` one of the scan's columns;
/// None when `plan` is not such a filtered scan or the table is small.
fn filtered_scan_rows(plan: &LogicalPlan, col: &Column, depth: usize) -> Option<f64> {
    if depth > MAX_DEPTH {
        return None;
    }
    match plan {
        LogicalPlan::SubqueryAlias(_) | LogicalPlan::Projection(_) => {
            let (input, inner) = passed_through(plan, col)?;
            filtered_scan_rows(input, &inner, depth + 1)
        }
        LogicalPlan::Filter(f) => match f.input.as_ref() {
            LogicalPlan::TableScan(_) if compares_strings(&f.predicate, f.input.schema()) => {
                scan_rows(&f.input).filter(|r| *r >= MIN_ROWS)
            }
            other => filtered_scan_rows(other, col, depth + 1),
        },
        _ => None,
    }
}

/// The estimated rows of the first table scan in `plan`.
fn scan_rows(plan: &LogicalPlan) -> Option<f64> {
    let mut rows = None;
    let _ = plan.apply(|p| {
        if let LogicalPlan::TableScan(t) = p {
            rows = source_as_provider(&t.source).ok().and_then(|p| p.downcast_ref::<ScanTable>().and_then(|s| s.rows));
            return Ok(TreeNodeRecursion::Stop);
        }
        Ok(TreeNodeRecursion::Continue)
    });
    rows
}

/// Whether `pred` compares, matches or looks up strings (costly per row, unlike numbers).
fn compares_strings(pred: &Expr, schema: &DFSchema) -> bool {
    let stringy = |e: &Expr| {
        e.get_type(schema).is_ok_and(|t| {
            matches!(
                t,
                DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Binary | DataType::LargeBinary
            )
        })
    };
    let mut found = false;
    let _ = pred.apply(|e| {
        found |= match e {
            Expr::BinaryExpr(b) => stringy(&b.left) || stringy(&b.right),
            Expr::Like(l) => stringy(&l.expr),
            Expr::InList(i) => stringy(&i.expr),
            _ => false,
        };
        Ok(if found { TreeNodeRecursion::Stop } else { TreeNodeRecursion::Continue })
    });
    found
}

/// `plan` (as `filtered_scan_rows` walked it) with the scan under its filter semi-joined
/// to `keys` on `key` = the scan's `col`; None if it is cut already.
fn cut(
    plan: &Arc<LogicalPlan>,
    col: &Column,
    keys: Arc<LogicalPlan>,
    key: &Column,
    join: &Join,
    depth: usize,
) -> Result<Option<LogicalPlan>> {
    if depth > MAX_DEPTH {
        return Ok(None);
    }
    match plan.as_ref() {
        LogicalPlan::Filter(f) if matches!(f.input.as_ref(), LogicalPlan::TableScan(_)) => {
            let semi = keys_semi_join(keys, f.input.clone(), key, col, join)?;
            Ok(Some(LogicalPlan::Filter(Filter::try_new(f.predicate.clone(), Arc::new(semi))?)))
        }
        LogicalPlan::Filter(f) => {
            if let LogicalPlan::Join(j) = f.input.as_ref() {
                if matches!(j.left.as_ref(), LogicalPlan::SubqueryAlias(k) if k.alias.table() == KEYS_ALIAS) {
                    return Ok(None);
                }
            }
            match cut(&f.input, col, keys, key, join, depth + 1)? {
                Some(input) => Ok(Some(plan.with_new_exprs(plan.expressions(), vec![input])?)),
                None => Ok(None),
            }
        }
        LogicalPlan::SubqueryAlias(_) | LogicalPlan::Projection(_) => {
            let Some((input, inner)) = passed_through(plan, col) else { return Ok(None) };
            match cut(input, &inner, keys, key, join, depth + 1)? {
                Some(new_input) => Ok(Some(plan.with_new_exprs(plan.expressions(), vec![new_input])?)),
                None => Ok(None),
            }
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use datafusion::datasource::provider_as_source;
    use datafusion::logical_expr::{col, lit, LogicalPlanBuilder};
    use strata_sql::plan::Plan;
    use strata_sql::types::ColumnType;

    use super::*;

    /// A scan of a two-column table (`c0` INT key, `c1` VARCHAR) estimated at `rows`.
    fn table(name: &str, rows: f64) -> LogicalPlanBuilder {
        let types = vec![ColumnType::Int { bytes: 4, unsigned: false }, ColumnType::Varchar(20)];
        let mut t = ScanTable::new(Plan::Dual, types, None);
        t.rows = Some(rows);
        LogicalPlanBuilder::scan(name, provider_as_source(Arc::new(t)), None).expect("scan")
    }

    /// `small` filtered on its string, joined to `big` filtered by `big_pred`.
    fn joined(big_rows: f64, big_pred: Expr) -> LogicalPlan {
        let small =
            table("small", 10_000.0).filter(col("small.c1").eq(lit("x"))).expect("filter").build().expect("small");
        let big = table("big", big_rows).filter(big_pred).expect("filter").build().expect("big");
        LogicalPlanBuilder::from(small)
            .join(big, JoinType::Inner, (vec!["small.c0"], vec!["big.c0"]), None)
            .expect("join")
            .build()
            .expect("plan")
    }

    fn semi_joins(plan: &LogicalPlan) -> usize {
        let mut n = 0;
        let _ = plan.apply(|p| {
            if let LogicalPlan::Join(j) = p {
                n += usize::from(j.join_type == JoinType::RightSemi);
            }
            Ok(TreeNodeRecursion::Continue)
        });
        n
    }

    #[test]
    fn a_large_scan_filtered_on_strings_is_first_cut_to_the_join_keys() {
        let plan = apply(joined(1_000_000.0, col("big.c1").eq(lit("y")))).expect("apply");
        let shown = plan.display_indent().to_string();
        assert_eq!(semi_joins(&plan), 1, "{shown}");
        // The big side's filter now runs above the semi join, which reads the scan.
        let lines: Vec<&str> = shown.lines().map(str::trim).collect();
        let filter = lines.iter().position(|l| l.starts_with("Filter: big.c1")).expect(&shown);
        assert!(lines[filter + 1].starts_with("RightSemi Join: __strata_probe_keys.c0 = big.c0"), "{shown}");
        assert!(lines.iter().any(|l| l.starts_with("TableScan: big")), "{shown}");
        // Applying again changes nothing.
        let again = apply(plan.clone()).expect("apply");
        assert_eq!(again.display_indent().to_string(), shown);
    }

    #[test]
    fn small_tables_numeric_filters_and_comparable_sizes_are_left_alone() {
        for (rows, pred) in [
            (50_000.0, col("big.c1").eq(lit("y"))),
            (1_000_000.0, col("big.c0").gt(lit(5))),
            (100_000.0, col("big.c1").eq(lit("y"))),
        ] {
            let plan = apply(joined(rows, pred)).expect("apply");
            assert_eq!(semi_joins(&plan), 0, "{}", plan.display_indent());
        }
    }
}
