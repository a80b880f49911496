//! Differential test of access paths: random tables of mixed column types are loaded twice,
//! once with a primary key and an index on every column, once with no key at all, and
//! generated predicates (comparisons with constants of every type, BETWEEN, IN, IS NULL,
//! AND/OR/NOT, LIMIT; some read with FOR UPDATE on the keyed side) and equi-joins between
//! columns of different types must return the same rows from both: index ranges, point
//! gets, lookup and hash joins against full scans and nested loops. Some queries also project a random expression (functions of every
//! family over columns and odd constants), so both sides evaluate it on the same rows.
//! `STRATA_DIFF_SEED` replays a run, `STRATA_DIFF_QUERIES` lengthens it, and
//! `STRATA_DIFF_SECS` runs until that much time has passed (`scripts/fuzz.sh`, the SQL
//! fuzzer: a lost connection or a query that takes over a minute fails the run).
//! With `STRATA_DIFF_PEER=mysql://root@127.0.0.1:3307` the same queries also run against
//! that server (MySQL or MariaDB) and its answers are compared too.

mod common;

use mysql_async::prelude::Queryable;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

/// (name, type, value pool) of each column besides `id`.
const COLUMNS: &[(&str, &str, &[&str])] = &[
    ("ci", "INT", &["-3", "-1", "0", "1", "2", "3", "100", "2147483647", "-2147483648", "NULL"]),
    ("cu", "INT UNSIGNED", &["0", "1", "2", "5", "4294967295", "NULL"]),
    ("cb", "BIGINT", &["-1", "0", "2", "9007199254740993", "-9223372036854775808", "9223372036854775807", "NULL"]),
    ("cd", "DECIMAL(8,2)", &["-1.50", "0", "1", "2.50", "3", "999999.99", "NULL"]),
    ("cf", "DOUBLE", &["-1.5", "0", "1", "2.5", "3", "1e10", "NULL"]),
    ("cc", "CHAR(6)", &["''", "'0'", "'1'", "'-2'", "'abc'", "'1.5'", "' 3'", "'2x'", "'b'", "'3'", "NULL"]),
    ("cv", "VARCHAR(12)", &["''", "'10'", "'9'", "'a '", "'abc'", "'2.50'", "'-1'", "'1e1'", "'2020-01-01'", "NULL"]),
    ("cdt", "DATE", &["'2020-01-01'", "'1999-12-31'", "'2020-01-02'", "NULL"]),
    ("ctm", "DATETIME", &["'2020-01-01 00:00:00'", "'2020-01-01 12:00:00'", "'2019-06-30 23:59:59'", "NULL"]),
];

/// Constants predicates compare columns with.
const CONSTANTS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "10",
    "2.5",
    "2.50",
    "-1.5",
    "1e1",
    "2.5e0",
    "1e30",
    "-1e30",
    "9223372036854775807",
    "18446744073709551615",
    "9007199254740993",
    "'1'",
    "'abc'",
    "'-2'",
    "'2x'",
    "' 3'",
    "''",
    "'2.5'",
    "'b'",
    "'2020-01-01'",
    "'2020-01-01 12:00:00'",
    "20200101",
    "NULL",
    "'10'",
    "'9'",
];

const OPS: &[&str] = &["=", "<>", "<", "<=", ">", ">=", "<=>"];

const ROWS: usize = 60;

fn pick<'a>(rng: &mut StdRng, xs: &[&'a str]) -> &'a str {
    xs[rng.gen_range(0..xs.len())]
}

fn column(rng: &mut StdRng) -> &'static str {
    if rng.gen_range(0..10) == 0 {
        "id"
    } else {
        COLUMNS[rng.gen_range(0..COLUMNS.len())].0
    }
}

fn predicate(rng: &mut StdRng, depth: u32) -> String {
    let k = if depth >= 2 { rng.gen_range(0..5) } else { rng.gen_range(0..9) };
    match k {
        0 | 1 => format!("{} {} {}", column(rng), pick(rng, OPS), pick(rng, CONSTANTS)),
        2 => format!("{} {} {}", pick(rng, CONSTANTS), pick(rng, OPS), column(rng)),
        3 => {
            let (a, b) = (pick(rng, CONSTANTS), pick(rng, CONSTANTS));
            format!("{} {}BETWEEN {a} AND {b}", column(rng), if rng.gen_bool(0.2) { "NOT " } else { "" })
        }
        4 => {
            let n = rng.gen_range(1..4);
            let items: Vec<&str> = (0..n).map(|_| pick(rng, CONSTANTS)).collect();
            format!("{} {}IN ({})", column(rng), if rng.gen_bool(0.2) { "NOT " } else { "" }, items.join(", "))
        }
        5 => format!("({}) AND ({})", predicate(rng, depth + 1), predicate(rng, depth + 1)),
        6 => format!("({}) OR ({})", predicate(rng, depth + 1), predicate(rng, depth + 1)),
        7 => format!("NOT ({})", predicate(rng, depth + 1)),
        _ => format!("{} IS {}NULL", column(rng), if rng.gen_bool(0.5) { "NOT " } else { "" }),
    }
}

/// Scalar functions the expression generator calls, with their argument counts.
const FUNCTIONS: &[(&str, usize)] = &[
    ("ABS", 1),
    ("CEIL", 1),
    ("FLOOR", 1),
    ("ROUND", 2),
    ("TRUNCATE", 2),
    ("MOD", 2),
    ("SIGN", 1),
    ("SQRT", 1),
    ("LN", 1),
    ("LOG10", 1),
    ("EXP", 1),
    ("POW", 2),
    ("SIN", 1),
    ("ATAN2", 2),
    ("DEGREES", 1),
    ("CONCAT", 2),
    ("CONCAT_WS", 3),
    ("LENGTH", 1),
    ("CHAR_LENGTH", 1),
    ("UPPER", 1),
    ("LOWER", 1),
    ("TRIM", 1),
    ("SUBSTRING", 3),
    ("SUBSTRING_INDEX", 3),
    ("LEFT", 2),
    ("RIGHT", 2),
    ("LPAD", 3),
    ("RPAD", 3),
    ("REPEAT", 2),
    ("REPLACE", 3),
    ("REVERSE", 1),
    ("LOCATE", 2),
    ("INSTR", 2),
    ("FIND_IN_SET", 2),
    ("FORMAT", 2),
    ("HEX", 1),
    ("UNHEX", 1),
    ("TO_BASE64", 1),
    ("FROM_BASE64", 1),
    ("CONV", 3),
    ("BIN", 1),
    ("CRC32", 1),
    ("MD5", 1),
    ("SHA1", 1),
    ("QUOTE", 1),
    ("ELT", 3),
    ("INSERT", 4),
    ("STRCMP", 2),
    ("BIT_COUNT", 1),
    ("INET_NTOA", 1),
    ("INET_ATON", 1),
    ("IFNULL", 2),
    ("NULLIF", 2),
    ("COALESCE", 3),
    ("IF", 3),
    ("GREATEST", 2),
    ("LEAST", 3),
    ("FIELD", 3),
    ("REGEXP_LIKE", 2),
    ("REGEXP_INSTR", 2),
    ("REGEXP_SUBSTR", 2),
    ("REGEXP_REPLACE", 3),
    ("YEAR", 1),
    ("MONTH", 1),
    ("DAYOFWEEK", 1),
    ("DATEDIFF", 2),
    ("LAST_DAY", 1),
    ("DATE_FORMAT", 2),
];

/// Operands for generated expressions: columns and constants of every kind, including
/// the awkward ones (huge, negative, empty, NULL).
const OPERANDS: &[&str] = &[
    "-1",
    "0",
    "3",
    "2.5",
    "-7.25",
    "1e308",
    "-9223372036854775808",
    "18446744073709551615",
    "''",
    "'a,b'",
    "'%Y-%m'",
    "'[a-c]+'",
    "' x '",
    "'2020-02-29'",
    "NULL",
    "100000000",
];

fn operand(rng: &mut StdRng) -> String {
    if rng.gen_bool(0.5) {
        column(rng).to_string()
    } else {
        pick(rng, OPERANDS).to_string()
    }
}

/// A random scalar expression up to `depth` calls deep.
fn expression(rng: &mut StdRng, depth: u32) -> String {
    match rng.gen_range(0..6) {
        0 if depth > 0 => {
            let op = pick(rng, &["+", "-", "*", "/", "DIV", "%", "&", "|", "<<"]);
            format!("({} {op} {})", expression(rng, depth - 1), expression(rng, depth - 1))
        }
        1..=3 if depth > 0 => {
            let (name, n) = FUNCTIONS[rng.gen_range(0..FUNCTIONS.len())];
            let args: Vec<String> = (0..n).map(|_| expression(rng, depth - 1)).collect();
            format!("{name}({})", args.join(", "))
        }
        _ => operand(rng),
    }
}

/// A result as text, or the server's error number.
async fn run(conn: &mut mysql_async::Conn, sql: &str) -> Result<Vec<Vec<Option<String>>>, u16> {
    match conn.query::<mysql_async::Row, _>(sql).await {
        Ok(rows) => Ok(common::text_rows(rows)),
        Err(mysql_async::Error::Server(e)) => Err(e.code),
        Err(e) => panic!("{sql}: connection failed: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn access_paths_agree_with_full_scans() {
    let seed: u64 = std::env::var("STRATA_DIFF_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(20261123);
    let queries: usize = std::env::var("STRATA_DIFF_QUERIES").ok().and_then(|s| s.parse().ok()).unwrap_or(600);
    let deadline = std::env::var("STRATA_DIFF_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .map(|s| std::time::Instant::now() + std::time::Duration::from_secs(s));
    let mut rng = StdRng::seed_from_u64(seed);
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(dir.path());
    let admin = server.pool(None);
    common::exec(&admin, &["CREATE DATABASE diff"]).await;
    let pool = server.pool(Some("diff"));
    let mut conn = pool.get_conn().await.expect("connect");
    let mut peer = match std::env::var("STRATA_DIFF_PEER") {
        Ok(url) => {
            let opts = mysql_async::Opts::from_url(&url).expect("STRATA_DIFF_PEER url");
            let mut c = mysql_async::Conn::new(opts).await.expect("connect to peer");
            for sql in ["DROP DATABASE IF EXISTS strata_diff", "CREATE DATABASE strata_diff", "USE strata_diff"] {
                c.query_drop(sql).await.expect("peer setup");
            }
            Some(c)
        }
        Err(_) => None,
    };

    let defs: Vec<String> = COLUMNS.iter().map(|(n, t, _)| format!("{n} {t}")).collect();
    let keys: Vec<String> = COLUMNS.iter().map(|(n, _, _)| format!("KEY k_{n} ({n})")).collect();
    conn.query_drop(format!(
        "CREATE TABLE t_idx (id INT PRIMARY KEY, {}, {}, KEY k_ci_cc (ci, cc), KEY k_cc_cd (cc, cd))",
        defs.join(", "),
        keys.join(", ")
    ))
    .await
    .expect("create t_idx");
    let plain_ddl = format!("CREATE TABLE t_plain (id INT, {})", defs.join(", "));
    conn.query_drop(&plain_ddl).await.expect("create t_plain");
    if let Some(p) = &mut peer {
        p.query_drop(format!("{plain_ddl} COLLATE utf8mb4_bin")).await.expect("peer table");
    }
    for id in 1..=ROWS {
        let vals: Vec<&str> = COLUMNS.iter().map(|(_, _, pool)| pick(&mut rng, pool)).collect();
        for t in ["t_idx", "t_plain"] {
            conn.query_drop(format!("INSERT INTO {t} VALUES ({id}, {})", vals.join(", ")))
                .await
                .unwrap_or_else(|e| panic!("insert {vals:?}: {e}"));
        }
        if let Some(p) = &mut peer {
            p.query_drop(format!("INSERT INTO t_plain VALUES ({id}, {})", vals.join(", "))).await.expect("peer insert");
        }
    }

    let mut mismatches = Vec::new();
    let mut errors_agreed = 0;
    let mut q = 0usize;
    while match deadline {
        Some(d) => std::time::Instant::now() < d,
        None => q < queries,
    } {
        q += 1;
        let projected = q % 7 == 3;
        let (indexed, plain) = if projected {
            // A projected expression: both sides evaluate it on the same rows.
            let e = expression(&mut rng, 3);
            let p = predicate(&mut rng, 1);
            (
                format!("SELECT id, {e} FROM t_idx WHERE {p} ORDER BY id"),
                format!("SELECT id, {e} FROM t_plain WHERE {p} ORDER BY id"),
            )
        } else if q % 5 == 4 {
            // An equi-join between two columns of possibly different types: lookup or hash
            // join on the indexed table, a nested loop (the comparison wrapped so it is no
            // join key) on the plain one.
            let (x, y) = (column(&mut rng), column(&mut rng));
            (
                format!("SELECT a.id, b.id FROM t_idx a JOIN t_idx b ON a.{x} = b.{y} ORDER BY 1, 2"),
                format!("SELECT a.id, b.id FROM t_plain a JOIN t_plain b ON (a.{x} = b.{y}) IS TRUE ORDER BY 1, 2"),
            )
        } else {
            let p = predicate(&mut rng, 0);
            let limit =
                if rng.gen_range(0..4) == 0 { format!(" LIMIT {}", rng.gen_range(1..5)) } else { String::new() };
            // Some reads lock (current reads take each row's latest version).
            let lock = if q % 3 == 1 { " FOR UPDATE" } else { "" };
            (
                format!("SELECT id FROM t_idx WHERE {p} ORDER BY id{limit}{lock}"),
                format!("SELECT id FROM t_plain WHERE {p} ORDER BY id{limit}"),
            )
        };
        let limit = std::time::Duration::from_secs(60);
        let a = tokio::time::timeout(limit, run(&mut conn, &indexed))
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: no answer within a minute: {indexed}"));
        let b = tokio::time::timeout(limit, run(&mut conn, &plain))
            .await
            .unwrap_or_else(|_| panic!("seed {seed}: no answer within a minute: {plain}"));
        match (&a, &b) {
            (Ok(x), Ok(y)) if x == y => {}
            (Err(x), Err(y)) if x == y => errors_agreed += 1,
            _ => mismatches.push(format!("{indexed}\n  -> {a:?}\n{plain}\n  -> {b:?}")),
        }
        // Dates against numbers and odd strings are where MySQL and MariaDB disagree with each
        // other; the peer judges the rest. Its errors (and warnings) differ in kind too: only
        // answers are compared.
        // Projected expressions are ours alone: MariaDB lacks some of the functions and
        // formats doubles differently.
        let temporal = plain.contains("cdt") || plain.contains("ctm") || projected;
        if let (Some(p), Ok(ours), false) = (&mut peer, &b, temporal) {
            if let Ok(theirs) = run(p, &plain).await {
                if &theirs != ours {
                    mismatches.push(format!("{plain}\n  strata -> {ours:?}\n  peer   -> {theirs:?}"));
                }
            }
        }
    }
    eprintln!("seed {seed}: {q} queries, {errors_agreed} failed alike on both sides, {} differ", mismatches.len());
    // The indexes must really be in use for the comparison to mean anything.
    let plan = run(&mut conn, "EXPLAIN SELECT id FROM t_idx WHERE ci = 1").await.expect("explain");
    assert!(format!("{plan:?}").contains("Index"), "expected an index plan: {plan:?}");
    assert!(
        errors_agreed < q / 5,
        "too many queries failed on both sides ({errors_agreed}); the generator makes bad SQL"
    );
    assert!(
        mismatches.is_empty(),
        "seed {seed}: {} of {q} queries differ between index paths and full scans:\n{}",
        mismatches.len(),
        mismatches.iter().take(15).cloned().collect::<Vec<_>>().join("\n\n")
    );
}
