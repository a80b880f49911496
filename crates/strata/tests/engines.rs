//! Differential test of the two engines: random analytic queries (joins inner and outer,
//! GROUP BY with every aggregate, HAVING, IN / EXISTS / scalar subqueries, NULLs, decimal
//! arithmetic and division, dates and their functions, strings, CASE, ORDER BY with LIMIT)
//! run over the same tables once with `tidb_isolation_read_engines = 'tikv'` (the row
//! engine) and once with `'tiflash'` (the column engine on DataFusion), and must return
//! the same rows and the same column types. The column engine must really answer most of
//! them (`Strata_columnar_queries`), or the comparison means little. `STRATA_ENGINES_SEED`
//! replays a run and `STRATA_ENGINES_QUERIES` lengthens it.

mod common;

use mysql_async::prelude::Queryable;
use mysql_async::Conn;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// Rows of the fact table; the dimension table has `DIMS`.
const FACTS: usize = 400;
const DIMS: usize = 40;

fn pick<'a>(rng: &mut StdRng, xs: &[&'a str]) -> &'a str {
    xs[rng.gen_range(0..xs.len())]
}

/// Maybe NULL: one time in `one_in`.
fn maybe_null(rng: &mut StdRng, one_in: u32, v: String) -> String {
    if rng.gen_range(0..one_in) == 0 {
        "NULL".into()
    } else {
        v
    }
}

/// Predicates over the fact table `f`.
fn fact_pred(rng: &mut StdRng) -> String {
    let one = |rng: &mut StdRng| -> String {
        match rng.gen_range(0..12) {
            0 => format!("f.qty {} {}", pick(rng, &["<", "<=", ">", ">=", "=", "<>"]), rng.gen_range(-2..30)),
            1 => {
                format!("f.amt {} {}.{:02}", pick(rng, &["<", ">", ">="]), rng.gen_range(0..900), rng.gen_range(0..100))
            }
            2 => format!("f.g {}", pick(rng, &["IS NULL", "IS NOT NULL", "= 'b'", "<> 'a'", "IN ('a', 'c')", "> 'b'"])),
            3 => format!(
                "f.dt {} '{}'",
                pick(rng, &["<", ">=", "="]),
                pick(rng, &["1995-03-15", "1996-01-01", "1994-06-30", "1998-12-01"])
            ),
            4 => {
                format!("f.dt BETWEEN '1995-01-01' AND DATE_ADD('1995-01-01', INTERVAL {} MONTH)", rng.gen_range(1..24))
            }
            5 => format!("f.s LIKE '{}'", pick(rng, &["%ab%", "a%", "%z", "_b%", "%"])),
            6 => format!("f.qty % {} = {}", rng.gen_range(2..5), rng.gen_range(0..2)),
            7 => "f.k IS NULL".into(),
            8 => format!("f.amt * f.qty > {}", rng.gen_range(0..5000)),
            9 => format!("YEAR(f.dt) = {}", rng.gen_range(1993..1999)),
            10 => format!("f.ts < '1996-0{}-01 12:00:00'", rng.gen_range(1..10)),
            _ => format!("COALESCE(f.qty, 0) BETWEEN {} AND {}", rng.gen_range(0..10), rng.gen_range(10..30)),
        }
    };
    match rng.gen_range(0..5) {
        0 => format!("{} AND {}", one(rng), one(rng)),
        1 => format!("({} OR {})", one(rng), one(rng)),
        2 => format!("NOT ({})", one(rng)),
        _ => one(rng),
    }
}

/// Predicates over the dimension table `d`.
fn dim_pred(rng: &mut StdRng) -> String {
    match rng.gen_range(0..6) {
        0 => format!("d.cat = '{}'", pick(rng, &["AAA", "BBB", "CCC"])),
        1 => format!("d.w {} {}.{}", pick(rng, &["<", ">"]), rng.gen_range(0..3), rng.gen_range(0..1000)),
        2 => format!("d.born < '19{}-01-01'", rng.gen_range(60..99)),
        3 => "d.name IS NOT NULL".into(),
        4 => format!("d.id % {} = 0", rng.gen_range(2..6)),
        _ => format!("d.name LIKE '{}'", pick(rng, &["n1%", "%3", "%"])),
    }
}

/// A numeric expression over `f` (and `d` when joined), decimal or integer.
fn number(rng: &mut StdRng, joined: bool) -> String {
    let mut xs = vec![
        "f.amt",
        "f.qty",
        "f.amt * f.qty",
        "f.amt / 7",
        "f.qty / 4",
        "f.qty DIV 3",
        "f.amt - f.qty",
        "f.amt * 0.15",
        "CASE WHEN f.qty > 10 THEN f.amt ELSE 0 END",
        "COALESCE(f.amt, f.qty)",
        "f.amt / NULLIF(f.qty, 0)",
        "ABS(f.qty - 12)",
        "ROUND(f.amt, 1)",
    ];
    if joined {
        xs.extend(["f.amt * d.w", "d.w", "f.qty + d.id", "f.amt * (1 - d.w)"]);
    }
    pick(rng, &xs).to_string()
}

/// Any scalar expression for a select list.
fn scalar(rng: &mut StdRng, joined: bool) -> String {
    match rng.gen_range(0..10) {
        0 => pick(rng, &["YEAR(f.dt)", "MONTH(f.dt)", "DAYOFWEEK(f.dt)", "EXTRACT(YEAR FROM f.dt)"]).into(),
        1 => pick(
            rng,
            &["DATE_ADD(f.dt, INTERVAL 10 DAY)", "DATE_SUB(f.dt, INTERVAL 1 MONTH)", "DATEDIFF(f.dt, '1995-01-01')"],
        )
        .into(),
        2 => pick(rng, &["UPPER(f.s)", "SUBSTRING(f.s, 2, 3)", "CONCAT(f.g, '-', f.s)", "LENGTH(f.s)", "TRIM(f.s)"])
            .into(),
        3 => pick(rng, &["f.g", "COALESCE(f.g, 'none')", "IF(f.qty > 5, 'big', 'small')"]).into(),
        4 => pick(rng, &["f.ts", "DATE(f.ts)", "HOUR(f.ts)"]).into(),
        _ => number(rng, joined),
    }
}

/// An aggregate call.
fn aggregate(rng: &mut StdRng, joined: bool) -> String {
    let n = number(rng, joined);
    match rng.gen_range(0..9) {
        0 => "COUNT(*)".into(),
        1 => format!("COUNT({})", pick(rng, &["f.g", "f.k", "f.amt", "f.dt"])),
        2 => format!("SUM({n})"),
        3 => format!("AVG({n})"),
        4 => format!("MIN({})", pick(rng, &["f.dt", "f.s", "f.amt", "f.ts", "f.g"])),
        5 => format!("MAX({})", pick(rng, &["f.dt", "f.s", "f.qty", "f.ts", "f.g"])),
        6 => format!("COUNT(DISTINCT {})", pick(rng, &["f.g", "f.qty", "f.k"])),
        7 => format!("SUM(CASE WHEN {} THEN 1 ELSE 0 END)", fact_pred(rng)),
        _ => format!("MAX({n})"),
    }
}

/// One random analytic query.
fn query(rng: &mut StdRng) -> String {
    match rng.gen_range(0..9) {
        // Grouped aggregation over the fact table.
        0 | 1 => {
            let g =
                pick(rng, &["f.g", "f.k", "YEAR(f.dt)", "f.qty % 3", "f.g, f.qty % 2", "DATE_FORMAT(f.dt, '%Y-%m')"]);
            let having = if rng.gen_range(0..3) == 0 { " HAVING COUNT(*) > 2".to_string() } else { String::new() };
            format!(
                "SELECT {g}, {}, {} FROM f WHERE {} GROUP BY {g}{having}",
                aggregate(rng, false),
                aggregate(rng, false),
                fact_pred(rng)
            )
        }
        // Inner join and aggregation.
        2 => format!(
            "SELECT d.cat, {}, {} FROM f JOIN d ON f.k = d.id WHERE {} AND {} GROUP BY d.cat",
            aggregate(rng, true),
            aggregate(rng, true),
            fact_pred(rng),
            dim_pred(rng)
        ),
        // Outer join: dimensions without facts keep NULLs.
        3 => format!(
            "SELECT d.id, d.name, COUNT(f.id), SUM(f.qty), MAX(f.dt) FROM d LEFT JOIN f ON f.k = d.id AND {} \
             WHERE {} GROUP BY d.id, d.name",
            fact_pred(rng),
            dim_pred(rng)
        ),
        // IN / NOT IN / EXISTS subqueries.
        4 => format!(
            "SELECT f.id, {} FROM f WHERE f.k {} (SELECT d.id FROM d WHERE {}) AND {}",
            scalar(rng, false),
            pick(rng, &["IN", "NOT IN"]),
            dim_pred(rng),
            fact_pred(rng)
        ),
        5 => format!(
            "SELECT d.id, d.cat FROM d WHERE {}EXISTS (SELECT 1 FROM f WHERE f.k = d.id AND {})",
            pick(rng, &["", "NOT "]),
            fact_pred(rng)
        ),
        // A scalar subquery against an aggregate.
        6 => format!(
            "SELECT f.id, f.amt FROM f WHERE f.amt > (SELECT {} FROM f WHERE {}) AND {}",
            pick(rng, &["AVG(f.amt)", "MAX(f.amt) / 2", "MIN(f.amt) * 3"]),
            fact_pred(rng),
            fact_pred(rng)
        ),
        // Expressions row by row, a join, ORDER BY a unique key and LIMIT.
        7 => format!(
            "SELECT f.id, {}, {} FROM f JOIN d ON d.id = f.k WHERE {} ORDER BY {} f.id LIMIT {}",
            scalar(rng, true),
            scalar(rng, true),
            fact_pred(rng),
            pick(rng, &["", "f.g DESC,", "f.dt,", "d.cat,"]),
            rng.gen_range(1..40)
        ),
        // Expressions without a join, DISTINCT, UNION.
        _ => match rng.gen_range(0..3) {
            0 => format!("SELECT DISTINCT {} FROM f WHERE {}", scalar(rng, false), fact_pred(rng)),
            1 => format!(
                "SELECT f.g, f.qty FROM f WHERE {} UNION {} SELECT d.cat, d.id FROM d WHERE {}",
                fact_pred(rng),
                pick(rng, &["", "ALL"]),
                dim_pred(rng)
            ),
            _ => format!("SELECT f.id, {}, {} FROM f WHERE {}", scalar(rng, false), scalar(rng, false), fact_pred(rng)),
        },
    }
}

type Answer = (Vec<String>, Vec<Vec<Option<String>>>);

/// Column types and rows (sorted: the engines may return an unordered result in any
/// order; ordered queries order by a unique key), or the error number.
async fn run(conn: &mut Conn, sql: &str) -> Result<Answer, u16> {
    let mut result = match conn.query_iter(sql).await {
        Ok(r) => r,
        Err(mysql_async::Error::Server(e)) => return Err(e.code),
        Err(e) => panic!("{sql}: connection failed: {e}"),
    };
    let types = result
        .columns()
        .map(|cs| cs.iter().map(|c| format!("{:?}/{}", c.column_type(), c.decimals())).collect())
        .unwrap_or_default();
    let rows: Vec<mysql_async::Row> = match result.collect().await {
        Ok(r) => r,
        Err(mysql_async::Error::Server(e)) => return Err(e.code),
        Err(e) => panic!("{sql}: connection failed: {e}"),
    };
    let mut rows = common::text_rows(rows);
    rows.sort();
    Ok((types, rows))
}

async fn status(conn: &mut Conn, name: &str) -> u64 {
    let row: Option<(String, u64)> =
        conn.query_first(format!("SHOW SESSION STATUS LIKE '{name}'")).await.expect("status");
    row.map(|r| r.1).unwrap_or(0)
}

async fn load(conn: &mut Conn, rng: &mut StdRng) {
    conn.query_drop(
        "CREATE TABLE d (id INT PRIMARY KEY, name VARCHAR(10), cat CHAR(3) NOT NULL, w DECIMAL(6,3), born DATE)",
    )
    .await
    .expect("create d");
    conn.query_drop(
        "CREATE TABLE f (id INT PRIMARY KEY, k INT, g VARCHAR(8), amt DECIMAL(12,2), qty INT, dt DATE NOT NULL, \
         ts DATETIME, s VARCHAR(20), KEY k_k (k), KEY k_dt (dt))",
    )
    .await
    .expect("create f");
    let mut dims = Vec::new();
    for id in 1..=DIMS {
        let name = format!("'n{}'", rng.gen_range(0..50));
        let name = maybe_null(rng, 8, name);
        let cat = pick(rng, &["'AAA'", "'BBB'", "'CCC'"]);
        let w = format!("{}.{:03}", rng.gen_range(0..3), rng.gen_range(0..1000));
        let w = maybe_null(rng, 6, w);
        let born = format!("'19{}-{:02}-{:02}'", rng.gen_range(50..99), rng.gen_range(1..13), rng.gen_range(1..29));
        let born = maybe_null(rng, 5, born);
        dims.push(format!("({id}, {name}, {cat}, {w}, {born})"));
    }
    conn.query_drop(format!("INSERT INTO d VALUES {}", dims.join(", "))).await.expect("insert d");
    let mut facts = Vec::new();
    for id in 1..=FACTS {
        // Some keys match no dimension, some are NULL.
        let k = rng.gen_range(1..(DIMS as i64 + 6)).to_string();
        let k = maybe_null(rng, 10, k);
        let g = format!("'{}'", pick(rng, &["a", "b", "c", "d"]));
        let g = maybe_null(rng, 6, g);
        let amt = format!("{}.{:02}", rng.gen_range(0..1000), rng.gen_range(0..100));
        let amt = maybe_null(rng, 9, amt);
        let qty = rng.gen_range(0..25).to_string();
        let qty = maybe_null(rng, 12, qty);
        let dt = format!("'199{}-{:02}-{:02}'", rng.gen_range(3..9), rng.gen_range(1..13), rng.gen_range(1..29));
        let ts = format!(
            "'199{}-{:02}-{:02} {:02}:{:02}:{:02}'",
            rng.gen_range(3..9),
            rng.gen_range(1..13),
            rng.gen_range(1..29),
            rng.gen_range(0..24),
            rng.gen_range(0..60),
            rng.gen_range(0..60)
        );
        let ts = maybe_null(rng, 7, ts);
        let s = format!(
            "'{}{}{}'",
            pick(rng, &["a", "b", "ab", "z", " x"]),
            pick(rng, &["", "ab", "bz", "q "]),
            rng.gen_range(0..100)
        );
        let s = maybe_null(rng, 8, s);
        facts.push(format!("({id}, {k}, {g}, {amt}, {qty}, {dt}, {ts}, {s})"));
    }
    conn.query_drop(format!("INSERT INTO f VALUES {}", facts.join(", "))).await.expect("insert f");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn analytic_queries_agree_on_both_engines() {
    let seed: u64 = std::env::var("STRATA_ENGINES_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261124);
    let queries: usize = std::env::var("STRATA_ENGINES_QUERIES").ok().and_then(|s| s.parse().ok()).unwrap_or(300);
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(dir.path());
    common::exec(&server.pool(None), &["CREATE DATABASE eng"]).await;
    let pool = server.pool(Some("eng"));
    let mut conn = pool.get_conn().await.expect("connect");
    load(&mut conn, &mut rng).await;

    let mut mismatches = Vec::new();
    let (mut columnar, mut errors) = (0, 0);
    for _ in 0..queries {
        let sql = query(&mut rng);
        conn.query_drop("SET SESSION tidb_isolation_read_engines = 'tikv'").await.expect("set");
        let row = run(&mut conn, &sql).await;
        conn.query_drop("SET SESSION tidb_isolation_read_engines = 'tiflash'").await.expect("set");
        let before = status(&mut conn, "Strata_columnar_queries").await;
        let column = run(&mut conn, &sql).await;
        if status(&mut conn, "Strata_columnar_queries").await > before {
            columnar += 1;
        }
        match (&row, &column) {
            (Ok(a), Ok(b)) if a == b => {}
            (Err(a), Err(b)) if a == b => errors += 1,
            _ => mismatches.push(format!("{sql}\n  row    -> {row:?}\n  column -> {column:?}")),
        }
    }
    eprintln!(
        "seed {seed}: {queries} queries, {columnar} answered by the column engine, {errors} failed alike, {} differ",
        mismatches.len()
    );
    assert!(
        mismatches.is_empty(),
        "seed {seed}: {} of {queries} queries differ between the engines:\n{}",
        mismatches.len(),
        mismatches.iter().take(12).cloned().collect::<Vec<_>>().join("\n\n")
    );
    assert!(errors < queries / 10, "too many queries failed on both engines ({errors}); the generator makes bad SQL");
    assert!(
        columnar * 10 >= queries * 7,
        "the column engine answered only {columnar} of {queries} queries; the rest fell back to the row engine"
    );
}
