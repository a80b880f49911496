//! The TPC-C transaction mix (5.2.3–5.2.4): New-Order 45%, Payment 43%, Order-Status,
//! Delivery and Stock-Level 4% each, drawn from a shuffled deck of 100 cards so every 100
//! consecutive transactions of a terminal meet the minimum percentages exactly.

use rand::seq::SliceRandom;
use rand::Rng;

/// The five TPC-C transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnKind {
    /// New-Order (the one tpmC counts).
    NewOrder,
    /// Payment.
    Payment,
    /// Order-Status (read-only).
    OrderStatus,
    /// Delivery (deferred in the spec; run inline as go-tpc does).
    Delivery,
    /// Stock-Level (read-only).
    StockLevel,
}

impl TxnKind {
    /// Every kind, in report order.
    pub const ALL: [TxnKind; 5] =
        [TxnKind::NewOrder, TxnKind::Payment, TxnKind::OrderStatus, TxnKind::Delivery, TxnKind::StockLevel];

    /// Cards per deck of 100.
    pub fn weight(self) -> usize {
        match self {
            TxnKind::NewOrder => 45,
            TxnKind::Payment => 43,
            TxnKind::OrderStatus | TxnKind::Delivery | TxnKind::StockLevel => 4,
        }
    }

    /// The name reports use (go-tpc's spelling).
    pub fn name(self) -> &'static str {
        match self {
            TxnKind::NewOrder => "NEW_ORDER",
            TxnKind::Payment => "PAYMENT",
            TxnKind::OrderStatus => "ORDER_STATUS",
            TxnKind::Delivery => "DELIVERY",
            TxnKind::StockLevel => "STOCK_LEVEL",
        }
    }
}

/// A terminal's deck: draws without replacement, reshuffling when empty.
#[derive(Debug, Default)]
pub struct Deck {
    cards: Vec<TxnKind>,
}

impl Deck {
    /// The next transaction to run.
    pub fn draw(&mut self, rng: &mut impl Rng) -> TxnKind {
        if self.cards.is_empty() {
            self.cards = TxnKind::ALL.iter().flat_map(|k| std::iter::repeat_n(*k, k.weight())).collect();
            self.cards.shuffle(rng);
        }
        self.cards.pop().expect("a refilled deck has 100 cards")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;
    use std::collections::BTreeMap;

    #[test]
    fn every_hundred_draws_meet_the_mix_exactly() {
        let mut rng = StdRng::seed_from_u64(9);
        let mut deck = Deck::default();
        for _ in 0..50 {
            let mut counts: BTreeMap<TxnKind, usize> = BTreeMap::new();
            for _ in 0..100 {
                *counts.entry(deck.draw(&mut rng)).or_default() += 1;
            }
            for k in TxnKind::ALL {
                assert_eq!(counts.get(&k).copied().unwrap_or(0), k.weight(), "{k:?}");
            }
        }
        assert_eq!(TxnKind::ALL.iter().map(|k| k.weight()).sum::<usize>(), 100);
    }

    #[test]
    fn decks_are_shuffled() {
        let mut rng = StdRng::seed_from_u64(10);
        let mut deck = Deck::default();
        let first: Vec<TxnKind> = (0..100).map(|_| deck.draw(&mut rng)).collect();
        let second: Vec<TxnKind> = (0..100).map(|_| deck.draw(&mut rng)).collect();
        assert_ne!(first, second);
        assert!(first[..45].iter().any(|k| *k != TxnKind::NewOrder), "deck not shuffled");
    }
}
