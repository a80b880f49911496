//! Sorting many items by byte-string keys that share a long prefix.
//!
//! A backfill's index entries (and most batches of storage keys) start with the same table
//! and index id, so a plain sort spends its comparisons in `memcmp` calls that walk that
//! prefix again every time, on keys scattered over the heap. `sort_by_key_bytes` strips the
//! prefix all keys share once, sorts compact `(head, index)` tags where the head is the
//! next 16 bytes of a key as one big-endian integer, and compares whole keys only for tags
//! whose heads tie. Then it moves the items into their places in one pass of swaps.
//! Input already in order, or made of a few sorted runs, is recognised in one pass and left
//! alone or merged by the standard library's run-finding sort instead.

/// Inputs shorter than this are sorted directly: the tags would not pay for themselves.
const TAGGED_MIN: usize = 64;

/// Memory the sort takes per item while it runs (a tag and a source position), for callers
/// that bound what they collect before sorting.
pub const BYTES_PER_ITEM: usize = std::mem::size_of::<(u128, u32)>() + std::mem::size_of::<u32>();

/// Inputs made of fewer sorted runs than this are merged by the standard stable sort, which
/// finds runs, instead of being tagged.
const FEW_RUNS: usize = 8;

/// Sorts `items` by the bytes `key` gives for each, ascending (unstable: items with equal
/// keys end up in any order). The order is exactly `key(a).cmp(key(b))`'s.
pub fn sort_by_key_bytes<T>(items: &mut [T], key: impl Fn(&T) -> &[u8]) {
    // Often sorted already (a commit's keys come out of an ordered buffer) or a few sorted
    // runs (a bulk INSERT's rows, then each index's entries); a shuffled input stops the
    // count early.
    let descents = items.windows(2).filter(|w| key(&w[0]) > key(&w[1])).take(FEW_RUNS).count();
    if descents == 0 {
        return;
    }
    let n = items.len();
    if descents < FEW_RUNS {
        items.sort_by(|a, b| key(a).cmp(key(b)));
        return;
    }
    if n < TAGGED_MIN || u32::try_from(n).is_err() {
        items.sort_unstable_by(|a, b| key(a).cmp(key(b)));
        return;
    }
    let first = key(&items[0]);
    let shared = items[1..].iter().fold(first.len(), |p, it| p.min(common_prefix(&first[..p], key(it))));
    let mut tags: Vec<(u128, u32)> =
        items.iter().enumerate().map(|(i, it)| (head(&key(it)[shared..]), i as u32)).collect();
    tags.sort_unstable_by(|a, b| {
        a.0.cmp(&b.0).then_with(|| key(&items[a.1 as usize])[shared..].cmp(&key(&items[b.1 as usize])[shared..]))
    });
    let mut source: Vec<u32> = tags.into_iter().map(|(_, i)| i).collect();
    permute(items, &mut source);
}

/// How many leading bytes `a` and `b` share.
fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The first 16 bytes of `k` as a big-endian integer, zero-padded if `k` is shorter. Heads
/// never contradict the keys' order: if `head(a) < head(b)`, the first padded byte where
/// they differ is either a real byte of both (so `a < b`) or past `a`'s end with `a`
/// matching `b` so far (so `a` is a proper prefix of `b`). Equal heads say nothing.
fn head(k: &[u8]) -> u128 {
    let mut b = [0u8; 16];
    let n = k.len().min(16);
    b[..n].copy_from_slice(&k[..n]);
    u128::from_be_bytes(b)
}

/// Rearranges `items` so that position `i` holds what was at `source[i]` (a permutation of
/// the positions), following each cycle with swaps; `source` ends as the identity.
fn permute<T>(items: &mut [T], source: &mut [u32]) {
    for start in 0..items.len() {
        let mut at = start;
        loop {
            let from = source[at] as usize;
            source[at] = at as u32;
            if from == start {
                break;
            }
            items.swap(at, from);
            at = from;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift64*), so failures reproduce.
    struct Gen(u64);

    impl Gen {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// Keys like an index's: a shared prefix, then a few bytes from a small alphabet (so
    /// heads tie and some keys are prefixes of others), sometimes running past 16 bytes.
    fn keys(g: &mut Gen, n: usize) -> Vec<(Vec<u8>, usize)> {
        let prefix_len = g.below(12) as usize;
        let prefix: Vec<u8> = (0..prefix_len).map(|_| g.below(256) as u8).collect();
        (0..n)
            .map(|i| {
                let mut k = prefix.clone();
                let len = g.below(24) as usize;
                k.extend((0..len).map(|_| [0u8, 1, 0x7f, 0xff][g.below(4) as usize]));
                (k, i)
            })
            .collect()
    }

    #[test]
    fn sorts_like_a_plain_sort_of_the_keys() {
        let mut g = Gen(0x9E37_79B9_7F4A_7C15);
        for round in 0..300 {
            let n = match round % 3 {
                0 => g.below(TAGGED_MIN as u64) as usize,
                1 => TAGGED_MIN + g.below(200) as usize,
                _ => g.below(5_000) as usize,
            };
            let mut items = keys(&mut g, n);
            let mut expected = items.clone();
            expected.sort_by(|a, b| a.0.cmp(&b.0));
            sort_by_key_bytes(&mut items, |it| &it.0);
            let got: Vec<&[u8]> = items.iter().map(|it| it.0.as_slice()).collect();
            let want: Vec<&[u8]> = expected.iter().map(|it| it.0.as_slice()).collect();
            assert_eq!(got, want, "round {round}, {n} keys");
            // Every item is still there once: the payloads are a permutation of 0..n.
            let mut payloads: Vec<usize> = items.iter().map(|it| it.1).collect();
            payloads.sort_unstable();
            assert_eq!(payloads, (0..n).collect::<Vec<_>>(), "round {round}");
        }
    }

    #[test]
    fn keys_that_are_all_equal_or_all_empty_keep_every_item() {
        for key in [vec![], vec![7u8; 40]] {
            let mut items: Vec<(Vec<u8>, usize)> = (0..500).map(|i| (key.clone(), i)).collect();
            sort_by_key_bytes(&mut items, |it| &it.0);
            let mut payloads: Vec<usize> = items.iter().map(|it| it.1).collect();
            payloads.sort_unstable();
            assert_eq!(payloads, (0..500).collect::<Vec<_>>());
            assert!(items.iter().all(|it| it.0 == key));
        }
    }

    #[test]
    fn a_key_sorts_before_its_extensions_even_with_zero_bytes() {
        // Zero padding makes these heads equal; the tie-break must still order them.
        let mut items: Vec<Vec<u8>> = (0..100).map(|i| vec![0u8; 100 - i]).collect();
        items.push(vec![]);
        sort_by_key_bytes(&mut items, |k| k);
        let lens: Vec<usize> = items.iter().map(Vec::len).collect();
        assert_eq!(lens, (0..=100).collect::<Vec<_>>());
    }

    #[test]
    fn permute_moves_each_item_to_its_place() {
        let mut items = vec!['a', 'b', 'c', 'd', 'e'];
        let mut source = vec![3, 0, 4, 1, 2];
        permute(&mut items, &mut source);
        assert_eq!(items, vec!['d', 'a', 'e', 'b', 'c']);
        assert_eq!(source, vec![0, 1, 2, 3, 4]);
    }
}
