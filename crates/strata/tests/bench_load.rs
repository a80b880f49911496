//! The TPC-C schema and generated rows of `strata-bench` against a real server: every table
//! is created, a slice of one warehouse loads through multi-row INSERTs, and the loaded data
//! meets the TPC-C consistency conditions that apply to a fresh load.

mod common;

use mysql_async::prelude::Queryable;
use rand::rngs::StdRng;
use rand::SeedableRng;
use strata_bench::tpcc::load::{self, Row};
use strata_bench::tpcc::random::Constants;
use strata_bench::tpcc::schema;

async fn insert(conn: &mut mysql_async::Conn, table: &str, rows: &[Row]) {
    for chunk in rows.chunks(500) {
        conn.query_drop(format!("INSERT INTO {table} VALUES {}", load::values_sql(chunk)))
            .await
            .unwrap_or_else(|e| panic!("insert into {table}: {e}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tpcc_schema_and_generated_rows_load_consistently() {
    let dir = tempfile::tempdir().expect("tempdir");
    let server = common::StrataProcess::start(dir.path());
    common::exec(&server.pool(None), &["CREATE DATABASE tpcc"]).await;
    let mut conn = server.pool(Some("tpcc")).get_conn().await.expect("connect");
    for ddl in schema::CREATE {
        conn.query_drop(ddl).await.unwrap_or_else(|e| panic!("{ddl}: {e}"));
    }
    let tables: Vec<String> = conn.query("SHOW TABLES").await.expect("show tables");
    assert_eq!(tables.len(), schema::TABLES.len());

    let mut rng = StdRng::seed_from_u64(11);
    let k = Constants::for_load(&mut rng);
    let now = "2026-11-21 10:00:00";
    let (w, d) = (1, 1);
    insert(&mut conn, "item", &(1..=1000).map(|i| load::item(&mut rng, i)).collect::<Vec<_>>()).await;
    insert(&mut conn, "warehouse", &[load::warehouse(&mut rng, w)]).await;
    insert(&mut conn, "stock", &(1..=1000).map(|i| load::stock(&mut rng, w, i)).collect::<Vec<_>>()).await;
    insert(&mut conn, "district", &[load::district(&mut rng, w, d)]).await;
    let customers: Vec<Row> = (1..=load::CUSTOMERS).map(|c| load::customer(&mut rng, &k, w, d, c, now)).collect();
    insert(&mut conn, "customer", &customers).await;
    let history: Vec<Row> = (1..=load::CUSTOMERS).map(|c| load::history(&mut rng, w, d, c, now)).collect();
    insert(&mut conn, "history", &history).await;
    let orders = load::district_orders(&mut rng, w, d, now);
    insert(&mut conn, "orders", &orders.orders).await;
    insert(&mut conn, "order_line", &orders.lines).await;
    insert(&mut conn, "new_order", &orders.new_orders).await;

    // 3.3.2.2: D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID).
    let (next, max_o, max_no): (i64, i64, i64) = conn
        .query_first(
            "SELECT d_next_o_id, (SELECT MAX(o_id) FROM orders WHERE o_w_id = 1 AND o_d_id = 1), \
             (SELECT MAX(no_o_id) FROM new_order WHERE no_w_id = 1 AND no_d_id = 1) \
             FROM district WHERE d_w_id = 1 AND d_id = 1",
        )
        .await
        .expect("condition 2")
        .expect("row");
    assert_eq!((next - 1, next - 1), (max_o, max_no));
    // 3.3.2.3: NEW-ORDER ids of a district are contiguous.
    let gap: i64 = conn
        .query_first("SELECT MAX(no_o_id) - MIN(no_o_id) + 1 - COUNT(*) FROM new_order WHERE no_w_id = 1")
        .await
        .expect("condition 3")
        .expect("row");
    assert_eq!(gap, 0);
    // 3.3.2.4: sum(O_OL_CNT) = count(ORDER-LINE).
    let (sum_cnt, lines): (i64, i64) = conn
        .query_first("SELECT (SELECT SUM(o_ol_cnt) FROM orders), (SELECT COUNT(*) FROM order_line)")
        .await
        .expect("condition 4")
        .expect("row");
    assert_eq!(sum_cnt, lines);
    // 3.3.2.8 / 3.3.2.9: W_YTD = sum(D_YTD) = sum(H_AMOUNT) of the loaded slice (one district).
    let (d_ytd, h_sum): (String, String) = conn
        .query_first("SELECT (SELECT d_ytd FROM district), (SELECT SUM(h_amount) FROM history)")
        .await
        .expect("condition 9")
        .expect("row");
    assert_eq!((d_ytd.as_str(), h_sum.as_str()), ("30000.00", "30000.00"));
    // Customers by last name use the secondary index.
    let plan: Vec<String> = conn
        .query("EXPLAIN SELECT c_id FROM customer WHERE c_w_id = 1 AND c_d_id = 1 AND c_last = 'BARBARBAR'")
        .await
        .expect("explain");
    assert!(plan.iter().any(|l| l.contains("idx_customer")), "{plan:?}");
}
