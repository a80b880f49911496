//! Random positions in a key range without reading it: what a sampled `ANALYZE` seeks to.
//!
//! An engine that can tell roughly how many bytes a key range holds (RocksDB's approximate
//! sizes, from each table file's index) and can seek both ways answers "the key at byte
//! offset `t` of `[lower, upper)`" by bisection: split the range at a key near the middle of
//! its key space, ask how many bytes the left part holds, go left or right. Splitting at
//! real keys (the first key at or after the byte midpoint, or the last one before it when
//! there is none after) skips the gaps a key encoding leaves (a composite primary key's
//! high bytes are mostly zero), so a split halves the keys more often than not. Every
//! target of one call descends the same tree, so the splits near the root are paid once.

use strata_common::Result;

/// What the sampler needs of an engine's column family.
pub trait KeySpace {
    /// Approximate bytes `[start, end)` holds (granularity of a block is fine).
    fn size(&mut self, start: &[u8], end: &[u8]) -> Result<u64>;
    /// The first key `>= key` and `< upper`, if any.
    fn first_at_or_after(&mut self, key: &[u8], upper: &[u8]) -> Result<Option<Vec<u8>>>;
    /// The last key `< key` and `>= lower`, if any.
    fn last_before(&mut self, key: &[u8], lower: &[u8]) -> Result<Option<Vec<u8>>>;
}

/// A leaf of the bisection: the keys `[start, end)` (`start` a real key), about `bytes`
/// bytes, and how many of the drawn offsets fell in it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Piece {
    pub start: Vec<u8>,
    pub end: Vec<u8>,
    pub bytes: u64,
    pub hits: u32,
}

/// A piece at most this many bytes is not split further: its first key stands for every
/// target in it (a few table-file blocks; below that the sizes say nothing).
pub const MIN_PIECE: u64 = 16 << 10;

/// Splits deeper than this stop (a guard; real keys need far fewer: each split at least
/// halves the numeric width of the piece's key window).
const MAX_DEPTH: usize = 512;

/// Draws `n` byte offsets uniformly at random (`seed`) over the bytes of `[lower, upper)`
/// and returns the pieces they fell in, in key order (each with how many fell in it; the
/// pieces of one call do not overlap, and their sizes are consistent with the range's:
/// a piece's `bytes` over the total is the chance an offset falls in it), and the range's
/// approximate size. No pieces if the range is empty; None when the sizes say it holds
/// nothing (all of it may still be in memory, where sizes do not look).
pub fn sample_pieces(
    space: &mut dyn KeySpace,
    lower: &[u8],
    upper: &[u8],
    n: usize,
    seed: u64,
) -> Result<Option<(Vec<Piece>, u64)>> {
    let Some(first) = space.first_at_or_after(lower, upper)? else { return Ok(Some((Vec::new(), 0))) };
    let total = space.size(&first, upper)?;
    if total == 0 {
        return Ok(None);
    }
    let mut rng = seed | 1;
    let mut targets: Vec<u64> = (0..n).map(|_| next_random(&mut rng) % total).collect();
    targets.sort_unstable();
    let mut out = Vec::new();
    // Pieces still to split: first key, exclusive end, size, depth, and the targets in it
    // (offsets from the piece's start).
    let mut stack = vec![(first, upper.to_vec(), total, 0usize, targets)];
    while let Some((a, b, size, depth, targets)) = stack.pop() {
        if targets.is_empty() {
            continue;
        }
        let hits = u32::try_from(targets.len()).unwrap_or(u32::MAX);
        if size <= MIN_PIECE || depth >= MAX_DEPTH {
            out.push(Piece { start: a, end: b, bytes: size, hits });
            continue;
        }
        let Some(m) = split(space, &a, &b)? else {
            out.push(Piece { start: a, end: b, bytes: size, hits });
            continue;
        };
        let left = space.size(&a, &m)?.min(size);
        let at = targets.partition_point(|&t| t < left);
        let right_targets: Vec<u64> = targets[at..].iter().map(|t| t - left).collect();
        let mut left_targets = targets;
        left_targets.truncate(at);
        // Right first on the stack so the left piece is split next (keys come out in order
        // but for the pieces' interleaving, sorted at the end anyway).
        stack.push((m.clone(), b, size - left, depth + 1, right_targets));
        stack.push((a, m, left, depth + 1, left_targets));
    }
    out.sort_unstable_by(|x, y| x.start.cmp(&y.start));
    Ok(Some((out, total)))
}

/// A real key strictly after `a` and before `b` near the middle of their key window, or
/// None when `a` is the only key of `[a, b)`.
fn split(space: &mut dyn KeySpace, a: &[u8], b: &[u8]) -> Result<Option<Vec<u8>>> {
    let mut mid = midpoint(a, b);
    if mid.as_slice() <= a {
        mid = [a, &[0]].concat();
    }
    if let Some(k) = space.first_at_or_after(&mid, b)? {
        return Ok(Some(k));
    }
    // Nothing in [mid, b): the keys of the piece are below the midpoint.
    Ok(space.last_before(&mid, a)?.filter(|k| k.as_slice() > a))
}

/// A byte string between `a` and `b` (`a < b`): their common prefix, then the mean of the
/// sixteen bytes after it read as big-endian numbers (missing bytes as zero).
pub fn midpoint(a: &[u8], b: &[u8]) -> Vec<u8> {
    let common = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let window = |k: &[u8]| {
        let mut w = [0u8; 16];
        for (i, slot) in w.iter_mut().enumerate() {
            *slot = k.get(common + i).copied().unwrap_or(0);
        }
        u128::from_be_bytes(w)
    };
    let (lo, hi) = (window(a), window(b));
    let mid = lo + (hi.saturating_sub(lo)) / 2;
    let mut out = a[..common].to_vec();
    out.extend_from_slice(&mid.to_be_bytes());
    while out.len() > common + 1 && out.last() == Some(&0) {
        out.pop();
    }
    out
}

fn next_random(state: &mut u64) -> u64 {
    // xorshift64*
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use std::ops::Bound;

    /// Exact sizes over an ordered map: every entry's key and value bytes.
    struct Map(BTreeMap<Vec<u8>, usize>, u64);

    impl KeySpace for Map {
        fn size(&mut self, start: &[u8], end: &[u8]) -> Result<u64> {
            self.1 += 1;
            let range = (Bound::Included(start.to_vec()), Bound::Excluded(end.to_vec()));
            Ok(self.0.range(range).map(|(k, v)| (k.len() + v) as u64).sum())
        }
        fn first_at_or_after(&mut self, key: &[u8], upper: &[u8]) -> Result<Option<Vec<u8>>> {
            let range = (Bound::Included(key.to_vec()), Bound::Excluded(upper.to_vec()));
            Ok(self.0.range(range).next().map(|(k, _)| k.clone()))
        }
        fn last_before(&mut self, key: &[u8], lower: &[u8]) -> Result<Option<Vec<u8>>> {
            let range = (Bound::Included(lower.to_vec()), Bound::Excluded(key.to_vec()));
            Ok(self.0.range(range).next_back().map(|(k, _)| k.clone()))
        }
    }

    /// A composite key as a clustered primary key encodes it: table prefix, then two
    /// eight-byte big-endian columns (few distinct first columns, the rest mostly zero).
    fn key(w: u64, i: u64) -> Vec<u8> {
        [b"t\x00\x00\x00\x07_r".as_slice(), &w.to_be_bytes(), &i.to_be_bytes()].concat()
    }

    fn stock(value: impl Fn(u64, u64) -> usize) -> Map {
        let mut m = BTreeMap::new();
        for w in 1..=4 {
            for i in 1..=5000 {
                m.insert(key(w, i), value(w, i));
            }
        }
        Map(m, 0)
    }

    /// Each piece's first key, once per offset that fell in it.
    fn starts(pieces: &[Piece]) -> Vec<Vec<u8>> {
        pieces.iter().flat_map(|p| std::iter::repeat_n(p.start.clone(), p.hits as usize)).collect()
    }

    #[test]
    fn midpoint_lies_between() {
        let (a, b) = (key(1, 1), key(4, 5000));
        let m = midpoint(&a, &b);
        assert!(a < m && m < b, "{m:?}");
        assert_eq!(midpoint(b"ab", b"ac"), b"ab\x80".to_vec());
        // A key and its extension: the midpoint is past the shorter one.
        let m = midpoint(b"ab", b"ab\x10");
        assert!(m.as_slice() > b"ab".as_slice() && m.as_slice() < b"ab\x10".as_slice(), "{m:?}");
    }

    #[test]
    fn samples_spread_over_a_composite_key_by_bytes() {
        let mut space = stock(|_, _| 300);
        let (lower, upper) = (b"t\x00\x00\x00\x07_r".to_vec(), b"t\x00\x00\x00\x07_s".to_vec());
        let (pieces, total) = sample_pieces(&mut space, &lower, &upper, 400, 7).unwrap_or_default().unwrap_or_default();
        assert_eq!(total, 20_000 * (key(1, 1).len() as u64 + 300));
        assert!(pieces.windows(2).all(|w| w[0].end <= w[1].start), "in order, apart");
        assert!(pieces.iter().all(|p| p.start < p.end && p.bytes <= MIN_PIECE && p.hits > 0));
        let keys = starts(&pieces);
        assert_eq!(keys.len(), 400);
        // The keys in the pieces read, per byte of them, times the bytes: the key count.
        let (mut in_pieces, mut bytes) = (0usize, 0u64);
        for p in &pieces {
            in_pieces += space.0.range(p.start.clone()..p.end.clone()).count();
            bytes += p.bytes;
        }
        let estimate = total as f64 * in_pieces as f64 / bytes as f64;
        assert!((19_000.0..21_000.0).contains(&estimate), "{estimate} keys estimated");
        // 6.5 MB in pieces of at most 16 KiB: most offsets fall in pieces of their own.
        let mut distinct = keys.clone();
        distinct.dedup();
        assert!(distinct.len() > 200, "{} distinct", distinct.len());
        // Every warehouse gets about a quarter, and inside one the items are spread (not
        // piled at its first key as interpolating the bytes would).
        for w in 1..=4u64 {
            let ours: Vec<u64> = keys
                .iter()
                .filter(|k| k[7..15] == w.to_be_bytes())
                .map(|k| u64::from_be_bytes(k[15..23].try_into().unwrap_or_default()))
                .collect();
            let share = ours.len() as f64 / keys.len() as f64;
            assert!((0.17..0.33).contains(&share), "warehouse {w}: {share}");
            let low_half = ours.iter().filter(|&&i| i <= 2500).count() as f64 / ours.len() as f64;
            assert!((0.3..0.7).contains(&low_half), "warehouse {w}: {low_half} in the low half");
        }
        assert!(space.1 < 40 * 400, "{} size queries", space.1);
    }

    #[test]
    fn samples_follow_bytes_not_keys() {
        // Warehouse 4's rows are nine times the size of the others': it holds three
        // quarters of the bytes and should get about three quarters of the samples.
        let mut space = stock(|w, _| if w == 4 { 2700 } else { 300 });
        let (lower, upper) = (b"t".to_vec(), b"u".to_vec());
        let (pieces, _) = sample_pieces(&mut space, &lower, &upper, 400, 11).unwrap_or_default().unwrap_or_default();
        let keys = starts(&pieces);
        let heavy = keys.iter().filter(|k| k[7..15] == 4u64.to_be_bytes()).count() as f64 / keys.len() as f64;
        assert!((0.65..0.85).contains(&heavy), "{heavy}");
    }

    #[test]
    fn empty_and_tiny_ranges() {
        let mut space = Map(BTreeMap::new(), 0);
        assert_eq!(sample_pieces(&mut space, b"a", b"b", 10, 1).ok(), Some(Some((Vec::new(), 0))));
        let mut one = Map(BTreeMap::from([(b"k".to_vec(), 10)]), 0);
        // One small piece: its first key stands for every target.
        let piece = Piece { start: b"k".to_vec(), end: b"z".to_vec(), bytes: 11, hits: 3 };
        assert_eq!(sample_pieces(&mut one, b"a", b"z", 3, 1).ok(), Some(Some((vec![piece], 11))));
        // Sizes of nothing (what is there is all in memory): the caller reads it all.
        let mut nothing = Map(BTreeMap::from([(Vec::new(), 0)]), 0);
        assert_eq!(sample_pieces(&mut nothing, b"", b"z", 10, 1).ok(), Some(None));
    }
}
