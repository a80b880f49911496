//! The TPC-H tables (clause 1.4) in MySQL syntax: primary keys plus the foreign-key indexes
//! the queries' joins use, so row stores without a columnar engine get index lookups.

/// Table names in load order (small tables first).
pub const TABLES: [&str; 8] = ["region", "nation", "supplier", "customer", "part", "partsupp", "orders", "lineitem"];

/// CREATE TABLE statements, one per table of [`TABLES`] (same order).
pub const CREATE: [&str; 8] = [
    "CREATE TABLE IF NOT EXISTS region (
        r_regionkey INT NOT NULL, r_name CHAR(25) NOT NULL, r_comment VARCHAR(152),
        PRIMARY KEY (r_regionkey))",
    "CREATE TABLE IF NOT EXISTS nation (
        n_nationkey INT NOT NULL, n_name CHAR(25) NOT NULL, n_regionkey INT NOT NULL, n_comment VARCHAR(152),
        PRIMARY KEY (n_nationkey))",
    "CREATE TABLE IF NOT EXISTS supplier (
        s_suppkey INT NOT NULL, s_name CHAR(25) NOT NULL, s_address VARCHAR(40) NOT NULL, s_nationkey INT NOT NULL,
        s_phone CHAR(15) NOT NULL, s_acctbal DECIMAL(15,2) NOT NULL, s_comment VARCHAR(101) NOT NULL,
        PRIMARY KEY (s_suppkey), INDEX idx_s_nationkey (s_nationkey))",
    "CREATE TABLE IF NOT EXISTS customer (
        c_custkey INT NOT NULL, c_name VARCHAR(25) NOT NULL, c_address VARCHAR(40) NOT NULL, c_nationkey INT NOT NULL,
        c_phone CHAR(15) NOT NULL, c_acctbal DECIMAL(15,2) NOT NULL, c_mktsegment CHAR(10) NOT NULL,
        c_comment VARCHAR(117) NOT NULL,
        PRIMARY KEY (c_custkey), INDEX idx_c_nationkey (c_nationkey))",
    "CREATE TABLE IF NOT EXISTS part (
        p_partkey INT NOT NULL, p_name VARCHAR(55) NOT NULL, p_mfgr CHAR(25) NOT NULL, p_brand CHAR(10) NOT NULL,
        p_type VARCHAR(25) NOT NULL, p_size INT NOT NULL, p_container CHAR(10) NOT NULL,
        p_retailprice DECIMAL(15,2) NOT NULL, p_comment VARCHAR(23) NOT NULL,
        PRIMARY KEY (p_partkey))",
    "CREATE TABLE IF NOT EXISTS partsupp (
        ps_partkey INT NOT NULL, ps_suppkey INT NOT NULL, ps_availqty INT NOT NULL, ps_supplycost DECIMAL(15,2) NOT NULL,
        ps_comment VARCHAR(199) NOT NULL,
        PRIMARY KEY (ps_partkey, ps_suppkey), INDEX idx_ps_suppkey (ps_suppkey))",
    "CREATE TABLE IF NOT EXISTS orders (
        o_orderkey BIGINT NOT NULL, o_custkey INT NOT NULL, o_orderstatus CHAR(1) NOT NULL,
        o_totalprice DECIMAL(15,2) NOT NULL, o_orderdate DATE NOT NULL, o_orderpriority CHAR(15) NOT NULL,
        o_clerk CHAR(15) NOT NULL, o_shippriority INT NOT NULL, o_comment VARCHAR(79) NOT NULL,
        PRIMARY KEY (o_orderkey), INDEX idx_o_custkey (o_custkey))",
    "CREATE TABLE IF NOT EXISTS lineitem (
        l_orderkey BIGINT NOT NULL, l_partkey INT NOT NULL, l_suppkey INT NOT NULL, l_linenumber INT NOT NULL,
        l_quantity DECIMAL(15,2) NOT NULL, l_extendedprice DECIMAL(15,2) NOT NULL, l_discount DECIMAL(15,2) NOT NULL,
        l_tax DECIMAL(15,2) NOT NULL, l_returnflag CHAR(1) NOT NULL, l_linestatus CHAR(1) NOT NULL,
        l_shipdate DATE NOT NULL, l_commitdate DATE NOT NULL, l_receiptdate DATE NOT NULL,
        l_shipinstruct CHAR(25) NOT NULL, l_shipmode CHAR(10) NOT NULL, l_comment VARCHAR(44) NOT NULL,
        PRIMARY KEY (l_orderkey, l_linenumber), INDEX idx_l_partkey_suppkey (l_partkey, l_suppkey))",
];

/// For each table of [`TABLES`], which columns are numbers (rendered unquoted).
pub const NUMERIC: [&[bool]; 8] = [
    &[true, false, false],
    &[true, false, true, false],
    &[true, false, false, true, false, true, false],
    &[true, false, false, true, false, true, false, false],
    &[true, false, false, false, false, true, false, true, false],
    &[true, true, true, true, false],
    &[true, true, false, true, false, false, false, true, false],
    &[true, true, true, true, true, true, true, true, false, false, false, false, false, false, false, false],
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_masks_match_the_column_counts() {
        for (i, ddl) in CREATE.iter().enumerate() {
            let body = ddl.split_once('(').map(|x| x.1).unwrap_or("");
            let cols = body
                .split(&[',', '\n'][..])
                .map(str::trim)
                .filter(|c| {
                    c.split_whitespace().nth(1).is_some_and(|t| {
                        ["INT", "BIGINT", "CHAR", "VARCHAR", "DECIMAL", "DATE"].iter().any(|k| t.starts_with(k))
                    })
                })
                .count();
            assert_eq!(cols, NUMERIC[i].len(), "{}", TABLES[i]);
        }
    }
}
