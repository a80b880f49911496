//! Key latches: the short critical sections that make each MVCC write command atomic
//! (read the current lock and versions, decide, write the batch). Keys hash to a fixed set
//! of slots; a command takes its slots in ascending order, so two commands never deadlock.
//!
//! A key's slot is chosen in two steps, so that a bulk command (thousands of keys, held
//! across its table-file ingestion) does not take most of the table: the key's first
//! `PREFIX` bytes (table id and row/index tag, `codec::keys`) pick one of `PARTS`
//! partitions, so loads of different tables, or of a table and another's index, do not
//! meet; inside it the key without its last byte picks the slot, so keys differing only
//! there (256 consecutive integer handles) share one. A 2,630-row sysbench INSERT took
//! ~2,600 of 4,096 slots shared by every table, and four loaders waited on each other for
//! a sixth of their time (BENCHMARKS.md); it now takes ~11 slots of its table's partition.
//!
//! A commit takes only its primary key's latch (`MvccStore::commit_unsynced`): the keys it
//! writes are its own transaction's locked keys, which nobody else changes while the lock is
//! there. Index entries spread over their partition, so two loaders of one table (go-tpc's
//! `customer` index) met in shared slots and waited out each other's ingestion.

use std::hash::BuildHasher;

use foldhash::fast::FixedState;
use parking_lot::{Mutex, MutexGuard};

/// Partitions, chosen by a key's first `PREFIX` bytes.
const PARTS: usize = 256;
/// Slots per partition.
const PER_PART: usize = 4096;
/// `t`, the 8-byte table id and `_r` / `_i`.
const PREFIX: usize = 11;

/// The latch table.
pub struct Latches {
    slots: Vec<Mutex<()>>,
}

/// Held latches; released on drop.
pub struct Guard<'a> {
    /// Slot and its lock, ascending by slot.
    held: Vec<(usize, MutexGuard<'a, ()>)>,
}

impl Guard<'_> {
    /// Releases every latch but the one covering `key` (kept if held).
    pub fn keep_only(&mut self, key: &[u8]) {
        let keep = slot(key);
        self.held.retain(|(i, _)| *i == keep);
    }
}

impl Default for Latches {
    fn default() -> Latches {
        Latches { slots: (0..PARTS * PER_PART).map(|_| Mutex::new(())).collect() }
    }
}

impl Latches {
    /// Acquires the latches covering `keys` (blocking).
    pub fn acquire<'a, K: AsRef<[u8]>>(&'a self, keys: impl IntoIterator<Item = K>) -> Guard<'a> {
        Guard { held: slots(keys).into_iter().map(|i| (i, self.slots[i].lock())).collect() }
    }

    /// The latches covering `keys` if none is held now, without waiting (None: one is
    /// held, and none is taken).
    pub fn try_acquire<'a, K: AsRef<[u8]>>(&'a self, keys: impl IntoIterator<Item = K>) -> Option<Guard<'a>> {
        let held = slots(keys).into_iter().map(|i| Some((i, self.slots[i].try_lock()?))).collect::<Option<Vec<_>>>()?;
        Some(Guard { held })
    }
}

/// The slot of `key` (module docs).
fn slot(key: &[u8]) -> usize {
    let hasher = FixedState::with_seed(0x5EED_1A7C);
    let (head, rest) = key.split_at(key.len().min(PREFIX));
    let group = &rest[..rest.len().saturating_sub(1)];
    let part = hasher.hash_one(head) as usize % PARTS;
    part * PER_PART + hasher.hash_one(group) as usize % PER_PART
}

/// The slots of `keys`, ascending, each once.
fn slots<K: AsRef<[u8]>>(keys: impl IntoIterator<Item = K>) -> Vec<usize> {
    let mut idx: Vec<usize> = keys.into_iter().map(|k| slot(k.as_ref())).collect();
    idx.sort_unstable();
    idx.dedup();
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_acquire_takes_all_or_nothing_without_waiting() {
        let l = Latches::default();
        let held = l.acquire([b"a".as_slice()]);
        assert!(l.try_acquire([b"b".as_slice(), b"a".as_slice()]).is_none(), "a is held");
        // Nothing was kept by the failed attempt: b is free.
        let b = l.try_acquire([b"b".as_slice()]).expect("b free");
        drop(b);
        drop(held);
        let both = l.try_acquire([b"a".as_slice(), b"b".as_slice()]).expect("both free");
        assert!(l.try_acquire([b"a".as_slice()]).is_none());
        drop(both);
        assert!(l.try_acquire([b"a".as_slice()]).is_some());
    }

    #[test]
    fn keep_only_releases_the_other_latches() {
        let l = Latches::default();
        let (a, b) = (b"t\x80\0\0\0\0\0\0\x01_r\x03a".as_slice(), b"t\x80\0\0\0\0\0\0\x02_r\x03b".as_slice());
        assert_ne!(slot(a), slot(b));
        let mut g = l.acquire([a, b]);
        g.keep_only(a);
        assert!(l.try_acquire([b]).is_some(), "b was released");
        assert!(l.try_acquire([a]).is_none(), "a is still held");
        drop(g);
        assert!(l.try_acquire([a]).is_some());
    }

    #[test]
    fn a_bulk_command_takes_few_slots_of_its_own_table() {
        let rows = |table: u8| -> Vec<Vec<u8>> {
            (0..2630u64)
                .map(|h| {
                    let mut k = vec![b't', 0x80, 0, 0, 0, 0, 0, 0, table, b'_', b'r', 0x03];
                    k.extend_from_slice(&(h | 1 << 63).to_be_bytes());
                    k
                })
                .collect()
        };
        let (a, b) = (slots(rows(1)), slots(rows(2)));
        assert!(a.len() <= 12, "{} slots for 2,630 consecutive rows", a.len());
        assert!(a.iter().all(|s| !b.contains(s)), "two tables' loads share a slot");
        // Distinct keys may share a slot; equal keys always do.
        assert_eq!(slot(b"t\x80\0\0\0\0\0\0\x01_r\x03xy"), slot(b"t\x80\0\0\0\0\0\0\x01_r\x03xy"));
    }
}
