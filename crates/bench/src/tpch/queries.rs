//! The 22 TPC-H queries with the spec's validation parameters, in MySQL syntax (query 15's
//! view as a CTE). `:sf` in query 11 is replaced by the scale factor.

/// Query texts, `QUERIES[n - 1]` is query n.
pub const QUERIES: [&str; 22] = [
    include_str!("../../tpch/queries/q01.sql"),
    include_str!("../../tpch/queries/q02.sql"),
    include_str!("../../tpch/queries/q03.sql"),
    include_str!("../../tpch/queries/q04.sql"),
    include_str!("../../tpch/queries/q05.sql"),
    include_str!("../../tpch/queries/q06.sql"),
    include_str!("../../tpch/queries/q07.sql"),
    include_str!("../../tpch/queries/q08.sql"),
    include_str!("../../tpch/queries/q09.sql"),
    include_str!("../../tpch/queries/q10.sql"),
    include_str!("../../tpch/queries/q11.sql"),
    include_str!("../../tpch/queries/q12.sql"),
    include_str!("../../tpch/queries/q13.sql"),
    include_str!("../../tpch/queries/q14.sql"),
    include_str!("../../tpch/queries/q15.sql"),
    include_str!("../../tpch/queries/q16.sql"),
    include_str!("../../tpch/queries/q17.sql"),
    include_str!("../../tpch/queries/q18.sql"),
    include_str!("../../tpch/queries/q19.sql"),
    include_str!("../../tpch/queries/q20.sql"),
    include_str!("../../tpch/queries/q21.sql"),
    include_str!("../../tpch/queries/q22.sql"),
];

/// Query `n` (1–22) for scale factor `sf`.
pub fn query(n: usize, sf: f64) -> String {
    QUERIES[n - 1].replace(":sf", &format_sf(sf)).trim().to_string()
}

/// A scale factor as written in paths and reports: `0.01`, `0.1`, `1`, `10`.
pub fn format_sf(sf: f64) -> String {
    let s = format!("{sf}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// Parses `1,3,5-7` into query numbers.
pub fn parse_list(s: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let part = part.trim_start_matches(['q', 'Q']);
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim().trim_start_matches(['q', 'Q'])),
            None => (part, part),
        };
        let a: usize = a.parse().map_err(|_| format!("invalid query number {a:?}"))?;
        let b: usize = b.parse().map_err(|_| format!("invalid query number {b:?}"))?;
        if !(1..=22).contains(&a) || !(1..=22).contains(&b) || a > b {
            return Err(format!("queries are numbered 1 to 22, got {part:?}"));
        }
        out.extend(a..=b);
    }
    if out.is_empty() {
        return Err("no queries selected".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_lists_parse() {
        assert_eq!(parse_list("1,3,5"), Ok(vec![1, 3, 5]));
        assert_eq!(parse_list("q2-4, 22"), Ok(vec![2, 3, 4, 22]));
        assert!(parse_list("0").is_err());
        assert!(parse_list("23").is_err());
        assert!(parse_list("x").is_err());
    }

    #[test]
    fn the_scale_factor_lands_in_query_eleven_only() {
        assert!(query(11, 0.1).contains("0.0001 / 0.1"));
        assert!(!query(11, 1.0).contains(":sf"));
        assert_eq!(format_sf(1.0), "1");
        assert_eq!(format_sf(0.01), "0.01");
        for n in 1..=22 {
            assert!(query(n, 1.0).to_uppercase().contains("SELECT"));
            assert!(!query(n, 1.0).contains(':'), "q{n}");
        }
    }
}
