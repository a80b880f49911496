//! The five TPC-C transactions (clauses 2.4–2.8): their inputs, drawn by a terminal, and
//! their statements, run through a [`Session`] in either protocol.
//!
//! Inputs are generated before the transaction starts so that a transaction that hits a
//! deadlock or write conflict is retried with the same inputs. Delivery runs inline, as go-tpc
//! and tiup-bench do, rather than through a deferred queue.

use mysql_async::{Row, Value};
use rand::Rng;

use super::load::{DISTRICTS, ITEMS};
use super::mix::TxnKind;
use super::random::{customer_id, item_id, random_last_name, Constants};
use crate::conn::Session;

/// How a Payment or Order-Status finds its customer (2.5.1.2, 2.6.1.2).
#[derive(Clone, Debug, PartialEq)]
pub enum CustomerKey {
    /// By id.
    Id(u32),
    /// By last name: the middle one of those with the name, ordered by first name.
    Last(String),
}

/// One order line of a New-Order.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Item id (`ITEMS + 1` is the unused id that rolls the transaction back).
    pub i_id: u32,
    /// Supplying warehouse.
    pub supply_w: u32,
    /// Quantity, 1..=10.
    pub quantity: u32,
}

/// A transaction with its inputs.
#[derive(Clone, Debug, PartialEq)]
pub enum Input {
    /// New-Order (2.4.1).
    NewOrder {
        /// Warehouse.
        w: u32,
        /// District.
        d: u32,
        /// Customer.
        c: u32,
        /// Lines, sorted by item so concurrent orders lock stock in one order.
        lines: Vec<Line>,
    },
    /// Payment (2.5.1).
    Payment {
        /// Warehouse.
        w: u32,
        /// District.
        d: u32,
        /// Customer's warehouse (another one in 15% of cases).
        c_w: u32,
        /// Customer's district.
        c_d: u32,
        /// The customer.
        customer: CustomerKey,
        /// Amount in cents, 100..=500000.
        cents: i64,
    },
    /// Order-Status (2.6.1).
    OrderStatus {
        /// Warehouse.
        w: u32,
        /// District.
        d: u32,
        /// The customer.
        customer: CustomerKey,
    },
    /// Delivery (2.7.1).
    Delivery {
        /// Warehouse.
        w: u32,
        /// Carrier, 1..=10.
        carrier: u32,
    },
    /// Stock-Level (2.8.1).
    StockLevel {
        /// The terminal's warehouse.
        w: u32,
        /// The terminal's district.
        d: u32,
        /// Threshold, 10..=20.
        threshold: u32,
    },
}

impl Input {
    /// Which transaction this is.
    pub fn kind(&self) -> TxnKind {
        match self {
            Input::NewOrder { .. } => TxnKind::NewOrder,
            Input::Payment { .. } => TxnKind::Payment,
            Input::OrderStatus { .. } => TxnKind::OrderStatus,
            Input::Delivery { .. } => TxnKind::Delivery,
            Input::StockLevel { .. } => TxnKind::StockLevel,
        }
    }
}

/// A terminal's fixed inputs: its home warehouse and (for Stock-Level) district.
#[derive(Clone, Copy, Debug)]
pub struct Terminal {
    /// Home warehouse; `None` draws a warehouse per transaction (fewer terminals than
    /// warehouses, as go-tpc does for every run).
    pub home_w: Option<u32>,
    /// Home district.
    pub home_d: u32,
    /// Warehouses in the database.
    pub warehouses: u32,
}

impl Terminal {
    fn warehouse(&self, rng: &mut impl Rng) -> u32 {
        self.home_w.unwrap_or_else(|| rng.gen_range(1..=self.warehouses))
    }

    fn other_warehouse(&self, rng: &mut impl Rng, w: u32) -> u32 {
        if self.warehouses == 1 {
            return w;
        }
        loop {
            let o = rng.gen_range(1..=self.warehouses);
            if o != w {
                return o;
            }
        }
    }

    fn customer(rng: &mut impl Rng, k: &Constants) -> CustomerKey {
        if rng.gen_range(1..=100) <= 60 {
            CustomerKey::Last(random_last_name(rng, k))
        } else {
            CustomerKey::Id(customer_id(rng, k))
        }
    }

    /// Draws the inputs of a `kind` transaction.
    pub fn input(&self, kind: TxnKind, rng: &mut impl Rng, k: &Constants) -> Input {
        let w = self.warehouse(rng);
        match kind {
            TxnKind::NewOrder => {
                let d = rng.gen_range(1..=DISTRICTS);
                let c = customer_id(rng, k);
                let count = rng.gen_range(5..=15);
                let rollback = rng.gen_range(1..=100) == 1;
                let mut lines = Vec::with_capacity(count);
                for n in 0..count {
                    let i_id = if rollback && n == count - 1 {
                        ITEMS + 1
                    } else {
                        // Distinct items, as go-tpc and most drivers keep them (a repeated item
                        // would lock the same stock row twice).
                        loop {
                            let i = item_id(rng, k);
                            if !lines.iter().any(|l: &Line| l.i_id == i) {
                                break i;
                            }
                        }
                    };
                    let supply_w = if rng.gen_range(1..=100) == 1 { self.other_warehouse(rng, w) } else { w };
                    lines.push(Line { i_id, supply_w, quantity: rng.gen_range(1..=10) });
                }
                lines.sort_by_key(|l| (l.i_id, l.supply_w));
                Input::NewOrder { w, d, c, lines }
            }
            TxnKind::Payment => {
                let d = rng.gen_range(1..=DISTRICTS);
                let (c_w, c_d) = if rng.gen_range(1..=100) <= 85 {
                    (w, d)
                } else {
                    (self.other_warehouse(rng, w), rng.gen_range(1..=DISTRICTS))
                };
                let customer = Self::customer(rng, k);
                Input::Payment { w, d, c_w, c_d, customer, cents: rng.gen_range(100..=500_000) }
            }
            TxnKind::OrderStatus => {
                let d = rng.gen_range(1..=DISTRICTS);
                Input::OrderStatus { w, d, customer: Self::customer(rng, k) }
            }
            TxnKind::Delivery => Input::Delivery { w, carrier: rng.gen_range(1..=10) },
            TxnKind::StockLevel => Input::StockLevel { w, d: self.home_d, threshold: rng.gen_range(10..=20) },
        }
    }
}

/// How a transaction ended, when it did not fail.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Committed.
    Committed,
    /// Rolled back as the profile requires (New-Order with an unused item).
    RolledBack,
}

type Res<T> = Result<T, mysql_async::Error>;

fn int(v: u32) -> Value {
    Value::Int(v.into())
}

fn text(s: &str) -> Value {
    Value::Bytes(s.as_bytes().to_vec())
}

/// Cents as a decimal literal value: `12345` → `"123.45"`.
pub fn cents_value(cents: i64) -> Value {
    let sign = if cents < 0 { "-" } else { "" };
    text(&format!("{sign}{}.{:02}", cents.abs() / 100, cents.abs() % 100))
}

/// A column as f64 (DECIMAL arrives as text in both protocols).
fn num(row: &Row, i: usize) -> f64 {
    match row.as_ref(i) {
        Some(Value::Bytes(b)) => std::str::from_utf8(b).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0.0),
        Some(Value::Int(n)) => *n as f64,
        Some(Value::UInt(n)) => *n as f64,
        Some(Value::Float(f)) => f64::from(*f),
        Some(Value::Double(f)) => *f,
        _ => 0.0,
    }
}

fn string(row: &Row, i: usize) -> String {
    match row.as_ref(i) {
        Some(Value::Bytes(b)) => String::from_utf8_lossy(b).into_owned(),
        Some(Value::NULL) | None => String::new(),
        Some(other) => other.as_sql(true).trim_matches('\'').to_string(),
    }
}

/// A driver-side failure reported like a server error, so it is counted with the rest.
fn unexpected(what: &str) -> mysql_async::Error {
    mysql_async::Error::Other(what.to_string().into())
}

fn now() -> Value {
    text(&chrono::Local::now().format("%Y-%m-%d %H:%M:%S").to_string())
}

/// `SELECT ... FROM item WHERE i_id IN (?, ...)` for `n` items.
fn items_sql(n: usize) -> String {
    format!("SELECT i_id, i_price, i_name, i_data FROM item WHERE i_id IN ({})", placeholders("?", n))
}

/// The stock rows of `n` (warehouse, item) pairs, locked.
fn stock_sql(n: usize) -> String {
    format!(
        "SELECT s_w_id, s_i_id, s_quantity, s_data, s_dist_01, s_dist_02, s_dist_03, s_dist_04, s_dist_05, \
         s_dist_06, s_dist_07, s_dist_08, s_dist_09, s_dist_10 FROM stock WHERE (s_w_id, s_i_id) IN ({}) FOR UPDATE",
        placeholders("(?, ?)", n)
    )
}

/// A multi-row INSERT of `n` order lines.
fn order_lines_sql(n: usize) -> String {
    format!(
        "INSERT INTO order_line (ol_o_id, ol_d_id, ol_w_id, ol_number, ol_i_id, ol_supply_w_id, ol_quantity, \
         ol_amount, ol_dist_info) VALUES {}",
        placeholders("(?, ?, ?, ?, ?, ?, ?, ?, ?)", n)
    )
}

fn placeholders(one: &str, n: usize) -> String {
    vec![one; n].join(", ")
}

/// Runs `input` as one transaction (BEGIN … COMMIT). On error the transaction is left open;
/// the caller rolls it back.
pub async fn execute(s: &mut Session, input: &Input) -> Res<Outcome> {
    s.simple("BEGIN").await?;
    let outcome = match input {
        Input::NewOrder { w, d, c, lines } => new_order(s, *w, *d, *c, lines).await?,
        Input::Payment { w, d, c_w, c_d, customer, cents } => {
            payment(s, *w, *d, *c_w, *c_d, customer, *cents).await?;
            Outcome::Committed
        }
        Input::OrderStatus { w, d, customer } => {
            order_status(s, *w, *d, customer).await?;
            Outcome::Committed
        }
        Input::Delivery { w, carrier } => {
            delivery(s, *w, *carrier).await?;
            Outcome::Committed
        }
        Input::StockLevel { w, d, threshold } => {
            stock_level(s, *w, *d, *threshold).await?;
            Outcome::Committed
        }
    };
    match outcome {
        Outcome::Committed => s.simple("COMMIT").await?,
        Outcome::RolledBack => s.simple("ROLLBACK").await?,
    }
    Ok(outcome)
}

async fn new_order(s: &mut Session, w: u32, d: u32, c: u32, lines: &[Line]) -> Res<Outcome> {
    let all_local = lines.iter().all(|l| l.supply_w == w);
    let row: Row = s
        .first(
            "SELECT c_discount, c_last, c_credit, w_tax FROM customer, warehouse \
             WHERE w_id = ? AND c_w_id = w_id AND c_d_id = ? AND c_id = ?",
            vec![int(w), int(d), int(c)],
        )
        .await?
        .ok_or_else(|| unexpected("New-Order: customer not found"))?;
    let (discount, w_tax) = (num(&row, 0), num(&row, 3));
    let row: Row = s
        .first("SELECT d_next_o_id, d_tax FROM district WHERE d_w_id = ? AND d_id = ? FOR UPDATE", vec![int(w), int(d)])
        .await?
        .ok_or_else(|| unexpected("New-Order: district not found"))?;
    let o_id = num(&row, 0) as u32;
    let d_tax = num(&row, 1);
    s.exec("UPDATE district SET d_next_o_id = ? WHERE d_w_id = ? AND d_id = ?", vec![int(o_id + 1), int(w), int(d)])
        .await?;
    let entry = now();
    s.exec(
        "INSERT INTO orders (o_id, o_d_id, o_w_id, o_c_id, o_entry_d, o_ol_cnt, o_all_local) \
         VALUES (?, ?, ?, ?, ?, ?, ?)",
        vec![int(o_id), int(d), int(w), int(c), entry, int(lines.len() as u32), int(u32::from(all_local))],
    )
    .await?;
    s.exec("INSERT INTO new_order (no_o_id, no_d_id, no_w_id) VALUES (?, ?, ?)", vec![int(o_id), int(d), int(w)])
        .await?;
    // The items and stock rows of all lines in two statements (as go-tpc does); the lines are
    // sorted by item, so concurrent orders lock stock rows in the same order.
    let items: Vec<Row> = s.rows(&items_sql(lines.len()), lines.iter().map(|l| int(l.i_id)).collect()).await?;
    if items.len() < lines.len() {
        // The unused item id: the profile rolls the whole order back (2.4.2.3).
        return Ok(Outcome::RolledBack);
    }
    let price_of = |i_id: u32| -> i64 {
        items.iter().find(|r| num(r, 0) as u32 == i_id).map(|r| (num(r, 1) * 100.0).round() as i64).unwrap_or(0)
    };
    let stock: Vec<Row> =
        s.rows(&stock_sql(lines.len()), lines.iter().flat_map(|l| [int(l.supply_w), int(l.i_id)]).collect()).await?;
    let mut total_cents = 0i64;
    let mut ol_params = Vec::with_capacity(lines.len() * 9);
    for (n, line) in lines.iter().enumerate() {
        let row = stock
            .iter()
            .find(|r| num(r, 0) as u32 == line.supply_w && num(r, 1) as u32 == line.i_id)
            .ok_or_else(|| unexpected("New-Order: stock row not found"))?;
        let quantity = num(row, 2) as i64;
        let q = i64::from(line.quantity);
        let new_quantity = if quantity >= q + 10 { quantity - q } else { quantity - q + 91 };
        s.exec(
            "UPDATE stock SET s_quantity = ?, s_ytd = s_ytd + ?, s_order_cnt = s_order_cnt + 1, \
             s_remote_cnt = s_remote_cnt + ? WHERE s_w_id = ? AND s_i_id = ?",
            vec![
                Value::Int(new_quantity),
                int(line.quantity),
                int(u32::from(line.supply_w != w)),
                int(line.supply_w),
                int(line.i_id),
            ],
        )
        .await?;
        let amount = q * price_of(line.i_id);
        total_cents += amount;
        ol_params.extend([
            int(o_id),
            int(d),
            int(w),
            int(n as u32 + 1),
            int(line.i_id),
            int(line.supply_w),
            int(line.quantity),
            cents_value(amount),
            text(&string(row, 3 + d as usize)),
        ]);
    }
    s.exec(&order_lines_sql(lines.len()), ol_params).await?;
    // The terminal would display this total (2.4.3.3).
    let _total = total_cents as f64 * (1.0 - discount) * (1.0 + w_tax + d_tax);
    Ok(Outcome::Committed)
}

/// The customer id for `key` in district (w, d); by last name, the one at position
/// ceil(n/2) in first-name order (2.5.2.2).
async fn find_customer(s: &mut Session, w: u32, d: u32, key: &CustomerKey) -> Res<u32> {
    match key {
        CustomerKey::Id(c) => Ok(*c),
        CustomerKey::Last(last) => {
            let ids: Vec<u32> = s
                .rows(
                    "SELECT c_id FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_last = ? ORDER BY c_first",
                    vec![int(w), int(d), text(last)],
                )
                .await?;
            if ids.is_empty() {
                return Err(unexpected("no customer with the drawn last name"));
            }
            Ok(ids[(ids.len() - 1) / 2])
        }
    }
}

async fn payment(s: &mut Session, w: u32, d: u32, c_w: u32, c_d: u32, key: &CustomerKey, cents: i64) -> Res<()> {
    let amount = cents_value(cents);
    s.exec("UPDATE warehouse SET w_ytd = w_ytd + ? WHERE w_id = ?", vec![amount.clone(), int(w)]).await?;
    let wh: Row = s
        .first(
            "SELECT w_name, w_street_1, w_street_2, w_city, w_state, w_zip FROM warehouse WHERE w_id = ?",
            vec![int(w)],
        )
        .await?
        .ok_or_else(|| unexpected("Payment: warehouse not found"))?;
    s.exec("UPDATE district SET d_ytd = d_ytd + ? WHERE d_w_id = ? AND d_id = ?", vec![amount.clone(), int(w), int(d)])
        .await?;
    let di: Row = s
        .first(
            "SELECT d_name, d_street_1, d_street_2, d_city, d_state, d_zip FROM district \
             WHERE d_w_id = ? AND d_id = ?",
            vec![int(w), int(d)],
        )
        .await?
        .ok_or_else(|| unexpected("Payment: district not found"))?;
    let c = find_customer(s, c_w, c_d, key).await?;
    let cust: Row = s
        .first(
            "SELECT c_first, c_middle, c_last, c_street_1, c_street_2, c_city, c_state, c_zip, c_phone, \
             c_credit, c_credit_lim, c_discount, c_balance, c_since FROM customer \
             WHERE c_w_id = ? AND c_d_id = ? AND c_id = ? FOR UPDATE",
            vec![int(c_w), int(c_d), int(c)],
        )
        .await?
        .ok_or_else(|| unexpected("Payment: customer not found"))?;
    if string(&cust, 9) == "BC" {
        let data: String = s
            .first(
                "SELECT c_data FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
                vec![int(c_w), int(c_d), int(c)],
            )
            .await?
            .unwrap_or_default();
        let mut new_data = format!("{c} {c_d} {c_w} {d} {w} {}.{:02} | {data}", cents / 100, cents % 100);
        new_data.truncate(500);
        s.exec(
            "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, \
             c_payment_cnt = c_payment_cnt + 1, c_data = ? WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            vec![amount.clone(), amount.clone(), text(&new_data), int(c_w), int(c_d), int(c)],
        )
        .await?;
    } else {
        s.exec(
            "UPDATE customer SET c_balance = c_balance - ?, c_ytd_payment = c_ytd_payment + ?, \
             c_payment_cnt = c_payment_cnt + 1 WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            vec![amount.clone(), amount.clone(), int(c_w), int(c_d), int(c)],
        )
        .await?;
    }
    let h_data = format!("{}    {}", string(&wh, 0), string(&di, 0));
    s.exec(
        "INSERT INTO history (h_c_id, h_c_d_id, h_c_w_id, h_d_id, h_w_id, h_date, h_amount, h_data) \
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        vec![int(c), int(c_d), int(c_w), int(d), int(w), now(), amount, text(&h_data)],
    )
    .await?;
    Ok(())
}

async fn order_status(s: &mut Session, w: u32, d: u32, key: &CustomerKey) -> Res<()> {
    let c = find_customer(s, w, d, key).await?;
    let _cust: Option<Row> = s
        .first(
            "SELECT c_balance, c_first, c_middle, c_last FROM customer WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            vec![int(w), int(d), int(c)],
        )
        .await?;
    let order: Option<Row> = s
        .first(
            "SELECT o_id, o_carrier_id, o_entry_d FROM orders WHERE o_w_id = ? AND o_d_id = ? AND o_c_id = ? \
             ORDER BY o_id DESC LIMIT 1",
            vec![int(w), int(d), int(c)],
        )
        .await?;
    if let Some(order) = order {
        let o_id = num(&order, 0) as u32;
        let _lines: Vec<Row> = s
            .rows(
                "SELECT ol_i_id, ol_supply_w_id, ol_quantity, ol_amount, ol_delivery_d FROM order_line \
                 WHERE ol_w_id = ? AND ol_d_id = ? AND ol_o_id = ?",
                vec![int(w), int(d), int(o_id)],
            )
            .await?;
    }
    Ok(())
}

/// `(col_w, col_d, col_o) IN ((?, ?, ?), ...)` for `n` orders.
fn orders_in(cols: &str, n: usize) -> String {
    format!("({cols}) IN ({})", placeholders("(?, ?, ?)", n))
}

async fn delivery(s: &mut Session, w: u32, carrier: u32) -> Res<()> {
    let date = now();
    // The oldest undelivered order of each district; a district with none is skipped (2.7.4.2).
    let mut orders: Vec<(u32, u32)> = Vec::with_capacity(DISTRICTS as usize);
    for d in 1..=DISTRICTS {
        let oldest: Option<u32> = s
            .first(
                "SELECT no_o_id FROM new_order WHERE no_w_id = ? AND no_d_id = ? ORDER BY no_o_id LIMIT 1 FOR UPDATE",
                vec![int(w), int(d)],
            )
            .await?;
        if let Some(o_id) = oldest {
            orders.push((d, o_id));
        }
    }
    if orders.is_empty() {
        return Ok(());
    }
    // Then each step for all of them in one statement, as go-tpc does.
    let n = orders.len();
    let keys: Vec<Value> = orders.iter().flat_map(|(d, o)| [int(w), int(*d), int(*o)]).collect();
    let with = |first: Value| -> Vec<Value> { std::iter::once(first).chain(keys.iter().cloned()).collect() };
    s.exec(&format!("DELETE FROM new_order WHERE {}", orders_in("no_w_id, no_d_id, no_o_id", n)), keys.clone()).await?;
    s.exec(
        &format!("UPDATE orders SET o_carrier_id = ? WHERE {}", orders_in("o_w_id, o_d_id, o_id", n)),
        with(int(carrier)),
    )
    .await?;
    let customers: Vec<(u32, u32)> = s
        .rows(
            &format!("SELECT o_d_id, o_c_id FROM orders WHERE {}", orders_in("o_w_id, o_d_id, o_id", n)),
            keys.clone(),
        )
        .await?;
    s.exec(
        &format!("UPDATE order_line SET ol_delivery_d = ? WHERE {}", orders_in("ol_w_id, ol_d_id, ol_o_id", n)),
        with(date),
    )
    .await?;
    let totals: Vec<(u32, Option<String>)> = s
        .rows(
            &format!(
                "SELECT ol_d_id, SUM(ol_amount) FROM order_line WHERE {} GROUP BY ol_d_id",
                orders_in("ol_w_id, ol_d_id, ol_o_id", n)
            ),
            keys,
        )
        .await?;
    for (d, c) in customers {
        let total = totals.iter().find(|(td, _)| *td == d).and_then(|(_, t)| t.clone());
        s.exec(
            "UPDATE customer SET c_balance = c_balance + ?, c_delivery_cnt = c_delivery_cnt + 1 \
             WHERE c_w_id = ? AND c_d_id = ? AND c_id = ?",
            vec![text(total.as_deref().unwrap_or("0")), int(w), int(d), int(c)],
        )
        .await?;
    }
    Ok(())
}

async fn stock_level(s: &mut Session, w: u32, d: u32, threshold: u32) -> Res<()> {
    let next: u32 = s
        .first("SELECT d_next_o_id FROM district WHERE d_w_id = ? AND d_id = ?", vec![int(w), int(d)])
        .await?
        .ok_or_else(|| unexpected("Stock-Level: district not found"))?;
    let _low: Option<i64> = s
        .first(
            "SELECT COUNT(DISTINCT s_i_id) FROM order_line, stock WHERE ol_w_id = ? AND ol_d_id = ? \
             AND ol_o_id < ? AND ol_o_id >= ? AND s_w_id = ? AND s_i_id = ol_i_id AND s_quantity < ?",
            vec![int(w), int(d), int(next), int(next.saturating_sub(20)), int(w), int(threshold)],
        )
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn terminal(warehouses: u32) -> Terminal {
        Terminal { home_w: Some(1), home_d: 3, warehouses }
    }

    #[test]
    fn new_orders_have_distinct_sorted_items_and_one_percent_roll_back() {
        let mut rng = StdRng::seed_from_u64(21);
        let k = Constants::for_load(&mut rng);
        let t = terminal(4);
        let (mut rollbacks, mut remote_lines, mut lines_total) = (0, 0, 0);
        let n = 20_000;
        for _ in 0..n {
            let Input::NewOrder { w, lines, .. } = t.input(TxnKind::NewOrder, &mut rng, &k) else {
                panic!("wrong kind")
            };
            assert!((5..=15).contains(&lines.len()));
            assert!(lines.windows(2).all(|p| p[0].i_id < p[1].i_id), "items sorted and distinct");
            if lines.iter().any(|l| l.i_id == ITEMS + 1) {
                rollbacks += 1;
                assert_eq!(lines.last().map(|l| l.i_id), Some(ITEMS + 1));
            }
            remote_lines += lines.iter().filter(|l| l.supply_w != w).count();
            lines_total += lines.len();
        }
        assert!((100..320).contains(&rollbacks), "{rollbacks} rollbacks of {n}");
        let remote = remote_lines as f64 / lines_total as f64;
        assert!((0.006..0.014).contains(&remote), "remote line share {remote}");
    }

    #[test]
    fn payments_pick_remote_customers_and_last_names_in_the_required_shares() {
        let mut rng = StdRng::seed_from_u64(22);
        let k = Constants::for_load(&mut rng);
        let t = terminal(4);
        let (mut remote, mut by_name) = (0, 0);
        let n = 20_000;
        for _ in 0..n {
            let Input::Payment { w, c_w, customer, cents, .. } = t.input(TxnKind::Payment, &mut rng, &k) else {
                panic!("wrong kind")
            };
            assert!((100..=500_000).contains(&cents));
            remote += usize::from(c_w != w);
            by_name += usize::from(matches!(customer, CustomerKey::Last(_)));
        }
        let (remote, by_name) = (remote as f64 / n as f64, by_name as f64 / n as f64);
        assert!((0.13..0.17).contains(&remote), "remote share {remote}");
        assert!((0.57..0.63).contains(&by_name), "by-name share {by_name}");
    }

    #[test]
    fn a_single_warehouse_never_draws_a_remote_one_and_stock_level_uses_the_home_district() {
        let mut rng = StdRng::seed_from_u64(23);
        let k = Constants::for_load(&mut rng);
        let t = terminal(1);
        for _ in 0..2000 {
            match t.input(TxnKind::Payment, &mut rng, &k) {
                Input::Payment { w, c_w, .. } => assert_eq!((w, c_w), (1, 1)),
                other => panic!("{other:?}"),
            }
            match t.input(TxnKind::StockLevel, &mut rng, &k) {
                Input::StockLevel { w, d, threshold } => {
                    assert_eq!((w, d), (1, 3));
                    assert!((10..=20).contains(&threshold));
                }
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    fn cents_render_as_two_place_decimals() {
        assert_eq!(cents_value(12345), Value::Bytes(b"123.45".to_vec()));
        assert_eq!(cents_value(5), Value::Bytes(b"0.05".to_vec()));
        assert_eq!(cents_value(-1000), Value::Bytes(b"-10.00".to_vec()));
    }
}
