//! `tpcc check`: the consistency conditions of clause 3.3.2.1–3.3.2.12, per warehouse.
//!
//! Each condition is one query per warehouse that counts the rows (warehouses, districts,
//! orders or customers) that break it, so a failure says how much is wrong and where. The
//! queries use only joins, derived tables and grouping that MySQL, MariaDB, TiDB and Strata
//! all run.
//!
//! Condition 11 as printed holds only for the initial population (`count(ORDER) -
//! count(NEW-ORDER) = 2100` per district); every Delivery moves one order out of NEW-ORDER and
//! adds one to a customer's C_DELIVERY_CNT, so the form checked here, which holds at every
//! point of a correct run, is `count(ORDER) - count(NEW-ORDER) = 2100 + sum(C_DELIVERY_CNT)`.

use std::io::Write;

use anyhow::Result;
use mysql_async::prelude::Queryable;
use mysql_async::Params;

use crate::conn::{describe, Target};

/// One consistency condition.
pub struct Condition {
    /// Clause number, `3.3.2.n`.
    pub clause: &'static str,
    /// What must hold.
    pub rule: &'static str,
    /// The query counting violations; every `?` is the warehouse id.
    pub sql: &'static str,
}

/// The twelve conditions.
pub const CONDITIONS: [Condition; 12] = [
    Condition {
        clause: "3.3.2.1",
        rule: "W_YTD = sum(D_YTD)",
        sql: "SELECT COUNT(*) FROM warehouse WHERE w_id = ? \
              AND w_ytd <> (SELECT SUM(d_ytd) FROM district WHERE d_w_id = ?)",
    },
    Condition {
        clause: "3.3.2.2",
        rule: "D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)",
        sql: "SELECT COUNT(*) FROM district \
              JOIN (SELECT o_d_id, MAX(o_id) AS m FROM orders WHERE o_w_id = ? GROUP BY o_d_id) o ON o.o_d_id = d_id \
              LEFT JOIN (SELECT no_d_id, MAX(no_o_id) AS m FROM new_order WHERE no_w_id = ? GROUP BY no_d_id) n \
                ON n.no_d_id = d_id \
              WHERE d_w_id = ? AND (d_next_o_id - 1 <> o.m OR (n.m IS NOT NULL AND d_next_o_id - 1 <> n.m))",
    },
    Condition {
        clause: "3.3.2.3",
        rule: "max(NO_O_ID) - min(NO_O_ID) + 1 = count(NEW-ORDER) per district",
        sql: "SELECT COUNT(*) FROM (SELECT no_d_id FROM new_order WHERE no_w_id = ? GROUP BY no_d_id \
              HAVING MAX(no_o_id) - MIN(no_o_id) + 1 <> COUNT(*)) x",
    },
    Condition {
        clause: "3.3.2.4",
        rule: "sum(O_OL_CNT) = count(ORDER-LINE) per district",
        sql: "SELECT COUNT(*) FROM (SELECT o_d_id, SUM(o_ol_cnt) AS s FROM orders WHERE o_w_id = ? GROUP BY o_d_id) o \
              LEFT JOIN (SELECT ol_d_id, COUNT(*) AS c FROM order_line WHERE ol_w_id = ? GROUP BY ol_d_id) l \
                ON l.ol_d_id = o.o_d_id \
              WHERE l.c IS NULL OR o.s <> l.c",
    },
    Condition {
        clause: "3.3.2.5",
        rule: "O_CARRIER_ID is null exactly for orders with a NEW-ORDER row",
        sql: "SELECT (SELECT COUNT(*) FROM orders WHERE o_w_id = ? AND o_carrier_id IS NULL) \
              + (SELECT COUNT(*) FROM new_order WHERE no_w_id = ?) \
              - 2 * (SELECT COUNT(*) FROM orders JOIN new_order \
                       ON no_w_id = o_w_id AND no_d_id = o_d_id AND no_o_id = o_id \
                     WHERE o_w_id = ? AND no_w_id = ? AND o_carrier_id IS NULL)",
    },
    Condition {
        clause: "3.3.2.6",
        rule: "O_OL_CNT = count(ORDER-LINE) per order",
        sql: "SELECT COUNT(*) FROM orders \
              LEFT JOIN (SELECT ol_d_id, ol_o_id, COUNT(*) AS c FROM order_line WHERE ol_w_id = ? \
                         GROUP BY ol_d_id, ol_o_id) l ON l.ol_d_id = o_d_id AND l.ol_o_id = o_id \
              WHERE o_w_id = ? AND (l.c IS NULL OR l.c <> o_ol_cnt)",
    },
    Condition {
        clause: "3.3.2.7",
        rule: "OL_DELIVERY_D is null exactly when O_CARRIER_ID is",
        sql: "SELECT COUNT(*) FROM orders JOIN order_line \
                ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
              WHERE o_w_id = ? AND ol_w_id = ? \
                AND ((o_carrier_id IS NULL AND ol_delivery_d IS NOT NULL) \
                  OR (o_carrier_id IS NOT NULL AND ol_delivery_d IS NULL))",
    },
    Condition {
        clause: "3.3.2.8",
        rule: "W_YTD = sum(H_AMOUNT)",
        sql: "SELECT COUNT(*) FROM warehouse WHERE w_id = ? \
              AND w_ytd <> (SELECT COALESCE(SUM(h_amount), 0) FROM history WHERE h_w_id = ?)",
    },
    Condition {
        clause: "3.3.2.9",
        rule: "D_YTD = sum(H_AMOUNT) per district",
        sql: "SELECT COUNT(*) FROM district \
              LEFT JOIN (SELECT h_d_id, SUM(h_amount) AS s FROM history WHERE h_w_id = ? GROUP BY h_d_id) h \
                ON h.h_d_id = d_id \
              WHERE d_w_id = ? AND d_ytd <> COALESCE(h.s, 0)",
    },
    Condition {
        clause: "3.3.2.10",
        rule: "C_BALANCE = sum(delivered OL_AMOUNT) - sum(H_AMOUNT) per customer",
        sql: "SELECT COUNT(*) FROM customer \
              LEFT JOIN (SELECT o_d_id, o_c_id, SUM(ol_amount) AS s FROM orders JOIN order_line \
                           ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
                         WHERE o_w_id = ? AND ol_w_id = ? AND ol_delivery_d IS NOT NULL GROUP BY o_d_id, o_c_id) a \
                ON a.o_d_id = c_d_id AND a.o_c_id = c_id \
              LEFT JOIN (SELECT h_c_d_id, h_c_id, SUM(h_amount) AS s FROM history WHERE h_c_w_id = ? \
                         GROUP BY h_c_d_id, h_c_id) h ON h.h_c_d_id = c_d_id AND h.h_c_id = c_id \
              WHERE c_w_id = ? AND c_balance <> COALESCE(a.s, 0) - COALESCE(h.s, 0)",
    },
    Condition {
        clause: "3.3.2.11",
        rule: "count(ORDER) - count(NEW-ORDER) = 2100 + sum(C_DELIVERY_CNT) per district",
        sql: "SELECT COUNT(*) FROM district \
              JOIN (SELECT o_d_id, COUNT(*) AS c FROM orders WHERE o_w_id = ? GROUP BY o_d_id) o ON o.o_d_id = d_id \
              LEFT JOIN (SELECT no_d_id, COUNT(*) AS c FROM new_order WHERE no_w_id = ? GROUP BY no_d_id) n \
                ON n.no_d_id = d_id \
              JOIN (SELECT c_d_id, SUM(c_delivery_cnt) AS s FROM customer WHERE c_w_id = ? GROUP BY c_d_id) c \
                ON c.c_d_id = d_id \
              WHERE d_w_id = ? AND o.c - COALESCE(n.c, 0) <> 2100 + c.s",
    },
    Condition {
        clause: "3.3.2.12",
        rule: "C_BALANCE + C_YTD_PAYMENT = sum(delivered OL_AMOUNT) per customer",
        sql: "SELECT COUNT(*) FROM customer \
              LEFT JOIN (SELECT o_d_id, o_c_id, SUM(ol_amount) AS s FROM orders JOIN order_line \
                           ON ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id \
                         WHERE o_w_id = ? AND ol_w_id = ? AND ol_delivery_d IS NOT NULL GROUP BY o_d_id, o_c_id) a \
                ON a.o_d_id = c_d_id AND a.o_c_id = c_id \
              WHERE c_w_id = ? AND c_balance + c_ytd_payment <> COALESCE(a.s, 0)",
    },
];

/// The result of one condition on one warehouse.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    /// Clause number.
    pub clause: &'static str,
    /// Warehouse.
    pub warehouse: u32,
    /// `Ok(violations)` or the server's error.
    pub result: Result<i64, String>,
}

impl Finding {
    /// Whether the condition holds.
    pub fn passed(&self) -> bool {
        matches!(self.result, Ok(0))
    }
}

/// Checks every condition on every warehouse; prints one line per condition and returns
/// every finding (the caller decides the exit status).
pub async fn check(target: &Target, db: &str) -> Result<Vec<Finding>> {
    let (mut conn, warehouses) = crate::loader::open_loaded(target, db, "warehouse", "tpcc").await?;
    let warehouses = warehouses as u32;
    let mut findings = Vec::new();
    let mut out = std::io::stdout();
    for cond in &CONDITIONS {
        let params = cond.sql.matches('?').count();
        let mut failed = Vec::new();
        for w in 1..=warehouses {
            let args: Vec<mysql_async::Value> = (0..params).map(|_| mysql_async::Value::Int(w.into())).collect();
            let result = conn
                .exec_first::<Option<i64>, _, _>(cond.sql, Params::Positional(args))
                .await
                .map(|v| v.flatten().unwrap_or(0))
                .map_err(|e| describe(&e));
            let f = Finding { clause: cond.clause, warehouse: w, result };
            if !f.passed() {
                failed.push(match &f.result {
                    Ok(n) => format!("warehouse {w}: {n} violations"),
                    Err(e) => format!("warehouse {w}: error {e}"),
                });
            }
            findings.push(f);
        }
        if failed.is_empty() {
            writeln!(out, "{:<9} ok    {}", cond.clause, cond.rule)?;
        } else {
            writeln!(out, "{:<9} FAIL  {} ({})", cond.clause, cond.rule, failed.join("; "))?;
        }
    }
    let bad = findings.iter().filter(|f| !f.passed()).count();
    if bad == 0 {
        writeln!(out, "all {} conditions hold on {warehouses} warehouses", CONDITIONS.len())?;
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_numbered_in_order_and_parameterized_by_warehouse() {
        for (i, c) in CONDITIONS.iter().enumerate() {
            assert_eq!(c.clause, format!("3.3.2.{}", i + 1));
            assert!(c.sql.contains('?'), "{} has no warehouse parameter", c.clause);
            assert!(c.sql.starts_with("SELECT"));
        }
    }
}
