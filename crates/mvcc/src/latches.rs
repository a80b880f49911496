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
        Guard { _held: idx.into_iter().map(|i| self.slots[i].lock()).collect() }
    }
}
