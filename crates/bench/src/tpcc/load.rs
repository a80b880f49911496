//! Initial database population (clause 4.3.3.1): the rows of each table for one warehouse,
//! as typed literals that [`values_sql`] renders into multi-row INSERT statements.
//!
//! Per warehouse: 10 districts; per district 3,000 customers with one history row each and
//! 3,000 orders (customer ids a random permutation), 5–15 lines per order. Orders 1–2,100 are
//! delivered (carrier set, lines dated, amount 0); orders 2,101–3,000 are undelivered and have a
//! NEW-ORDER row. The 100,000 items are shared; each warehouse stocks all of them.

use rand::Rng;

use super::random::{a_string, data_with_original, load_last_name, n_string, permutation, zip, Constants};

/// Items in the catalog, stock rows per warehouse.
pub const ITEMS: u32 = 100_000;
/// Districts per warehouse.
pub const DISTRICTS: u32 = 10;
/// Customers per district.
pub const CUSTOMERS: u32 = 3_000;
/// Initial orders per district.
pub const ORDERS: u32 = 3_000;
/// The first undelivered order of a district (orders from here on have a NEW-ORDER row).
pub const FIRST_NEW_ORDER: u32 = 2_101;

/// The NURand constants the loader uses. They are fixed (from a fixed seed) so that a later
/// `run`, in another process, knows the C_LAST it must keep its distance from (2.1.6.1).
pub fn constants() -> Constants {
    Constants::for_load(&mut <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(0x7470_6363))
}

/// One column value of a generated row.
#[derive(Clone, Debug, PartialEq)]
pub enum Lit {
    /// An integer.
    Int(i64),
    /// An exact decimal, as its text (`"300000.00"`).
    Num(String),
    /// A string.
    Str(String),
    /// A DATETIME, as its text.
    DateTime(String),
    /// NULL.
    Null,
}

/// A generated row.
pub type Row = Vec<Lit>;

/// `cents` as a decimal with two places.
fn money(cents: i64) -> Lit {
    let sign = if cents < 0 { "-" } else { "" };
    let c = cents.abs();
    Lit::Num(format!("{sign}{}.{:02}", c / 100, c % 100))
}

/// A random rate in [0, max_bp] basis points with four places (`0.1234`).
fn rate(rng: &mut impl Rng, max_bp: i64) -> Lit {
    let bp = rng.gen_range(0..=max_bp);
    Lit::Num(format!("0.{bp:04}"))
}

fn s(v: String) -> Lit {
    Lit::Str(v)
}

/// A string literal: single quotes, with quotes doubled and backslashes escaped.
pub fn quote(t: &str) -> String {
    format!("'{}'", t.replace('\\', "\\\\").replace('\'', "''"))
}

/// Renders rows as the VALUES list of an INSERT: `(1,'a',NULL),(2,'b',3.50)`.
pub fn values_sql(rows: &[Row]) -> String {
    let mut out = String::with_capacity(rows.len() * 64);
    for (i, row) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('(');
        for (j, v) in row.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            match v {
                Lit::Int(n) => out.push_str(&n.to_string()),
                Lit::Num(t) => out.push_str(t),
                Lit::Str(t) | Lit::DateTime(t) => out.push_str(&quote(t)),
                Lit::Null => out.push_str("NULL"),
            }
        }
        out.push(')');
    }
    out
}

/// An ITEM row.
pub fn item(rng: &mut impl Rng, i_id: u32) -> Row {
    vec![
        Lit::Int(i_id.into()),
        Lit::Int(rng.gen_range(1..=10_000)),
        s(a_string(rng, 14, 24)),
        money(rng.gen_range(100..=10_000)),
        s(data_with_original(rng)),
    ]
}

fn address(rng: &mut impl Rng) -> Vec<Lit> {
    vec![
        s(a_string(rng, 10, 20)),
        s(a_string(rng, 10, 20)),
        s(a_string(rng, 10, 20)),
        s(a_string(rng, 2, 2).to_uppercase()),
        s(zip(rng)),
    ]
}

/// A WAREHOUSE row.
pub fn warehouse(rng: &mut impl Rng, w_id: u32) -> Row {
    let mut r = vec![Lit::Int(w_id.into()), s(a_string(rng, 6, 10))];
    r.extend(address(rng));
    r.push(rate(rng, 2000));
    r.push(money(30_000_000));
    r
}

/// A STOCK row.
pub fn stock(rng: &mut impl Rng, w_id: u32, i_id: u32) -> Row {
    let mut r = vec![Lit::Int(i_id.into()), Lit::Int(w_id.into()), Lit::Int(rng.gen_range(10..=100))];
    r.extend((0..10).map(|_| s(a_string(rng, 24, 24))));
    r.extend([Lit::Int(0), Lit::Int(0), Lit::Int(0), s(data_with_original(rng))]);
    r
}

/// A DISTRICT row.
pub fn district(rng: &mut impl Rng, w_id: u32, d_id: u32) -> Row {
    let mut r = vec![Lit::Int(d_id.into()), Lit::Int(w_id.into()), s(a_string(rng, 6, 10))];
    r.extend(address(rng));
    r.push(rate(rng, 2000));
    r.push(money(3_000_000));
    r.push(Lit::Int((ORDERS + 1).into()));
    r
}

/// A CUSTOMER row; `now` is the load time.
pub fn customer(rng: &mut impl Rng, k: &Constants, w_id: u32, d_id: u32, c_id: u32, now: &str) -> Row {
    let mut r = vec![
        Lit::Int(c_id.into()),
        Lit::Int(d_id.into()),
        Lit::Int(w_id.into()),
        s(a_string(rng, 8, 16)),
        s("OE".into()),
        s(load_last_name(rng, k, c_id)),
    ];
    r.extend(address(rng));
    r.push(s(n_string(rng, 16, 16)));
    r.push(Lit::DateTime(now.into()));
    r.push(s(if rng.gen_range(0..10) == 0 { "BC" } else { "GC" }.into()));
    r.extend([money(5_000_000), rate(rng, 5000), money(-1000), money(1000), Lit::Int(1), Lit::Int(0)]);
    r.push(s(a_string(rng, 300, 500)));
    r
}

/// The HISTORY row of a loaded customer.
pub fn history(rng: &mut impl Rng, w_id: u32, d_id: u32, c_id: u32, now: &str) -> Row {
    vec![
        Lit::Int(c_id.into()),
        Lit::Int(d_id.into()),
        Lit::Int(w_id.into()),
        Lit::Int(d_id.into()),
        Lit::Int(w_id.into()),
        Lit::DateTime(now.into()),
        money(1000),
        s(a_string(rng, 12, 24)),
    ]
}

/// A district's initial orders, their lines and NEW-ORDER rows.
#[derive(Debug, Default)]
pub struct DistrictOrders {
    /// ORDERS rows.
    pub orders: Vec<Row>,
    /// ORDER_LINE rows.
    pub lines: Vec<Row>,
    /// NEW_ORDER rows.
    pub new_orders: Vec<Row>,
}

/// The initial orders of district `d_id` of warehouse `w_id`.
pub fn district_orders(rng: &mut impl Rng, w_id: u32, d_id: u32, now: &str) -> DistrictOrders {
    let mut out = DistrictOrders::default();
    let customers = permutation(rng, CUSTOMERS);
    for o_id in 1..=ORDERS {
        let delivered = o_id < FIRST_NEW_ORDER;
        let ol_cnt: u32 = rng.gen_range(5..=15);
        out.orders.push(vec![
            Lit::Int(o_id.into()),
            Lit::Int(d_id.into()),
            Lit::Int(w_id.into()),
            Lit::Int(customers[(o_id - 1) as usize].into()),
            Lit::DateTime(now.into()),
            if delivered { Lit::Int(rng.gen_range(1..=10)) } else { Lit::Null },
            Lit::Int(ol_cnt.into()),
            Lit::Int(1),
        ]);
        for number in 1..=ol_cnt {
            out.lines.push(vec![
                Lit::Int(o_id.into()),
                Lit::Int(d_id.into()),
                Lit::Int(w_id.into()),
                Lit::Int(number.into()),
                Lit::Int(rng.gen_range(1..=i64::from(ITEMS))),
                Lit::Int(w_id.into()),
                if delivered { Lit::DateTime(now.into()) } else { Lit::Null },
                Lit::Int(5),
                if delivered { money(0) } else { money(rng.gen_range(1..=999_999)) },
                s(a_string(rng, 24, 24)),
            ]);
        }
        if !delivered {
            out.new_orders.push(vec![Lit::Int(o_id.into()), Lit::Int(d_id.into()), Lit::Int(w_id.into())]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const NOW: &str = "2026-11-21 12:00:00";

    fn int(l: &Lit) -> i64 {
        match l {
            Lit::Int(n) => *n,
            other => panic!("not an int: {other:?}"),
        }
    }

    #[test]
    fn district_orders_are_consistent_as_the_check_conditions_require() {
        let mut rng = StdRng::seed_from_u64(5);
        let d = district_orders(&mut rng, 1, 3, NOW);
        assert_eq!(d.orders.len(), ORDERS as usize);
        // 3.3.2.4: the order line count equals the sum of O_OL_CNT.
        let ol_cnt: i64 = d.orders.iter().map(|o| int(&o[6])).sum();
        assert_eq!(ol_cnt, d.lines.len() as i64);
        // Undelivered orders (no carrier) are exactly those with a NEW-ORDER row (3.3.2.6).
        let undelivered: Vec<i64> = d.orders.iter().filter(|o| o[5] == Lit::Null).map(|o| int(&o[0])).collect();
        let new_orders: Vec<i64> = d.new_orders.iter().map(|n| int(&n[0])).collect();
        assert_eq!(undelivered, new_orders);
        assert_eq!(new_orders.len(), (ORDERS - FIRST_NEW_ORDER + 1) as usize);
        // Lines of delivered orders are dated and worth 0; undelivered ones are not dated (3.3.2.7).
        for l in &d.lines {
            let delivered = int(&l[0]) < i64::from(FIRST_NEW_ORDER);
            assert_eq!(l[6] != Lit::Null, delivered);
            assert_eq!(l[8] == Lit::Num("0.00".into()), delivered);
        }
        // Every customer has exactly one order.
        let mut customers: Vec<i64> = d.orders.iter().map(|o| int(&o[3])).collect();
        customers.sort_unstable();
        assert_eq!(customers, (1..=i64::from(CUSTOMERS)).collect::<Vec<_>>());
    }

    #[test]
    fn rows_have_their_tables_column_counts() {
        let mut rng = StdRng::seed_from_u64(6);
        let k = Constants::for_load(&mut rng);
        assert_eq!(item(&mut rng, 1).len(), 5);
        assert_eq!(warehouse(&mut rng, 1).len(), 9);
        assert_eq!(district(&mut rng, 1, 1).len(), 11);
        assert_eq!(customer(&mut rng, &k, 1, 1, 1, NOW).len(), 21);
        assert_eq!(history(&mut rng, 1, 1, 1, NOW).len(), 8);
        assert_eq!(stock(&mut rng, 1, 1).len(), 17);
        let d = district_orders(&mut rng, 1, 1, NOW);
        assert_eq!(d.orders[0].len(), 8);
        assert_eq!(d.lines[0].len(), 10);
        assert_eq!(d.new_orders[0].len(), 3);
    }

    #[test]
    fn about_ten_percent_of_customers_have_bad_credit() {
        let mut rng = StdRng::seed_from_u64(8);
        let k = Constants::for_load(&mut rng);
        let bad = (1..=3000).filter(|c| customer(&mut rng, &k, 1, 1, *c, NOW)[13] == Lit::Str("BC".into())).count();
        assert!((200..400).contains(&bad), "{bad} of 3000 with BC");
    }

    #[test]
    fn values_render_as_sql_literals() {
        let rows = vec![
            vec![Lit::Int(1), Lit::Str("it's".into()), Lit::Null],
            vec![money(-1000), Lit::DateTime(NOW.into()), Lit::Num("0.0500".into())],
        ];
        assert_eq!(values_sql(&rows), "(1,'it''s',NULL),(-10.00,'2026-11-21 12:00:00',0.0500)");
        assert_eq!(money(5), Lit::Num("0.05".into()));
    }
}
