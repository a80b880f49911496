//! Key latches: the short critical sections that make each MVCC write command atomic
//! (read the current lock and versions, decide, write the batch). Keys hash to a fixed set
//! of slots; a command takes its slots in ascending order, so two commands never deadlock.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};

use parking_lot::{Mutex, MutexGuard};

const SLOTS: usize = 4096;

/// The latch table.
pub struct Latches {
    slots: Vec<Mutex<()>>,
}

/// Held latches; released on drop.
pub struct Guard<'a> {
    _held: Vec<MutexGuard<'a, ()>>,
}

impl Default for Latches {
    fn default() -> Latches {
        Latches { slots: (0..SLOTS).map(|_| Mutex::new(())).collect() }
    }
}

impl Latches {
    /// Acquires the latches covering `keys` (blocking).
    pub fn acquire<'a, K: AsRef<[u8]>>(&'a self, keys: impl IntoIterator<Item = K>) -> Guard<'a> {
        Guard { _held: slots(keys).into_iter().map(|i| self.slots[i].lock()).collect() }
    }

    /// The latches covering `keys` if none is held now, without waiting (None: one is
    /// held, and none is taken).
    pub fn try_acquire<'a, K: AsRef<[u8]>>(&'a self, keys: impl IntoIterator<Item = K>) -> Option<Guard<'a>> {
        let held = slots(keys).into_iter().map(|i| self.slots[i].try_lock()).collect::<Option<Vec<_>>>()?;
        Some(Guard { _held: held })
    }
}

/// The slots of `keys`, ascending, each once.
fn slots<K: AsRef<[u8]>>(keys: impl IntoIterator<Item = K>) -> Vec<usize> {
    let mut idx: Vec<usize> = keys
        .into_iter()
        .map(|k| {
            let mut h = DefaultHasher::new();
            k.as_ref().hash(&mut h);
            (h.finish() as usize) % SLOTS
        })
        .collect();
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
}
