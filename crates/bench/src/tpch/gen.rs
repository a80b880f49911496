//! TPC-H data from the `tpchgen` crate (a port of the TPC's dbgen that produces the same rows),
//! as TBL lines and as multi-row INSERT value lists.

use tpchgen::generators::{
    CustomerGenerator, LineItemGenerator, NationGenerator, OrderGenerator, PartGenerator, PartSuppGenerator,
    RegionGenerator, SupplierGenerator,
};

use super::schema::{NUMERIC, TABLES};
use crate::tpcc::load::quote;

/// The TBL lines (`a|b|c|`) of part `part` (1-based) of `parts` of `table` at scale `sf`.
pub fn tbl_lines(table: &str, sf: f64, part: i32, parts: i32) -> Box<dyn Iterator<Item = String> + Send> {
    fn boxed<I: Iterator<Item = T> + Send + 'static, T: ToString>(it: I) -> Box<dyn Iterator<Item = String> + Send> {
        Box::new(it.map(|r| r.to_string()))
    }
    match table {
        "region" => boxed(RegionGenerator::new(sf, part, parts).into_iter()),
        "nation" => boxed(NationGenerator::new(sf, part, parts).into_iter()),
        "supplier" => boxed(SupplierGenerator::new(sf, part, parts).into_iter()),
        "customer" => boxed(CustomerGenerator::new(sf, part, parts).into_iter()),
        "part" => boxed(PartGenerator::new(sf, part, parts).into_iter()),
        "partsupp" => boxed(PartSuppGenerator::new(sf, part, parts).into_iter()),
        "orders" => boxed(OrderGenerator::new(sf, part, parts).into_iter()),
        "lineitem" => boxed(LineItemGenerator::new(sf, part, parts).into_iter()),
        other => panic!("unknown TPC-H table {other}"),
    }
}

/// Rows of `table` at scale `sf` (lineitem estimated from the 1–7 lines per order).
pub fn row_count(table: &str, sf: f64) -> u64 {
    let n = match table {
        "region" => 5,
        "nation" => 25,
        "supplier" => SupplierGenerator::calculate_row_count(sf, 1, 1),
        "customer" => CustomerGenerator::calculate_row_count(sf, 1, 1),
        "part" => PartGenerator::calculate_row_count(sf, 1, 1),
        "partsupp" => PartSuppGenerator::calculate_row_count(sf, 1, 1),
        "orders" => OrderGenerator::calculate_row_count(sf, 1, 1),
        "lineitem" => OrderGenerator::calculate_row_count(sf, 1, 1) * 4,
        _ => 0,
    };
    n.max(0) as u64
}

/// Appends one TBL line of `table` to `out` as a parenthesized VALUES row.
pub fn push_values_row(out: &mut String, table: &str, line: &str) {
    let idx = TABLES.iter().position(|t| *t == table).expect("known table");
    let numeric = NUMERIC[idx];
    out.push('(');
    for (i, field) in line.strip_suffix('|').unwrap_or(line).split('|').enumerate() {
        if i > 0 {
            out.push(',');
        }
        if numeric.get(i).copied().unwrap_or(false) {
            out.push_str(field.trim());
        } else {
            out.push_str(&quote(field));
        }
    }
    out.push(')');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_render_as_values_with_numbers_bare_and_text_quoted() {
        let first = tbl_lines("lineitem", 0.01, 1, 1).next().expect("a line");
        assert!(first.starts_with("1|"), "{first}");
        let mut v = String::new();
        push_values_row(&mut v, "lineitem", &first);
        assert!(v.starts_with("(1,"), "{v}");
        assert_eq!(v.matches('\'').count(), 16, "8 quoted columns: {v}");
        let mut n = String::new();
        push_values_row(&mut n, "nation", "3|CANADA|1|it's here|");
        assert_eq!(n, "(3,'CANADA',1,'it''s here')");
    }

    #[test]
    fn parts_split_a_table_without_overlap() {
        let whole: Vec<String> = tbl_lines("customer", 0.01, 1, 1).collect();
        let mut split: Vec<String> = (1..=3).flat_map(|p| tbl_lines("customer", 0.01, p, 3)).collect();
        assert_eq!(whole.len() as u64, row_count("customer", 0.01));
        split.sort();
        let mut sorted = whole.clone();
        sorted.sort();
        assert_eq!(split, sorted);
    }
}
