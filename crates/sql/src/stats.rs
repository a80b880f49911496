//! Table statistics: what `ANALYZE TABLE` gathers and the planner estimates row counts with.
//!
//! Per table, the row count; per column, the number of distinct values (NDV), NULLs, the
//! average encoded size, the most frequent values (top-N) and an equi-depth histogram of the
//! others; per index and for the primary key, the NDV of each leading prefix of its columns
//! (what `SHOW INDEX` reports as CARDINALITY). It takes one pass over the rows: NDV comes
//! from a HyperLogLog sketch, top-N and histogram from a uniform reservoir sample; or, for a
//! large table under auto-analyze or `WITH n SAMPLES`, from short runs of rows at random
//! places (`Engine::analyze_table_sampled`), NDV then estimated from the sample. Values are
//! kept in their memcomparable key encoding, so histogram bounds compare as bytes in the
//! order an index keeps them.
//!
//! Statistics persist under the meta key `stats/{table id}` (`Catalog::put_stats`) and are
//! cached in the catalog. Commits count the rows they write per table; a table whose count
//! since its last analysis passes `tidb_auto_analyze_ratio` of its rows (and 1000 rows) is
//! analyzed again in the background while `tidb_enable_auto_analyze` is ON, as TiDB does —
//! unless it has fewer than 1000 rows (TiDB's `AutoAnalyzeMinCnt`), counted when it is due.

use std::collections::HashMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use strata_codec::keys::{prefix_end, row_prefix};
use strata_codec::memcmp::encode_value;
use strata_common::{Error, Result, Value};

use crate::catalog::TableInfo;
use crate::expr::{BinOp, Expr, UnaryOp};
use crate::keyconv::{key_conv, KeyConv, Side};
use crate::table::decode_row_into;

/// Rows kept in the reservoir sample (the top-N and histograms are built from it).
pub const SAMPLE_ROWS: usize = 10_000;
/// Histogram buckets per column.
pub const BUCKETS: usize = 64;
/// Most frequent values kept per column.
pub const TOP_N: usize = 32;
/// Rows a sampled analysis reads from each random place (`Engine::analyze_table_sampled`):
/// short, as rows next to each other in key order share values (an order's lines) and a
/// sample of runs sees fewer distinct values than one of single rows would.
pub const SAMPLE_RUN_ROWS: usize = 8;
/// Pieces a sampled analysis reads whole to count rows per byte, and the most rows it
/// reads of one (a piece is at most 16 KiB of table file: `storage::sample::MIN_PIECE`).
const COUNT_PIECES: usize = 32;
const COUNT_PIECE_ROWS: usize = 8192;
/// The most rows a sampled analysis keeps (`ANALYZE TABLE .. WITH n SAMPLES`).
pub const MAX_SAMPLE_ROWS: usize = 100_000;
/// Auto-analyze samples (`Engine::analyze_table_sampled`, `SAMPLE_ROWS` rows) a table that
/// holds at least this many rows as far as it knows (rows last counted plus rows written
/// since), and reads smaller ones whole.
pub const AUTO_SAMPLE_MIN_ROWS: u64 = 50_000;
/// Auto-analyze leaves tables with fewer modified rows than this alone (TiDB's minimum).
pub const AUTO_ANALYZE_MIN_ROWS: u64 = 1000;

/// HyperLogLog precision: 2^12 registers, about 1.6% standard error.
const HLL_BITS: u32 = 12;

/// A HyperLogLog distinct-count sketch.
#[derive(Clone)]
struct Hll {
    registers: Vec<u8>,
}

impl Hll {
    fn new() -> Hll {
        Hll { registers: vec![0; 1 << HLL_BITS] }
    }

    fn add(&mut self, hash: u64) {
        let idx = (hash >> (64 - HLL_BITS)) as usize;
        let rest = hash << HLL_BITS;
        let rank = (rest.leading_zeros().min(64 - HLL_BITS) + 1) as u8;
        if self.registers[idx] < rank {
            self.registers[idx] = rank;
        }
    }

    fn estimate(&self) -> f64 {
        let m = self.registers.len() as f64;
        let alpha = 0.7213 / (1.0 + 1.079 / m);
        let sum: f64 = self.registers.iter().map(|&r| 2f64.powi(-(r as i32))).sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|&&r| r == 0).count();
        if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        }
    }
}

/// SplitMix64's finalizer: every input bit reaches every output bit.
fn mix(mut h: u64) -> u64 {
    h ^= h >> 30;
    h = h.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h ^= h >> 27;
    h = h.wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

/// A 64-bit hash of encoded bytes (foldhash's quality variant: sixteen bytes per
/// multiply, every bit mixed at the end). Only the sketches of one analysis see these
/// hashes: nothing stored depends on them.
fn hash(bytes: &[u8]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::quality::FixedState::with_seed(0x9e37_79b9_7f4a_7c15).hash_one(bytes)
}

/// The hash of a prefix of columns `prefix` (a `combine` of the ones before it, or 0)
/// followed by one more column whose hash is `column`. Order matters: (a, b) and (b, a)
/// hash apart.
fn combine(prefix: u64, column: u64) -> u64 {
    mix(prefix.rotate_left(23).wrapping_mul(0xff51_afd7_ed55_8ccd) ^ column)
}

/// What a NULL column contributes to an index prefix hash.
const NULL_HASH: u64 = 0x5851_f42d_4c95_7f2d;

/// One histogram bucket: the values from `lower` to `upper`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// Lower bound (memcomparable encoding), inclusive.
    #[serde(with = "hex_bytes")]
    pub lower: Vec<u8>,
    /// Upper bound (memcomparable encoding), inclusive.
    #[serde(with = "hex_bytes")]
    pub upper: Vec<u8>,
    /// Rows in this bucket and every bucket before it.
    pub count: u64,
    /// Rows equal to `upper`.
    pub repeats: u64,
    /// Distinct values seen in the bucket (in the sample).
    pub ndv: u64,
}

/// A frequent value and its row count.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TopValue {
    /// The value (memcomparable encoding).
    #[serde(with = "hex_bytes")]
    pub value: Vec<u8>,
    /// Rows holding it.
    pub count: u64,
}

/// Statistics of one column.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnStats {
    /// The column's id (`ColumnInfo::id`).
    pub column_id: u32,
    /// Distinct non-NULL values.
    pub ndv: u64,
    /// NULLs.
    pub nulls: u64,
    /// Average encoded size in bytes.
    pub avg_size: f64,
    /// The most frequent values, most frequent first.
    pub top_n: Vec<TopValue>,
    /// Equi-depth histogram of the values not in `top_n`, in key order.
    pub buckets: Vec<Bucket>,
}

/// Statistics of an index (or the primary key, id 0).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct IndexStats {
    /// The index id; 0 for the primary key.
    pub index_id: i64,
    /// NDV of the first 1, 2, .. columns of the index.
    pub prefix_ndv: Vec<u64>,
}

/// Statistics of a table, as of its last analysis.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableStats {
    /// The table.
    pub table_id: i64,
    /// Rows when analyzed.
    pub row_count: u64,
    /// When analyzed: `YYYY-MM-DD hh:mm:ss`, server time.
    pub analyzed_at: String,
    /// Per column.
    pub columns: Vec<ColumnStats>,
    /// Per index; the primary key (when the table has one) has id 0.
    pub indexes: Vec<IndexStats>,
}

mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(b: &[u8], s: S) -> Result<S::Ok, S::Error> {
        let text: String = b.iter().map(|x| format!("{x:02x}")).collect();
        s.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        if text.len() % 2 != 0 {
            return Err(serde::de::Error::custom("odd hex length"));
        }
        (0..text.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(serde::de::Error::custom))
            .collect()
    }
}

/// Gathers a table's statistics from its rows, one row at a time, in bounded memory (the
/// sketches and a sample of at most `SAMPLE_ROWS` rows).
pub struct Collector {
    columns: Vec<u32>,
    /// Per index (primary key first, id 0): its id and column offsets.
    indexes: Vec<(i64, Vec<usize>)>,
    rows: u64,
    nulls: Vec<u64>,
    sizes: Vec<u64>,
    column_hll: Vec<Hll>,
    /// Per index, a sketch per prefix length.
    index_hll: Vec<Vec<Hll>>,
    /// Sampled rows: each column's encoding, None for NULL.
    sample: Vec<Vec<Option<Vec<u8>>>>,
    /// Rows the sample holds at most.
    capacity: usize,
    rng: u64,
    /// The row being added: its values' encodings one after another...
    buf: Vec<u8>,
    /// ...where each column's ends (None for NULL)...
    ends: Vec<Option<usize>>,
    /// ...and each column's hash.
    hashes: Vec<u64>,
}

impl Collector {
    /// A collector for rows of `table`, keeping a sample of `SAMPLE_ROWS`.
    pub fn new(table: &TableInfo) -> Collector {
        Collector::with_capacity(table, SAMPLE_ROWS)
    }

    /// A collector keeping a sample of at most `capacity` rows.
    pub fn with_capacity(table: &TableInfo, capacity: usize) -> Collector {
        let mut indexes = Vec::new();
        if let Some(pk) = &table.pk {
            indexes.push((0, pk.clone()));
        }
        for ix in table.indexes.iter().filter(|i| i.is_public()) {
            indexes.push((ix.id, ix.columns.clone()));
        }
        let n = table.columns.len();
        Collector {
            columns: table.columns.iter().map(|c| c.id).collect(),
            index_hll: indexes.iter().map(|(_, cols)| vec![Hll::new(); cols.len()]).collect(),
            indexes,
            rows: 0,
            nulls: vec![0; n],
            sizes: vec![0; n],
            column_hll: vec![Hll::new(); n],
            sample: Vec::new(),
            capacity: capacity.max(1),
            rng: 0x9e37_79b9_7f4a_7c15,
            buf: Vec::new(),
            ends: Vec::with_capacity(n),
            hashes: Vec::with_capacity(n),
        }
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Memory the collector holds, in bytes (its sample grows to `SAMPLE_ROWS` rows).
    pub fn memory(&self) -> usize {
        let sketches = (self.column_hll.len() + self.index_hll.iter().map(Vec::len).sum::<usize>()) << HLL_BITS;
        let sample: usize =
            self.sample.iter().map(|r| r.iter().map(|v| 32 + v.as_ref().map_or(0, Vec::len)).sum::<usize>()).sum();
        sketches + sample
    }

    /// Adds one row (values in column order). Every value is encoded into one reused
    /// buffer and hashed into the sketches; only a row the reservoir keeps is copied out.
    pub fn add(&mut self, row: &[Value]) {
        self.rows += 1;
        // Reservoir sampling: the first `capacity` rows are kept, then row n replaces a
        // random slot with probability capacity / n.
        let slot = if self.sample.len() < self.capacity {
            Some(self.sample.len())
        } else {
            Some((self.next_random() % self.rows) as usize).filter(|&j| j < self.capacity)
        };
        self.buf.clear();
        self.ends.clear();
        self.hashes.clear();
        for (i, v) in row.iter().enumerate().take(self.columns.len()) {
            if v.is_null() {
                self.nulls[i] += 1;
                self.ends.push(None);
                self.hashes.push(NULL_HASH);
                continue;
            }
            let start = self.buf.len();
            encode_value(&mut self.buf, v);
            let h = hash(&self.buf[start..]);
            self.sizes[i] += (self.buf.len() - start) as u64;
            self.column_hll[i].add(h);
            self.ends.push(Some(self.buf.len()));
            self.hashes.push(h);
        }
        for (k, (_, cols)) in self.indexes.iter().enumerate() {
            let mut h = 0;
            for (p, &c) in cols.iter().enumerate() {
                h = combine(h, self.hashes.get(c).copied().unwrap_or(NULL_HASH));
                self.index_hll[k][p].add(h);
            }
        }
        let Some(slot) = slot else { return };
        let mut start = 0;
        let encoded: Vec<Option<Vec<u8>>> = self
            .ends
            .iter()
            .map(|end| {
                end.map(|end| {
                    let value = self.buf[start..end].to_vec();
                    start = end;
                    value
                })
            })
            .collect();
        if slot == self.sample.len() {
            self.sample.push(encoded);
        } else {
            self.sample[slot] = encoded;
        }
    }

    /// The statistics of the rows added (every row of the table).
    pub fn finish(self, table_id: i64, analyzed_at: String) -> TableStats {
        self.finish_with(table_id, analyzed_at, None)
    }

    /// The statistics of a table of about `total_rows` rows, of which the rows added are a
    /// random sample (`Engine::analyze_table_sampled`): counts scaled up, NDV estimated
    /// from the sample with Haas and Stokes' Duj1 estimator (`duj1`).
    pub fn finish_sampled(self, table_id: i64, analyzed_at: String, total_rows: u64) -> TableStats {
        let total = total_rows.max(self.rows);
        self.finish_with(table_id, analyzed_at, Some(total))
    }

    fn finish_with(self, table_id: i64, analyzed_at: String, total_rows: Option<u64>) -> TableStats {
        let exact = total_rows.is_none() && self.rows as usize == self.sample.len();
        let factor = total_rows.map_or(1.0, |t| if self.rows == 0 { 1.0 } else { t as f64 / self.rows as f64 });
        let scale = |n: u64| (n as f64 * factor).round() as u64;
        let mut columns = Vec::with_capacity(self.columns.len());
        for (i, &id) in self.columns.iter().enumerate() {
            let mut values: Vec<&[u8]> = self.sample.iter().filter_map(|r| r[i].as_deref()).collect();
            values.sort_unstable();
            let non_null = self.rows - self.nulls[i];
            let ndv = match total_rows {
                None if exact => Ndv::Exact,
                None => Ndv::Sketch(self.column_hll[i].estimate()),
                Some(_) => Ndv::Sampled,
            };
            columns.push(column_stats(
                id,
                &values,
                scale(non_null),
                scale(self.nulls[i]),
                ndv,
                if non_null == 0 { 0.0 } else { self.sizes[i] as f64 / non_null as f64 },
            ));
        }
        let row_count = total_rows.unwrap_or(self.rows);
        let indexes = self
            .indexes
            .iter()
            .zip(&self.index_hll)
            .map(|((id, cols), hlls)| {
                let prefix_ndv = (0..cols.len())
                    .map(|p| {
                        if !exact && total_rows.is_none() {
                            return (hlls[p].estimate().round() as u64).min(self.rows);
                        }
                        // Count the sample's prefixes: every row's when it holds them all,
                        // else an estimate from the sample.
                        let mut keys: Vec<Vec<u8>> = self
                            .sample
                            .iter()
                            .map(|r| {
                                let mut k = Vec::new();
                                for &c in &cols[..=p] {
                                    match &r[c] {
                                        Some(b) => k.extend_from_slice(b),
                                        None => k.push(0),
                                    }
                                }
                                k
                            })
                            .collect();
                        keys.sort_unstable();
                        let (distinct, once) = distinct_and_once(&keys);
                        if exact {
                            distinct
                        } else {
                            duj1(keys.len() as u64, distinct, once, row_count)
                        }
                    })
                    .collect();
                IndexStats { index_id: *id, prefix_ndv }
            })
            .collect();
        TableStats { table_id, row_count, analyzed_at, columns, indexes }
    }
}

/// How a column's NDV is known: exactly (the sample holds every row), from the sketch of
/// every row, or to be estimated from the sample alone.
#[derive(Clone, Copy)]
enum Ndv {
    Exact,
    Sketch(f64),
    Sampled,
}

/// Distinct values of a sorted list, and how many of them occur once.
fn distinct_and_once<T: PartialEq>(sorted: &[T]) -> (u64, u64) {
    let (mut distinct, mut once) = (0u64, 0u64);
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i + 1;
        while j < sorted.len() && sorted[j] == sorted[i] {
            j += 1;
        }
        distinct += 1;
        once += u64::from(j - i == 1);
        i = j;
    }
    (distinct, once)
}

/// Haas and Stokes' Duj1 estimate of the distinct values among `total` values, from a
/// random sample of `n` of them holding `distinct` values, `once` of which it holds once:
/// `n·d / (n − f1 + f1·n/N)` (what PostgreSQL's ANALYZE uses). A sample whose every value
/// is unique says the column is; one with no value seen once says it has seen them all.
pub fn duj1(n: u64, distinct: u64, once: u64, total: u64) -> u64 {
    if n == 0 || distinct == 0 {
        return 0;
    }
    if total <= n {
        return distinct;
    }
    if once >= n {
        return total;
    }
    let (n, d, f1, total_f) = (n as f64, distinct as f64, once as f64, total as f64);
    let estimate = n * d / ((n - f1) + f1 * n / total_f);
    (estimate.round() as u64).clamp(distinct, total)
}

/// Builds one column's statistics from its sorted sampled values.
fn column_stats(column_id: u32, sorted: &[&[u8]], non_null: u64, nulls: u64, ndv: Ndv, avg_size: f64) -> ColumnStats {
    // Runs of equal values.
    let mut runs: Vec<(&[u8], u64)> = Vec::new();
    for v in sorted {
        match runs.last_mut() {
            Some((last, n)) if last == v => *n += 1,
            _ => runs.push((v, 1)),
        }
    }
    let distinct = runs.len() as u64;
    let ndv = match ndv {
        Ndv::Exact => distinct,
        Ndv::Sketch(sketch) => (sketch.round() as u64).clamp(distinct, non_null.max(distinct)),
        Ndv::Sampled => {
            let once = runs.iter().filter(|(_, n)| *n == 1).count() as u64;
            duj1(sorted.len() as u64, distinct, once, non_null)
        }
    };
    let scale = if sorted.is_empty() { 0.0 } else { non_null as f64 / sorted.len() as f64 };
    let scaled = |n: u64| (n as f64 * scale).round() as u64;
    // Top-N: values seen more than once, most frequent first.
    let mut frequent: Vec<(&[u8], u64)> = runs.iter().copied().filter(|(_, n)| *n > 1).collect();
    frequent.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    frequent.truncate(TOP_N);
    let top_n: Vec<TopValue> =
        frequent.iter().map(|(v, n)| TopValue { value: v.to_vec(), count: scaled(*n) }).collect();
    let rest: Vec<(&[u8], u64)> = runs.iter().copied().filter(|(v, _)| !frequent.iter().any(|(f, _)| f == v)).collect();
    let total: u64 = rest.iter().map(|(_, n)| n).sum();
    let per_bucket = total.div_ceil(BUCKETS as u64).max(1);
    let mut buckets = Vec::new();
    let (mut in_bucket, mut cumulative, mut bucket_ndv) = (0u64, 0u64, 0u64);
    let mut lower: &[u8] = &[];
    for (i, (v, n)) in rest.iter().enumerate() {
        if in_bucket == 0 {
            lower = v;
        }
        in_bucket += n;
        cumulative += n;
        bucket_ndv += 1;
        if in_bucket >= per_bucket || i + 1 == rest.len() {
            buckets.push(Bucket {
                lower: lower.to_vec(),
                upper: v.to_vec(),
                count: scaled(cumulative),
                repeats: scaled(*n),
                ndv: bucket_ndv,
            });
            in_bucket = 0;
            bucket_ndv = 0;
        }
    }
    ColumnStats { column_id, ndv, nulls, avg_size, top_n, buckets }
}

/// Where a byte string lies between two others, as a fraction in [0, 1]: the first eight
/// bytes after their common prefix, read as big-endian numbers (exact enough for the
/// memcomparable encodings of integers, dates and decimals, a fair guess for strings).
fn position(lo: &[u8], hi: &[u8], v: &[u8]) -> f64 {
    if v <= lo {
        return 0.0;
    }
    if v >= hi {
        return 1.0;
    }
    let common = lo.iter().zip(hi).take_while(|(a, b)| a == b).count();
    let num = |b: &[u8]| {
        let mut x = [0u8; 8];
        for (i, slot) in x.iter_mut().enumerate() {
            *slot = b.get(common + i).copied().unwrap_or(0);
        }
        u64::from_be_bytes(x) as f64
    };
    let (l, h, x) = (num(lo), num(hi), num(v));
    if h <= l {
        0.5
    } else {
        ((x - l) / (h - l)).clamp(0.0, 1.0)
    }
}

impl ColumnStats {
    fn top_total(&self) -> u64 {
        self.top_n.iter().map(|t| t.count).sum()
    }

    /// Estimated rows equal to `v` (encoded).
    pub fn eq_rows(&self, v: &[u8], row_count: f64) -> f64 {
        if let Some(t) = self.top_n.iter().find(|t| t.value == v) {
            return t.count as f64;
        }
        let hist_rows = self.buckets.last().map_or(0, |b| b.count) as f64;
        if hist_rows == 0.0 {
            // Every value seen is in the top-N: another value is rare.
            return if self.top_n.is_empty() { 0.0 } else { 1.0f64.min(row_count) };
        }
        let (first, last) = (&self.buckets[0].lower, &self.buckets[self.buckets.len() - 1].upper);
        if v < first.as_slice() || v > last.as_slice() {
            // Outside the values seen: at most one bucket-value's share.
            return 1.0f64.min(row_count);
        }
        let others = (self.ndv as f64 - self.top_n.len() as f64).max(1.0);
        (hist_rows / others).max(1.0)
    }

    /// Estimated histogram rows below `v` (at or below with `inclusive`).
    fn hist_below(&self, v: &[u8], inclusive: bool) -> f64 {
        let mut prev_count = 0u64;
        for b in &self.buckets {
            if v < b.lower.as_slice() {
                // Between buckets (or before the first): nothing of this bucket is below.
                return prev_count as f64;
            }
            if v <= b.upper.as_slice() {
                let below_upper = (b.count - prev_count).saturating_sub(b.repeats) as f64;
                if v == b.upper.as_slice() {
                    return prev_count as f64 + below_upper + if inclusive { b.repeats as f64 } else { 0.0 };
                }
                if v == b.lower.as_slice() && !inclusive {
                    return prev_count as f64;
                }
                let frac = position(&b.lower, &b.upper, v);
                return prev_count as f64 + below_upper * frac;
            }
            prev_count = b.count;
        }
        prev_count as f64
    }

    /// Estimated rows with `lower < v < upper` (bounds inclusive when flagged; None: open).
    pub fn range_rows(&self, lower: Option<(&[u8], bool)>, upper: Option<(&[u8], bool)>) -> f64 {
        let hist_total = self.buckets.last().map_or(0, |b| b.count) as f64;
        let hi = match upper {
            Some((u, inc)) => self.hist_below(u, inc),
            None => hist_total,
        };
        let lo = match lower {
            Some((l, inc)) => self.hist_below(l, !inc),
            None => 0.0,
        };
        let top: u64 = self
            .top_n
            .iter()
            .filter(|t| {
                let v = t.value.as_slice();
                lower.is_none_or(|(l, inc)| if inc { v >= l } else { v > l })
                    && upper.is_none_or(|(u, inc)| if inc { v <= u } else { v < u })
            })
            .map(|t| t.count)
            .sum();
        (hi - lo).max(0.0) + top as f64
    }

    /// Rows holding a non-NULL value.
    pub fn non_null(&self) -> f64 {
        (self.top_total() + self.buckets.last().map_or(0, |b| b.count)) as f64
    }
}

impl TableStats {
    /// The statistics of the column with this id.
    pub fn column(&self, id: u32) -> Option<&ColumnStats> {
        self.columns.iter().find(|c| c.column_id == id)
    }

    /// The statistics of the index with this id (0: the primary key).
    pub fn index(&self, id: i64) -> Option<&IndexStats> {
        self.indexes.iter().find(|i| i.index_id == id)
    }

    /// Average row size: the sum of the columns' average encoded sizes.
    pub fn avg_row_size(&self) -> f64 {
        self.columns.iter().map(|c| c.avg_size * c.non_null() / (self.row_count.max(1) as f64)).sum()
    }
}

/// Rows written per table since each table's last analysis (this process's lifetime).
#[derive(Default)]
pub struct Modifications {
    counts: parking_lot::Mutex<HashMap<i64, u64>>,
}

impl Modifications {
    /// Adds rows written by a committed transaction.
    pub fn add(&self, table: i64, rows: u64) {
        *self.counts.lock().entry(table).or_default() += rows;
    }

    /// Rows written to `table` since it was last analyzed.
    pub fn get(&self, table: i64) -> u64 {
        self.counts.lock().get(&table).copied().unwrap_or(0)
    }

    /// Starts the count of `table` over by `rows` (those an analysis saw).
    pub fn take(&self, table: i64, rows: u64) {
        let mut c = self.counts.lock();
        if let Some(n) = c.get_mut(&table) {
            *n = n.saturating_sub(rows);
        }
    }

    /// Every table with a count.
    pub fn all(&self) -> Vec<(i64, u64)> {
        self.counts.lock().iter().map(|(k, v)| (*k, *v)).collect()
    }
}

/// A table that took more row writes in one auto-analyze round than this share of its rows
/// is being loaded: its analysis waits for the load to end. Analyzed as it grew, the tables
/// of a 4-warehouse TPC-C load were scanned whole again and again (each time half as big
/// again as the time before), 14% of the server's CPU during the load (BENCHMARKS.md).
const LOADING_SHARE: f64 = 0.1;

/// The longest an analysis waits for a table to stop loading (a table under steady heavy
/// writes is analyzed this late at worst).
const AUTO_ANALYZE_MAX_WAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// What auto-analyze remembers from one round to the next: each table's count of modified
/// rows at the previous round, and since when an analysis the table needs has waited.
#[derive(Default)]
pub struct AnalyzePacing {
    seen: HashMap<i64, (u64, Option<std::time::Instant>)>,
}

impl AnalyzePacing {
    /// Records table `id`'s count of `modified` rows this round; for a table that needs an
    /// analysis, whether it should wait: more rows than `LOADING_SHARE` of `rows` were
    /// written since the previous round (the first round a table is seen counts all its
    /// rows as new), and its analysis has not waited `AUTO_ANALYZE_MAX_WAIT` yet.
    pub fn hold_back(&mut self, id: i64, modified: u64, rows: u64, needed: bool, now: std::time::Instant) -> bool {
        let entry = self.seen.entry(id).or_insert((0, None));
        let grew = modified.saturating_sub(entry.0);
        entry.0 = modified;
        if !needed || grew as f64 <= LOADING_SHARE * rows.max(1) as f64 {
            entry.1 = None;
            return false;
        }
        let since = *entry.1.get_or_insert(now);
        now.duration_since(since) < AUTO_ANALYZE_MAX_WAIT
    }

    /// Table `id`'s count started over (it was analyzed, or its count was taken off as a
    /// small table's): growth is measured from zero again.
    fn started_over(&mut self, id: i64) {
        self.seen.insert(id, (0, None));
    }

    /// Forgets tables no longer counted (dropped).
    fn retain(&mut self, counted: &[(i64, u64)]) {
        self.seen.retain(|id, _| counted.iter().any(|(t, _)| t == id));
    }
}

/// Whether `table` with statistics `stats` (None: never analyzed) and `modified` rows
/// since should be analyzed again, for auto-analyze with `ratio`.
pub fn needs_analyze(stats: Option<&TableStats>, modified: u64, ratio: f64) -> bool {
    if modified < AUTO_ANALYZE_MIN_ROWS || ratio <= 0.0 {
        return false;
    }
    match stats {
        None => true,
        Some(s) => modified as f64 > ratio * s.row_count as f64,
    }
}

/// The selectivity TiDB assumes for a predicate it cannot estimate (its selection factor).
pub const DEFAULT_SELECTIVITY: f64 = 0.8;
/// `tidb_default_string_match_selectivity`'s default: the share of rows a LIKE keeps.
pub const DEFAULT_LIKE_SELECTIVITY: f64 = 0.8;

/// Estimates how many rows of a table satisfy every predicate of `preds` (bound to the
/// table's columns), assuming they are independent. `constant` evaluates an expression that
/// does not depend on the row (None when it cannot).
pub struct Estimator<'a> {
    /// The table.
    pub table: &'a TableInfo,
    /// Its statistics.
    pub stats: &'a TableStats,
    /// Evaluates row-independent expressions.
    pub constant: &'a dyn Fn(&Expr) -> Option<Value>,
    /// The share of rows a LIKE keeps.
    pub like: f64,
}

impl Estimator<'_> {
    /// Rows the table holds.
    pub fn rows(&self) -> f64 {
        self.stats.row_count as f64
    }

    /// Estimated rows satisfying all of `preds`.
    pub fn filtered_rows(&self, preds: &[Expr]) -> f64 {
        let rows = self.rows();
        preds.iter().fold(rows, |n, p| n * self.selectivity(p))
    }

    /// The statistics of column offset `c`.
    pub fn column(&self, c: usize) -> Option<&ColumnStats> {
        self.stats.column(self.table.columns.get(c)?.id)
    }

    /// Distinct values of column offset `c` (the row count when unknown).
    pub fn ndv(&self, c: usize) -> f64 {
        self.column(c).map_or(self.rows(), |s| s.ndv as f64).max(1.0)
    }

    /// `v` as a key of column `c`, for bound `side`: Some(None) when the bound excludes
    /// nothing, None when no row can match or the value does not convert.
    fn key(&self, c: usize, v: &Expr, side: Side) -> Result<Option<Option<Vec<u8>>>, ()> {
        let value = (self.constant)(v).ok_or(())?;
        let ty = &self.table.columns.get(c).ok_or(())?.ty;
        match key_conv(ty, &value, side) {
            KeyConv::Empty => Ok(None),
            KeyConv::Unbounded => Ok(Some(None)),
            KeyConv::Unusable => Err(()),
            KeyConv::At(v, _) => {
                let mut b = Vec::new();
                encode_value(&mut b, &v);
                Ok(Some(Some(b)))
            }
        }
    }

    fn eq(&self, c: usize, v: &Expr) -> Option<f64> {
        let col = self.column(c)?;
        let rows = self.rows().max(1.0);
        match self.key(c, v, Side::Eq).ok()? {
            None => Some(0.0),
            Some(None) => Some(1.0 / self.ndv(c)),
            Some(Some(k)) => Some((col.eq_rows(&k, rows) / rows).min(1.0)),
        }
    }

    /// A range bound as a key (None when the value does not convert).
    fn bound(&self, c: usize, b: Option<(&Expr, bool)>, side: Side) -> Option<KeyBound> {
        let Some((e, inclusive)) = b else { return Some(KeyBound::Open) };
        Some(match self.key(c, e, side).ok()? {
            None => KeyBound::Nothing,
            Some(None) => KeyBound::Open,
            Some(Some(k)) => KeyBound::At(k, inclusive),
        })
    }

    fn range(&self, c: usize, lower: Option<(&Expr, bool)>, upper: Option<(&Expr, bool)>) -> Option<f64> {
        let col = self.column(c)?;
        let rows = self.rows().max(1.0);
        let (lo, hi) = (self.bound(c, lower, Side::Lower)?, self.bound(c, upper, Side::Upper)?);
        if matches!(lo, KeyBound::Nothing) || matches!(hi, KeyBound::Nothing) {
            return Some(0.0);
        }
        let n = col.range_rows(lo.key(), hi.key());
        Some((n / rows).clamp(0.0, 1.0))
    }

    /// The share of rows `column LIKE pattern` keeps, judged on the values the statistics
    /// hold: the top-N values with their counts, and the histogram's bucket bounds as a
    /// sample of the rest (TPC-H Q9's `p_name LIKE '%green%'` keeps ~5%, not the 80% a
    /// fixed guess gives). At least half a sampled value's share when none matches. None
    /// when the pattern is not a constant string or the column has no such statistics.
    fn like_share(&self, c: usize, pattern: &Expr, escape: char) -> Option<f64> {
        let Value::Bytes(p) = (self.constant)(pattern)? else { return None };
        let escape = u8::try_from(u32::from(escape)).ok()?;
        let col = self.column(c)?;
        let matches = |key: &[u8]| -> Option<bool> {
            let mut k = key;
            match strata_codec::memcmp::decode_value(&mut k).ok()? {
                Value::Bytes(b) => Some(crate::expr::like_match(&b, &p, escape)),
                _ => None,
            }
        };
        let mut kept = 0.0;
        let mut sampled = 0.0;
        for t in &col.top_n {
            sampled += t.count as f64;
            if matches(&t.value)? {
                kept += t.count as f64;
            }
        }
        let bucket_rows = col.buckets.last().map_or(0, |b| b.count) as f64;
        let bounds = col.buckets.len() * 2;
        if bounds > 0 {
            let mut hits = 0usize;
            for b in &col.buckets {
                hits += usize::from(matches(&b.lower)?) + usize::from(matches(&b.upper)?);
            }
            kept += bucket_rows * hits as f64 / bounds as f64;
            sampled += bucket_rows;
        }
        if sampled <= 0.0 {
            return None;
        }
        let rows = self.rows().max(1.0);
        let floor = sampled / rows * 0.5 / (col.top_n.len() + bounds).max(1) as f64;
        Some((kept / rows).max(floor).min(1.0))
    }

    /// The share of rows `e` keeps.
    pub fn selectivity(&self, e: &Expr) -> f64 {
        self.try_selectivity(e).unwrap_or(DEFAULT_SELECTIVITY).clamp(0.0, 1.0)
    }

    fn try_selectivity(&self, e: &Expr) -> Option<f64> {
        let column = |e: &Expr| match e {
            Expr::Column(c) => Some(*c),
            Expr::Cast(x, _) => match **x {
                Expr::Column(c) => Some(c),
                _ => None,
            },
            _ => None,
        };
        let rows = self.rows().max(1.0);
        match e {
            Expr::Binary(BinOp::And, a, b) => Some(self.selectivity(a) * self.selectivity(b)),
            Expr::Binary(BinOp::Or, a, b) => {
                let (x, y) = (self.selectivity(a), self.selectivity(b));
                Some(x + y - x * y)
            }
            Expr::Unary(UnaryOp::Not, a) => Some(1.0 - self.selectivity(a)),
            Expr::Binary(op, a, b) => {
                let (c, v, op) = match (column(a), column(b)) {
                    (Some(c), None) => (c, &**b, *op),
                    (None, Some(c)) => (c, &**a, crate::physical::flip(*op)),
                    _ => return None,
                };
                match op {
                    BinOp::Eq | BinOp::NullSafeEq => self.eq(c, v),
                    BinOp::NotEq => self.eq(c, v).map(|s| {
                        let nulls = self.column(c).map_or(0.0, |s| s.nulls as f64) / rows;
                        (1.0 - s - nulls).max(0.0)
                    }),
                    BinOp::Lt => self.range(c, None, Some((v, false))),
                    BinOp::LtEq => self.range(c, None, Some((v, true))),
                    BinOp::Gt => self.range(c, Some((v, false)), None),
                    BinOp::GtEq => self.range(c, Some((v, true)), None),
                    _ => None,
                }
            }
            Expr::Between(x, lo, hi, negated) => {
                let s = self.range(column(x)?, Some((lo, true)), Some((hi, true)))?;
                Some(if *negated { 1.0 - s } else { s })
            }
            Expr::InList(x, list, negated) => {
                let c = column(x)?;
                let s = list.iter().map(|v| self.eq(c, v)).sum::<Option<f64>>()?.min(1.0);
                Some(if *negated { 1.0 - s } else { s })
            }
            Expr::IsNull(x, negated) => {
                let s = self.column(column(x)?)?.nulls as f64 / rows;
                Some(if *negated { 1.0 - s } else { s })
            }
            Expr::Like(x, pattern, escape, negated) => {
                let s = column(x).and_then(|c| self.like_share(c, pattern, *escape)).unwrap_or(self.like);
                Some(if *negated { 1.0 - s } else { s })
            }
            _ => None,
        }
    }
}

/// A range bound converted to a column's key.
enum KeyBound {
    /// Excludes nothing.
    Open,
    /// A key, inclusive or not.
    At(Vec<u8>, bool),
    /// No row can pass it.
    Nothing,
}

impl KeyBound {
    fn key(&self) -> Option<(&[u8], bool)> {
        match self {
            KeyBound::At(k, inclusive) => Some((k.as_slice(), *inclusive)),
            _ => None,
        }
    }
}

/// Adds up to `limit` rows of `table` from `[from, end)` at `txn`'s snapshot to
/// `collector` (decoding into `row`); returns the key just after the last one read, or
/// None if there was none.
async fn add_rows(
    txn: &strata_txn::Transaction,
    table: &TableInfo,
    from: &[u8],
    end: &[u8],
    limit: usize,
    collector: &mut Collector,
    row: &mut Vec<Value>,
) -> Result<Option<Vec<u8>>> {
    let batch = txn.scan_once(from, end, limit).await?;
    let Some((last, _)) = batch.last() else { return Ok(None) };
    let mut after = last.clone();
    after.push(0);
    for (_, v) in &batch {
        decode_row_into(table, v, row)?;
        collector.add(row);
    }
    Ok(Some(after))
}

impl crate::session::Engine {
    /// ANALYZE TABLE: gathers `table`'s statistics from a snapshot of its rows (one pass,
    /// in bounded memory) and stores them.
    pub async fn analyze_table(&self, table: &TableInfo) -> Result<Arc<TableStats>> {
        let modified = self.catalog.modifications.get(table.id);
        let txn = self.begin_internal().await?;
        let prefix = row_prefix(table.table_id());
        let end = prefix_end(&prefix);
        let mut start = prefix;
        let mut collector = Collector::new(table);
        let mut row = Vec::new();
        loop {
            crate::interrupt::checkpoint().await?;
            match add_rows(&txn, table, &start, &end, 4096, &mut collector, &mut row).await? {
                Some(after) => start = after,
                None => break,
            }
        }
        let _ = txn.rollback().await;
        let at = crate::session::now().format_datetime(0);
        self.store_stats(collector.finish(table.id, at), modified).await
    }

    /// Stores statistics gathered while `modified` rows were counted against the table.
    async fn store_stats(&self, stats: TableStats, modified: u64) -> Result<Arc<TableStats>> {
        let id = stats.table_id;
        self.catalog.put_stats(stats, modified).await?;
        self.catalog.stats(id).ok_or_else(|| Error::internal("statistics vanished after ANALYZE"))
    }

    /// Gathers `table`'s statistics from about `target` rows read in short runs from
    /// random places of the table (`Client::sample_pieces`: byte offsets drawn over what
    /// the store holds, the pieces they fall in found from its table files' indexes
    /// without reading the rows in between), so the cost does not grow with the table.
    /// The row count is the table's bytes times the rows per byte of a spread of those
    /// pieces read whole; NDV is estimated with Duj1 (`duj1`). Falls back to reading every
    /// row where the store cannot tell where its bytes are (an in-memory store, or a table
    /// still all in memory), or when the table turns out to be small.
    pub async fn analyze_table_sampled(&self, table: &TableInfo, target: usize) -> Result<Arc<TableStats>> {
        let target = target.clamp(SAMPLE_RUN_ROWS, MAX_SAMPLE_ROWS);
        let modified = self.catalog.modifications.get(table.id);
        let prefix = row_prefix(table.table_id());
        let end = prefix_end(&prefix);
        let points = target.div_ceil(SAMPLE_RUN_ROWS);
        let seed =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64);
        let Some((pieces, total)) = self.client.sample_pieces(&prefix, &end, points, seed).await? else {
            return self.analyze_table(table).await;
        };
        // Fewer pieces than a quarter of the places asked for: the table is a few blocks,
        // cheaper read whole (and then exact).
        if pieces.is_empty() || pieces.len() < points / 4 {
            return self.analyze_table(table).await;
        }
        let txn = self.begin_internal().await?;
        // The row count: a piece was drawn with a chance in proportion to its bytes, so
        // the table's bytes times a spread of pieces' mean rows per byte (Hansen and
        // Hurwitz's estimator) estimates the rows.
        let (mut per_byte, mut counted) = (0f64, 0u32);
        for piece in pieces.iter().step_by((pieces.len() / COUNT_PIECES).max(1)) {
            if piece.bytes > 0 {
                let rows = txn.scan_once(&piece.start, &piece.end, COUNT_PIECE_ROWS).await?.len();
                per_byte += rows as f64 / piece.bytes as f64;
                counted += 1;
            }
        }
        let mut collector = Collector::with_capacity(table, target);
        let mut row = Vec::new();
        let mut resume = prefix;
        for (n, piece) in pieces.iter().enumerate() {
            if n % 64 == 0 {
                crate::interrupt::checkpoint().await?;
            }
            // A run per offset that fell in the piece, one after another; a run that would
            // overlap the one before continues where it stopped.
            let from = if piece.start > resume { &piece.start } else { &resume };
            let runs = SAMPLE_RUN_ROWS * piece.hits as usize;
            if let Some(after) = add_rows(&txn, table, from, &end, runs, &mut collector, &mut row).await? {
                resume = after;
            }
        }
        let _ = txn.rollback().await;
        if counted == 0 {
            return self.analyze_table(table).await;
        }
        let rows = (total as f64 * per_byte / f64::from(counted)).round() as u64;
        let at = crate::session::now().format_datetime(0);
        self.store_stats(collector.finish_sampled(table.id, at, rows), modified).await
    }

    /// `table`'s rows now, counting no further than `limit`.
    async fn count_rows_upto(&self, table: &TableInfo, limit: u64) -> Result<u64> {
        let txn = self.begin_internal().await?;
        let prefix = row_prefix(table.table_id());
        let rows = txn.scan_once(&prefix, &prefix_end(&prefix), usize::try_from(limit).unwrap_or(usize::MAX)).await;
        let _ = txn.rollback().await;
        Ok(rows?.len() as u64)
    }

    /// One round of auto-analyze: analyzes every table whose rows written since its last
    /// analysis pass `ratio` of its rows (and `AUTO_ANALYZE_MIN_ROWS`), unless it is still
    /// being loaded (`AnalyzePacing`). Returns the tables it analyzed (`db.table`) and how
    /// long each took.
    pub async fn auto_analyze(
        &self,
        ratio: f64,
        pacing: &mut AnalyzePacing,
    ) -> Result<Vec<(String, std::time::Duration)>> {
        let mut done = Vec::new();
        let counted = self.catalog.modifications.all();
        pacing.retain(&counted);
        let now = std::time::Instant::now();
        for (id, modified) in counted {
            let Some(table) = self.catalog.schema().all_tables().into_iter().find(|t| t.id == id) else { continue };
            let stats = self.catalog.stats(id);
            let needed = needs_analyze(stats.as_deref(), modified, ratio);
            let rows = stats.as_ref().map_or(0, |s| s.row_count) + modified;
            if pacing.hold_back(id, modified, rows, needed, now) || !needed {
                continue;
            }
            // As in TiDB, a table of fewer than AUTO_ANALYZE_MIN_ROWS rows is not analyzed
            // again (its plans cannot go far wrong), however often it is written: TPC-C's
            // 40 district rows were analyzed every round, and each analysis made every
            // session plan its cached statements again. The rows are counted, not
            // remembered: the table may have grown since it was analyzed.
            if stats.as_ref().is_some_and(|s| s.row_count < AUTO_ANALYZE_MIN_ROWS)
                && self.count_rows_upto(&table, AUTO_ANALYZE_MIN_ROWS).await? < AUTO_ANALYZE_MIN_ROWS
            {
                self.catalog.modifications.take(id, modified);
                pacing.started_over(id);
                continue;
            }
            let started = std::time::Instant::now();
            // Sampled by the rows it holds now as far as we know (counted last time plus
            // written since), not by the last count alone: a table analyzed small during
            // its load, or never, would otherwise be read whole once more after it grew.
            // The sampled analysis reads a small table whole anyway.
            if rows >= AUTO_SAMPLE_MIN_ROWS {
                self.analyze_table_sampled(&table, SAMPLE_ROWS).await?;
            } else {
                self.analyze_table(&table).await?;
            }
            pacing.started_over(id);
            done.push((format!("{}.{}", table.db, table.name), started.elapsed()));
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{ColumnInfo, IndexInfo, IndexState};

    fn table() -> TableInfo {
        let col = |id: u32, name: &str, nullable: bool| ColumnInfo::test_int(id, name, 8, nullable);
        TableInfo {
            id: 7,
            db: "d".into(),
            name: "t".into(),
            columns: vec![col(1, "id", false), col(2, "k", true), col(3, "u", false)],
            pk: Some(vec![0]),
            indexes: vec![IndexInfo {
                id: 1,
                name: "k_u".into(),
                columns: vec![1, 2],
                unique: false,
                state: IndexState::Public,
            }],
            next_column_id: 4,
            next_index_id: 2,
            checks: vec![],
            columnar_replica: None,
            cached: false,
        }
    }

    fn enc(v: i64) -> Vec<u8> {
        let mut b = Vec::new();
        encode_value(&mut b, &Value::Int(v));
        b
    }

    /// `rows` rows: id 0.., k = id % 100 except every tenth row NULL and a quarter of
    /// them 7, u = id (unique).
    fn analyzed(rows: i64) -> TableStats {
        let t = table();
        let mut c = Collector::new(&t);
        for id in 0..rows {
            let k = if id % 10 == 0 {
                Value::Null
            } else if id % 4 == 1 {
                Value::Int(7)
            } else {
                Value::Int(id % 100)
            };
            c.add(&[Value::Int(id), k, Value::Int(id)]);
        }
        c.finish(t.id, "2026-11-24 00:00:00".into())
    }

    fn assert_near(got: f64, want: f64, tolerance: f64) {
        assert!((got - want).abs() <= want * tolerance, "estimate {got}, actual {want}");
    }

    #[test]
    fn a_small_table_is_counted_exactly() {
        let s = analyzed(2_000);
        assert_eq!(s.row_count, 2_000);
        let id = s.column(1).expect("present");
        assert_eq!((id.ndv, id.nulls), (2_000, 0));
        let k = s.column(2).expect("present");
        assert_eq!(k.nulls, 200);
        // k is 7 or id % 100 for ids not ≡ 1 (mod 4) and not multiples of 10: the 65 values
        // below 100 that are neither (7 among them).
        assert_eq!(k.ndv, 65);
        assert_eq!(k.top_n[0].value, enc(7), "the most frequent value comes first");
        assert_eq!(s.index(0).expect("present").prefix_ndv, vec![2_000]);
        assert_eq!(s.index(1).expect("present").prefix_ndv, vec![66, 2_000], "NULL counts as one prefix value");
        // Equality through the top-N, ranges through the histogram.
        let sevens = (0..2_000).filter(|i| i % 10 != 0 && i % 4 == 1).count()
            + (0..2_000).filter(|i| i % 10 != 0 && i % 4 != 1 && i % 100 == 7).count();
        assert_near(k.eq_rows(&enc(7), 2_000.0), sevens as f64, 0.01);
        assert_near(id.range_rows(Some((&enc(100), true)), Some((&enc(300), false))), 200.0, 0.05);
        assert_near(id.range_rows(None, Some((&enc(1_000), false))), 1_000.0, 0.05);
        assert_eq!(id.range_rows(Some((&enc(5_000), false)), None), 0.0);
    }

    #[test]
    fn a_large_table_is_estimated_from_sketches_and_a_sample() {
        let s = analyzed(200_000);
        assert_eq!(s.row_count, 200_000);
        let id = s.column(1).expect("present");
        assert_near(id.ndv as f64, 200_000.0, 0.05);
        let k = s.column(2).expect("present");
        assert_eq!(k.nulls, 20_000);
        assert_near(k.ndv as f64, 65.0, 0.05);
        assert_near(s.index(1).expect("present").prefix_ndv[1] as f64, 200_000.0, 0.05);
        // A uniform column's range estimates hold within a few percent.
        assert_near(id.range_rows(Some((&enc(50_000), true)), Some((&enc(150_000), false))), 100_000.0, 0.05);
        let eq = id.eq_rows(&enc(12_345), 200_000.0);
        assert!((1.0..=3.0).contains(&eq), "a unique value estimates about one row, got {eq}");
        // A quarter of the ids are ≡ 1 (mod 4), and one in a hundred ends in 07.
        assert_near(k.eq_rows(&enc(7), 200_000.0), 200_000.0 * 0.26, 0.1);
    }

    #[test]
    fn duj1_estimates_distinct_values_from_a_sample() {
        // Every sampled value unique: the column is taken to be.
        assert_eq!(duj1(1_000, 1_000, 1_000, 1_000_000), 1_000_000);
        // Every value seen more than once: the sample has seen them all.
        assert_eq!(duj1(1_000, 20, 0, 1_000_000), 20);
        // A sample as large as the table counts exactly.
        assert_eq!(duj1(500, 120, 30, 500), 120);
        assert_eq!(duj1(0, 0, 0, 100), 0);
        // Between: more than seen, never more than the rows.
        let mid = duj1(10_000, 6_000, 4_000, 400_000);
        assert!((6_000..=400_000).contains(&mid), "{mid}");
        assert_eq!(distinct_and_once(&[1, 1, 2, 3, 3, 3, 4]), (4, 2));
    }

    #[test]
    fn a_sampled_table_is_scaled_and_estimated() {
        // A random tenth of analyzed()'s rows of a 200,000-row table, told the total.
        let t = table();
        let mut c = Collector::with_capacity(&t, 50_000);
        let mut rng = 0x1234_5678_u64;
        for id in 0..200_000i64 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            if !rng.is_multiple_of(10) {
                continue;
            }
            let k = if id % 10 == 0 {
                Value::Null
            } else if id % 4 == 1 {
                Value::Int(7)
            } else {
                Value::Int(id % 100)
            };
            c.add(&[Value::Int(id), k, Value::Int(id)]);
        }
        let s = c.finish_sampled(t.id, "2026-11-28 00:00:00".into(), 200_000);
        assert_eq!(s.row_count, 200_000);
        let id = s.column(1).expect("present");
        assert_eq!(id.ndv, 200_000, "unique in the sample: unique");
        let k = s.column(2).expect("present");
        assert_near(k.nulls as f64, 20_000.0, 0.1);
        assert_eq!(k.ndv, 65, "every value seen many times");
        assert_eq!(s.index(0).expect("present").prefix_ndv, vec![200_000]);
        let k_u = &s.index(1).expect("present").prefix_ndv;
        assert_eq!(k_u[0], 66);
        assert_eq!(k_u[1], 200_000);
        assert_near(id.range_rows(Some((&enc(50_000), true)), Some((&enc(150_000), false))), 100_000.0, 0.05);
        assert_near(k.eq_rows(&enc(7), 200_000.0), 200_000.0 * 0.26, 0.1);
    }

    #[test]
    fn sketch_hashes_separate_lengths_orders_and_near_values() {
        // Byte strings that differ only in length or in one late byte count apart.
        let mut hll = Hll::new();
        let mut n = 0;
        for len in 0..40usize {
            for last in 0..=255u8 {
                let mut b = vec![0u8; len];
                b.push(last);
                hll.add(hash(&b));
                n += 1;
            }
        }
        assert_near(hll.estimate(), n as f64, 0.04);
        assert_ne!(hash(&[0]), hash(&[0, 0]), "trailing zero bytes change the hash");
        // Index prefixes: the same two column hashes in either order are two keys.
        let (a, b) = (hash(b"a"), hash(b"b"));
        assert_ne!(combine(combine(0, a), b), combine(combine(0, b), a));
        assert_ne!(combine(0, NULL_HASH), combine(combine(0, NULL_HASH), NULL_HASH));
    }

    #[test]
    fn statistics_round_trip_through_json() {
        let s = analyzed(500);
        let text = serde_json::to_string(&s).expect("present");
        let back: TableStats = serde_json::from_str(&text).expect("present");
        assert_eq!(back, s);
    }

    #[test]
    fn auto_analyze_waits_while_a_table_is_loading_but_not_forever() {
        let t0 = std::time::Instant::now();
        let round = |n: u64| t0 + std::time::Duration::from_secs(10 * n);
        let mut p = AnalyzePacing::default();
        // A table loaded over three rounds: its analysis waits while it grows...
        assert!(p.hold_back(1, 50_000, 50_000, true, round(1)), "first seen while loading");
        assert!(p.hold_back(1, 120_000, 120_000, true, round(2)));
        // ...and goes ahead in the round after the load.
        assert!(!p.hold_back(1, 120_000, 120_000, true, round(3)));
        p.started_over(1);
        // A few writes to an analyzed table are no load; a table that needs no analysis
        // never waits.
        assert!(!p.hold_back(1, 5_000, 125_000, true, round(4)));
        assert!(!p.hold_back(2, 900, 900, false, round(4)));
        // Steady heavy writes: the analysis waits at most a minute from the first round
        // it was held back.
        let mut waited = 0;
        while p.hold_back(3, 30_000 * (waited + 1), 100_000, true, round(5 + waited)) {
            waited += 1;
        }
        assert_eq!(waited, 6, "held back for 60 s");
        // Dropped tables are forgotten: seen again, the table counts as new.
        p.retain(&[(1, 0)]);
        assert!(p.hold_back(3, 30_000, 100_000, true, round(20)));
    }

    #[test]
    fn auto_analyze_waits_for_enough_modified_rows() {
        let s = analyzed(10_000);
        assert!(!needs_analyze(None, 999, 0.5), "below the minimum");
        assert!(needs_analyze(None, 1_000, 0.5), "never analyzed");
        assert!(!needs_analyze(Some(&s), 4_000, 0.5));
        assert!(needs_analyze(Some(&s), 5_001, 0.5));
        assert!(!needs_analyze(Some(&s), 50_000, 0.0), "ratio 0 turns it off");
    }
}
