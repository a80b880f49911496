//! An in-memory `Engine` on ordered maps, for unit tests of the layers above. A cursor copies
//! its range when it opens, which gives it snapshot semantics.

use std::collections::BTreeMap;

use parking_lot::RwLock;
use strata_common::Result;

use crate::engine::{BatchOp, Cf, Cursor, Engine, WriteBatch};

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// The in-memory engine.
#[derive(Default)]
pub struct MemoryEngine {
    cfs: RwLock<[Map; Cf::ALL.len()]>,
}

fn idx(cf: Cf) -> usize {
    cf as usize
}

impl MemoryEngine {
    /// An empty engine.
    pub fn new() -> MemoryEngine {
        MemoryEngine::default()
    }
}

struct MemCursor {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
    pos: usize,
}

impl Cursor for MemCursor {
    fn seek(&mut self, key: &[u8]) {
        self.pos = self.entries.partition_point(|(k, _)| k.as_slice() < key);
    }
    fn next(&mut self) {
        self.pos += 1;
    }
    fn valid(&self) -> Result<bool> {
        Ok(self.pos < self.entries.len())
    }
    fn key(&self) -> &[u8] {
        &self.entries[self.pos].0
    }
    fn value(&self) -> &[u8] {
        &self.entries[self.pos].1
    }
}

impl Engine for MemoryEngine {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.cfs.read()[idx(cf)].get(key).cloned())
    }

    fn cursor(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        let map = &self.cfs.read()[idx(cf)];
        let entries = if lower < upper {
            map.range(lower.to_vec()..upper.to_vec()).map(|(k, v)| (k.clone(), v.clone())).collect()
        } else {
            Vec::new()
        };
        Ok(Box::new(MemCursor { entries, pos: usize::MAX }))
    }

    fn sync_wal(&self) -> Result<()> {
        Ok(()) // nothing is durable here
    }

    fn write(&self, batch: WriteBatch, _sync: bool) -> Result<()> {
        let mut cfs = self.cfs.write();
        for op in batch.ops {
            match op {
                BatchOp::Put(cf, k, v) => {
                    cfs[idx(cf)].insert(k, v);
                }
                BatchOp::Delete(cf, k) => {
                    cfs[idx(cf)].remove(&k);
                }
            }
        }
        Ok(())
    }

    fn clear_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<()> {
        if start < end {
            let mut cfs = self.cfs.write();
            let map = &mut cfs[idx(cf)];
            let mut tail = map.split_off(start);
            let mut rest = tail.split_off(end);
            map.append(&mut rest);
        }
        Ok(())
    }

    fn compact_range(&self, _cf: Cf, _start: &[u8], _end: &[u8]) -> Result<()> {
        Ok(())
    }

    fn size_bytes(&self) -> Result<u64> {
        let cfs = self.cfs.read();
        Ok(cfs.iter().flat_map(|m| m.iter()).map(|(k, v)| (k.len() + v.len()) as u64).sum())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The keys from the cursor's position to its end.
    fn rest(c: &mut dyn Cursor) -> Vec<Vec<u8>> {
        let mut seen = Vec::new();
        while c.valid().expect("valid") {
            seen.push(c.key().to_vec());
            c.next();
        }
        seen
    }

    #[test]
    fn cursor_respects_bounds_and_snapshot() {
        let e = MemoryEngine::new();
        let mut b = WriteBatch::default();
        for k in [b"a", b"b", b"c", b"d"] {
            b.put(Cf::Write, k.to_vec(), k.to_vec());
        }
        e.write(b, false).expect("write");
        let mut c = e.cursor(Cf::Write, b"b", b"d").expect("cursor");
        let mut del = WriteBatch::default();
        del.delete(Cf::Write, b"c".to_vec());
        e.write(del, false).expect("delete");
        c.seek(b"a");
        let seen = rest(&mut *c);
        assert_eq!(seen, vec![b"b".to_vec(), b"c".to_vec()]);
        assert_eq!(e.get(Cf::Write, b"c").expect("get"), None);
    }

    #[test]
    fn clear_range_removes_exactly_the_range() {
        let e = MemoryEngine::new();
        let mut b = WriteBatch::default();
        for k in [b"a", b"b", b"c", b"d"] {
            b.put(Cf::Data, k.to_vec(), k.to_vec());
        }
        b.put(Cf::Write, b"b".to_vec(), b"w".to_vec());
        e.write(b, false).expect("write");
        e.clear_range(Cf::Data, b"b", b"d").expect("clear range");
        let mut c = e.cursor(Cf::Data, b"", b"z").expect("cursor");
        c.seek(b"");
        let seen = rest(&mut *c);
        assert_eq!(seen, vec![b"a".to_vec(), b"d".to_vec()]);
        assert_eq!(e.get(Cf::Write, b"b").expect("get"), Some(b"w".to_vec()), "other column families untouched");
    }

    #[test]
    fn delete_each_removes_a_range_larger_than_a_batch() {
        let e = MemoryEngine::new();
        let mut b = WriteBatch::default();
        let n = crate::engine::CLEAR_BATCH * 2 + 10;
        for i in 0..n {
            b.put(Cf::Data, format!("k{i:06}").into_bytes(), vec![1]);
        }
        b.put(Cf::Data, b"a".to_vec(), vec![2]);
        b.put(Cf::Data, b"l".to_vec(), vec![3]);
        e.write(b, false).expect("write");
        crate::engine::delete_each(&e, Cf::Data, b"k", b"l").expect("delete each");
        let mut c = e.cursor(Cf::Data, b"", b"z").expect("cursor");
        c.seek(b"");
        assert_eq!(rest(&mut *c), vec![b"a".to_vec(), b"l".to_vec()]);
    }
}
