//! Table scans as streams: a `ScanStream` turns an access path into segments (keys to get,
//! row-key ranges, index-entry ranges) when it is first pulled, then reads one batch per
//! pull, so a scan holds one batch whatever the table's size and stops as soon as it has
//! the rows a pushed-down LIMIT asks for.
//!
//! ```text
//!  Access::Points(..)     ──► Keys(row keys)                 batch_get, MAX_BATCH at a time
//!  Access::Prefixes(..)   ──► Rows{start,end} per tuple      scan, 256 rows doubling to 16 Ki
//!  Access::Full / PkRange ──► Rows{start,end}
//!  Access::Index(i, ..)   ──► Index{start,end}               entries, then their rows by handle
//! ```
//!
//! With `lock`, rows are read at their latest committed version under pessimistic locks
//! (current read), and only as many candidates as rows are still wanted are locked.

use std::collections::VecDeque;
use std::sync::Arc;

use strata_codec::keys::{prefix_end, row_prefix};
use strata_common::{Result, Value};

use super::{count_of, ExecCtx, TableRow};
use crate::catalog::TableInfo;
use crate::context::{count_reads, row_size, Charge, Read};
use crate::expr::{Expr, Row, SubqueryValues};
use crate::interrupt::checkpoint;
use crate::keyconv::{key_conv, KeyConv, Side};
use crate::plan::{Access, KeyRange, Plan, Residual};
use crate::table::{decode_masked, handle_from_index_entry, index_value_prefix, pk_prefix, row_key};
use crate::types::ColumnType;
use crate::{FastMap as HashMap, FastSet as HashSet};

/// Rows read from the store per request at first; each further request of the same range
/// reads twice as many, up to `MAX_BATCH`. A scan that only needs a few rows (`LIMIT`,
/// `EXISTS`) stops after its first batch; one that reads everything makes few requests.
const FIRST_BATCH: usize = 256;
/// The fewest entries a range's first request reads (`ScanStream::request`).
const SMALL_FIRST_REQUEST: usize = 4;
const MAX_BATCH: usize = 16 * 1024;

/// What a scan still has to read.
enum Segment {
    /// Row keys read by point lookups.
    Keys(Vec<Vec<u8>>),
    /// A range of row keys.
    Rows { start: Vec<u8>, end: Vec<u8> },
    /// A range of entries of `TableInfo::indexes[index]` (`base`: the length of the index's
    /// key prefix); each batch's rows are fetched by handle.
    Index { index: usize, base: usize, start: Vec<u8>, end: Vec<u8> },
}

/// One batch of a scan: rows with their keys, charged to the statement.
pub struct ScanBatch {
    /// The rows.
    pub rows: Vec<TableRow>,
    /// What they are charged.
    pub charge: Charge,
}

/// A table scan read batch by batch (see the module comment).
pub struct ScanStream<'p> {
    table: &'p Arc<TableInfo>,
    access: &'p Access,
    filter: Option<&'p Expr>,
    lock: bool,
    limit_expr: Option<&'p Expr>,
    /// Rows wanted at most (set when the segments are planned).
    limit: usize,
    /// Rows kept so far.
    kept: usize,
    /// Reading the whole table (counted as Handler_read_rnd_next, not _next).
    full_scan: bool,
    /// None until the first pull.
    segments: Option<VecDeque<Segment>>,
    /// Rows to ask the store for in the current segment's next request.
    batch: usize,
    /// Point-get keys held while they wait.
    key_charge: Charge,
    /// The columns to decode (None: all); see `Plan::Scan::columns`.
    columns: Option<&'p [bool]>,
}

impl<'p> ScanStream<'p> {
    /// A scan of `table` through `access`, keeping rows that satisfy `filter`, at most
    /// `limit` (an expression of the statement's parameters) of them.
    pub fn new(
        table: &'p Arc<TableInfo>,
        access: &'p Access,
        filter: Option<&'p Expr>,
        lock: bool,
        limit: Option<&'p Expr>,
    ) -> ScanStream<'p> {
        ScanStream {
            table,
            access,
            filter,
            lock,
            limit_expr: limit,
            limit: usize::MAX,
            kept: 0,
            full_scan: false,
            segments: None,
            batch: FIRST_BATCH,
            key_charge: Charge::new(),
            columns: None,
        }
    }

    /// The same scan decoding only the columns `columns` marks (the others NULL).
    pub fn with_columns(mut self, columns: Option<&'p [bool]>) -> ScanStream<'p> {
        self.columns = columns;
        self
    }

    /// The same scan with a limit already counted.
    fn limited(mut self, limit: Option<usize>) -> ScanStream<'p> {
        self.limit = limit.unwrap_or(usize::MAX);
        self
    }

    fn full(&self) -> bool {
        self.kept >= self.limit
    }

    /// The next non-empty batch, or None when the scan is done.
    pub async fn next(&mut self, ctx: &mut ExecCtx<'_>) -> Result<Option<ScanBatch>> {
        if self.segments.is_none() {
            if let Some(n) = count_of(ctx, self.limit_expr)? {
                self.limit = self.limit.min(n);
            }
            let segments = self.plan(ctx)?;
            self.segments = Some(segments);
        }
        let mut out = ScanBatch { rows: Vec::new(), charge: Charge::new() };
        while !self.full() {
            let Some(segment) = self.segments.as_mut().and_then(|s| s.pop_front()) else { break };
            // A range's first request is its lookup (Handler_read_key); a full scan has none.
            if self.batch == FIRST_BATCH && !self.full_scan && !matches!(segment, Segment::Keys(_)) {
                count_reads(Read::Key, 1);
            }
            let rest = match segment {
                Segment::Keys(mut keys) => {
                    let rest = keys.split_off(keys.len().min(MAX_BATCH));
                    self.fetch(ctx, keys, &mut out).await?;
                    (!rest.is_empty()).then_some(Segment::Keys(rest))
                }
                Segment::Rows { mut start, end } => {
                    let more = self.range_batch(ctx, &mut start, &end, &mut out).await?;
                    more.then_some(Segment::Rows { start, end })
                }
                Segment::Index { index, base, mut start, end } => {
                    let more = self.index_batch(ctx, index, base, &mut start, &end, &mut out).await?;
                    more.then_some(Segment::Index { index, base, start, end })
                }
            };
            match rest {
                Some(s) => {
                    self.batch = (self.batch * 2).min(MAX_BATCH);
                    if let Some(segments) = self.segments.as_mut() {
                        segments.push_front(s);
                    }
                }
                None => self.batch = FIRST_BATCH,
            }
            if !out.rows.is_empty() {
                return Ok(Some(out));
            }
        }
        self.segments = Some(VecDeque::new());
        self.key_charge = Charge::new();
        Ok((!out.rows.is_empty()).then_some(out))
    }

    /// The segments an access path reads, in order.
    fn plan(&mut self, ctx: &ExecCtx) -> Result<VecDeque<Segment>> {
        let table = self.table;
        let mut out = VecDeque::new();
        if self.limit == 0 {
            return Ok(out);
        }
        // A point get's keys are made once: their values tell whether they can be looked up.
        let (access, keys) = match self.access {
            Access::Points(points) => match point_keys(ctx, table, points)? {
                Some(keys) => (self.access, keys),
                None => (&Access::Full, Vec::new()),
            },
            other if access_unusable(ctx, other, table)? => (&Access::Full, Vec::new()),
            other => (other, Vec::new()),
        };
        match access {
            Access::Points(_) => {
                self.key_charge.add(keys.iter().map(|k| k.len() + 24).sum())?;
                count_reads(Read::Key, keys.len());
                if !keys.is_empty() {
                    out.push_back(Segment::Keys(keys));
                }
            }
            Access::Prefixes(tuples) => {
                let pk = table.pk.clone().unwrap_or_default();
                let mut seen = HashSet::default();
                for t in tuples {
                    let EqKey::Values(vals) = eq_values(ctx, t, &pk, table)? else { continue };
                    let p = pk_prefix(table, &vals);
                    if !seen.insert(p.clone()) {
                        continue;
                    }
                    self.key_charge.add(2 * p.len() + 48)?;
                    let end = prefix_end(&p);
                    out.push_back(Segment::Rows { start: p, end });
                }
            }
            Access::Full => {
                let p = row_prefix(table.table_id());
                self.full_scan = true;
                let end = prefix_end(&p);
                out.push_back(Segment::Rows { start: p, end });
            }
            Access::PkRange(r) => {
                let pk = table.pk.clone().unwrap_or_default();
                let EqKey::Values(vals) = eq_values(ctx, &r.eq, &pk, table)? else { return Ok(out) };
                let next = pk.get(r.eq.len()).map(|c| &table.columns[*c].ty);
                let Some(b) = range_bounds(ctx, pk_prefix(table, &vals), r, next)? else {
                    return Ok(out);
                };
                // Primary key columns hold no NULL.
                self.narrow_filter(r, b.decide(r, false));
                out.push_back(Segment::Rows { start: b.start, end: b.end });
            }
            Access::Index(i, r) => {
                let index = &table.indexes[*i];
                let EqKey::Values(vals) = eq_values(ctx, &r.eq, &index.columns, table)? else { return Ok(out) };
                let next = index.columns.get(r.eq.len()).map(|c| &table.columns[*c]);
                let base = index_value_prefix(table, index, &[]).len();
                let Some(b) = range_bounds(ctx, index_value_prefix(table, index, &vals), r, next.map(|c| &c.ty))?
                else {
                    return Ok(out);
                };
                // A locking read takes each row's latest version, whose indexed values may
                // have moved out of the range the index entry was found in.
                self.narrow_filter(r, !self.lock && b.decide(r, next.is_some_and(|c| c.nullable)));
                out.push_back(Segment::Index { index: *i, base, start: b.start, end: b.end });
            }
        }
        Ok(out)
    }

    /// Checks rows against `range`'s residual instead of the whole filter when the key
    /// range decides the rest (`decided`).
    fn narrow_filter(&mut self, range: &'p KeyRange, decided: bool) {
        if let (true, Residual::Rest(rest)) = (decided, &range.residual) {
            self.filter = rest.as_ref();
        }
    }

    fn matches(&self, ctx: &ExecCtx, row: &Row) -> Result<bool> {
        let empty = SubqueryValues::default();
        self.filter.map_or(Ok(true), |f| f.eval_pred(row, &ctx.eval_ctx(&empty)))
    }

    /// Decodes the row stored at `key` and keeps it if it matches the filter.
    fn keep(&mut self, ctx: &ExecCtx, out: &mut ScanBatch, key: Vec<u8>, bytes: &[u8]) -> Result<()> {
        let (row, row_id) = decode_masked(self.table, bytes, self.columns)?;
        if !self.matches(ctx, &row)? {
            return Ok(());
        }
        out.charge.add(row_size(&row) + key.len() + std::mem::size_of::<TableRow>())?;
        out.rows.push(TableRow { key, row, row_id });
        self.kept += 1;
        Ok(())
    }

    /// The in-memory copy of the scanned table this read may use instead of the store:
    /// the table is cached (`crate::cached_table`), the read does not lock, and the
    /// transaction has not written the table itself.
    fn cached_copy(&self, ctx: &ExecCtx<'_>) -> Option<Arc<crate::cached_table::Snapshot>> {
        if self.lock {
            return None;
        }
        let cached = crate::context::cached_tables()?;
        if !cached.readable_in(self.table.id, ctx.txn) {
            return None;
        }
        cached.copy_for(self.table.id, ctx.txn.read_ts())
    }

    /// How many entries the next request of a range reads: the batch, except that a
    /// range's first request reads only a little more than the rows the scan still wants
    /// when it wants few (`... ORDER BY pk LIMIT 1 [FOR UPDATE]`, TPC-C's Delivery, read
    /// 256 entries, decoded and filtered them all, to use one); if the filter rejects them,
    /// the next request reads a doubled batch as before.
    fn request(&self) -> usize {
        let room = self.limit.saturating_sub(self.kept);
        if self.batch == FIRST_BATCH && room < FIRST_BATCH {
            return room.saturating_add(room / 2).clamp(SMALL_FIRST_REQUEST, FIRST_BATCH);
        }
        self.batch
    }

    /// Up to `want` of the key-value pairs in `[start, end)` (locked for a current read),
    /// moving `start` past them.
    async fn read(
        &self,
        ctx: &mut ExecCtx<'_>,
        start: &mut Vec<u8>,
        end: &[u8],
        want: usize,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        checkpoint().await?;
        let pairs = if self.lock {
            ctx.txn.scan_for_update(start, end, want).await?
        } else if let Some(copy) = self.cached_copy(ctx) {
            copy.scan(start, end, want)
        } else {
            ctx.txn.scan(start, end, want).await?
        };
        if let Some((last, _)) = pairs.last() {
            *start = last.clone();
            start.push(0);
        }
        Ok(pairs)
    }

    /// Reads one batch of `[start, end)`, moving `start` past it. True when the range may
    /// hold more rows and the scan wants them.
    async fn range_batch(
        &mut self,
        ctx: &mut ExecCtx<'_>,
        start: &mut Vec<u8>,
        end: &[u8],
        out: &mut ScanBatch,
    ) -> Result<bool> {
        let batch = self.request();
        let pairs = self.read(ctx, start, end, batch).await?;
        let n = pairs.len();
        count_reads(if self.full_scan { Read::RndNext } else { Read::Next }, n);
        if self.lock {
            // Current read: lock the rows that match as last committed, then re-check the
            // filter on the versions read under the lock.
            let mut keys = Vec::new();
            for (k, v) in pairs {
                let (row, _) = decode_masked(self.table, &v, self.columns)?;
                if self.matches(ctx, &row)? {
                    keys.push(k);
                }
            }
            self.lock_rows(ctx, keys, out).await?;
        } else {
            for (k, v) in pairs {
                if self.full() {
                    break;
                }
                self.keep(ctx, out, k, &v)?;
            }
        }
        Ok(n >= batch && !self.full())
    }

    /// Reads one batch of index entries in `[start, end)` and then their rows.
    async fn index_batch(
        &mut self,
        ctx: &mut ExecCtx<'_>,
        index: usize,
        base: usize,
        start: &mut Vec<u8>,
        end: &[u8],
        out: &mut ScanBatch,
    ) -> Result<bool> {
        let batch = self.request();
        let entries = self.read(ctx, start, end, batch).await?;
        let n = entries.len();
        count_reads(Read::Next, n);
        let info = &self.table.indexes[index];
        let mut keys = Vec::with_capacity(n);
        for (k, v) in &entries {
            let handle = handle_from_index_entry(info, base, k, v)?;
            keys.push(row_key(self.table, &handle));
        }
        drop(entries);
        self.fetch(ctx, keys, out).await?;
        Ok(n >= batch && !self.full())
    }

    /// Reads the rows at `keys` (in order; missing ones skipped).
    async fn fetch(&mut self, ctx: &mut ExecCtx<'_>, keys: Vec<Vec<u8>>, out: &mut ScanBatch) -> Result<()> {
        if self.lock {
            return self.lock_rows(ctx, keys, out).await;
        }
        let copy = self.cached_copy(ctx);
        for chunk in keys.chunks(MAX_BATCH) {
            checkpoint().await?;
            let vals = match &copy {
                Some(copy) => chunk.iter().map(|k| copy.get(k)).collect(),
                None => match ctx.prefetched_values(self.table.id, chunk) {
                    Some(vals) => vals,
                    None => ctx.txn.batch_get(chunk).await?,
                },
            };
            for (k, v) in chunk.iter().zip(vals) {
                if self.full() {
                    return Ok(());
                }
                if let Some(bytes) = v {
                    self.keep(ctx, out, k.clone(), &bytes)?;
                }
            }
        }
        Ok(())
    }

    /// Locks `keys` (candidates in scan order), reads their latest versions and keeps those
    /// matching the filter, until the scan is full. Only as many keys as rows are still
    /// wanted are locked at a time: a candidate deleted or changed since the snapshot gives
    /// way to the next one, so `... ORDER BY pk LIMIT 1 FOR UPDATE` locks the first row that
    /// still matches, never skips one.
    async fn lock_rows(&mut self, ctx: &mut ExecCtx<'_>, keys: Vec<Vec<u8>>, out: &mut ScanBatch) -> Result<()> {
        let mut rest = &keys[..];
        while !rest.is_empty() && !self.full() {
            let room = self.limit - self.kept;
            let (now, later) = rest.split_at(room.min(rest.len()));
            rest = later;
            let latest = ctx.txn.lock_and_get(now).await?;
            for (k, v) in now.iter().zip(latest) {
                if let Some(bytes) = v {
                    self.keep(ctx, out, k.clone(), &bytes)?;
                }
            }
        }
        Ok(())
    }
}

/// Reads rows of a table through an access path, applying `filter`. With `lock`, the rows
/// returned are locked and read at their latest committed version (current read). The rows
/// are charged to the statement; the charge comes with them.
pub async fn scan(
    ctx: &mut ExecCtx<'_>,
    table: &Arc<TableInfo>,
    access: &Access,
    filter: Option<&Expr>,
    lock: bool,
) -> Result<(Vec<TableRow>, Charge)> {
    let mut charge = Charge::new();
    let rows = scan_limited(ctx, table, access, filter, lock, None, &mut charge).await?;
    Ok((rows, charge))
}

/// `scan`, returning at most `limit` rows (in key order) when given, charging them to
/// `charge`. Ranges are read in batches, so the scan stops as soon as it has `limit` rows.
pub async fn scan_limited(
    ctx: &mut ExecCtx<'_>,
    table: &Arc<TableInfo>,
    access: &Access,
    filter: Option<&Expr>,
    lock: bool,
    limit: Option<usize>,
    charge: &mut Charge,
) -> Result<Vec<TableRow>> {
    let mut s = ScanStream::new(table, access, filter, lock, None).limited(limit);
    let mut out = Vec::new();
    while let Some(b) = s.next(ctx).await? {
        out.extend(b.rows);
        charge.absorb(b.charge);
    }
    Ok(out)
}

/// Rows handed over batch by batch by [`scan_batches`].
pub type RowSink<'s> = dyn FnMut(Vec<Row>) -> Result<()> + Send + 's;

/// Reads the rows of a table through an access path like [`scan`] (no locking), handing
/// them to `sink` a batch at a time instead of collecting them: the memory a scan holds
/// is one batch, whatever the table's size. The columnar engine reads through this.
pub async fn scan_batches(
    ctx: &mut ExecCtx<'_>,
    table: &Arc<TableInfo>,
    access: &Access,
    filter: Option<&Expr>,
    limit: Option<usize>,
    sink: &mut RowSink<'_>,
) -> Result<()> {
    let mut s = ScanStream::new(table, access, filter, false, None).limited(limit);
    while let Some(b) = s.next(ctx).await? {
        let ScanBatch { rows, charge } = b;
        drop(charge);
        sink(rows.into_iter().map(|r| r.row).collect())?;
    }
    Ok(())
}

/// A query that reads one row by its primary key and computes its result row from it
/// (`SELECT c FROM t WHERE id = ? [FOR UPDATE]`): run by [`PointGet::run`], outside the
/// stream machinery (TiDB's PointGet executor): one key made, one read (or lock and read),
/// no batches, no boxed futures.
pub struct PointGet<'p> {
    table: &'p Arc<TableInfo>,
    access: &'p Access,
    filter: Option<&'p Expr>,
    lock: bool,
    columns: Option<&'p [bool]>,
    /// The result's expressions; None: the row as read.
    exprs: Option<&'p [Expr]>,
}

impl<'p> PointGet<'p> {
    /// `plan` as a point get: a scan of one primary-key tuple, unlimited, maybe under a
    /// projection whose expressions use no subquery.
    pub fn of(plan: &'p Plan) -> Option<PointGet<'p>> {
        let (scan, exprs) = match plan {
            Plan::Project { input, exprs } => {
                if exprs.iter().any(Expr::has_subquery) {
                    return None;
                }
                (&**input, Some(&exprs[..]))
            }
            other => (other, None),
        };
        match scan {
            Plan::Scan { table, access: access @ Access::Points(points), filter, lock, limit: None, columns }
                if points.len() == 1 && !filter.as_ref().is_some_and(Expr::has_subquery) =>
            {
                Some(PointGet {
                    table,
                    access,
                    filter: filter.as_ref(),
                    lock: *lock,
                    columns: columns.as_deref(),
                    exprs,
                })
            }
            _ => None,
        }
    }

    /// The result: no row or one (the row exists and matches the filter); None when the
    /// point's values cannot be looked up by key (the general executor then runs the plan,
    /// reading the whole table).
    pub async fn run(&self, ctx: &mut ExecCtx<'_>) -> Result<Option<Vec<Row>>> {
        let Access::Points(points) = self.access else { return Ok(None) };
        let Some(keys) = point_keys(ctx, self.table, points)? else { return Ok(None) };
        count_reads(Read::Key, keys.len());
        let Some(key) = keys.first() else { return Ok(Some(Vec::new())) };
        checkpoint().await?;
        let scan = ScanStream::new(self.table, self.access, self.filter, self.lock, None).with_columns(self.columns);
        // A locking read takes the row's latest version under the lock (`lock_rows`).
        let bytes = if self.lock {
            ctx.txn.lock_and_get(std::slice::from_ref(key)).await?.pop().flatten()
        } else {
            match scan.cached_copy(ctx) {
                Some(copy) => copy.get(key),
                None => ctx.txn.get(key).await?,
            }
        };
        let Some(bytes) = bytes else { return Ok(Some(Vec::new())) };
        let (row, _) = decode_masked(self.table, &bytes, self.columns)?;
        if !scan.matches(ctx, &row)? {
            return Ok(Some(Vec::new()));
        }
        let mut row = row;
        let row = match self.exprs {
            None => row,
            Some(exprs) => {
                let picked = super::stream::column_picks(exprs).and_then(|p| super::stream::pick_columns(&mut row, &p));
                match picked {
                    Some(picked) => picked,
                    None => {
                        let empty = SubqueryValues::default();
                        let ec = ctx.eval_ctx(&empty);
                        exprs.iter().map(|e| e.eval(&row, &ec)).collect::<Result<Vec<_>>>()?
                    }
                }
            }
        };
        Ok(Some(vec![row]))
    }
}

/// The key bytes of a range on the key column after `prefix`.
struct KeyBounds {
    start: Vec<u8>,
    end: Vec<u8>,
    /// Every bound became a key bound meaning the same as its comparison (or one that
    /// excludes nothing): the range alone decides the conjuncts it was built from.
    exact: bool,
    /// A lower key bound keeps out the column's NULLs (they sort first); without one, a
    /// range over a nullable column holds them while any comparison rejects them.
    nulls_out: bool,
}

impl KeyBounds {
    /// Whether rows read through these bounds need only `range`'s residual filter, not the
    /// whole one: the bounds are exact and any NULL they let in fails no dropped conjunct
    /// (`nullable`: the bounded column may hold NULL).
    fn decide(&self, range: &KeyRange, nullable: bool) -> bool {
        let bounded = range.lower.is_some() || range.upper.is_some();
        self.exact && (self.nulls_out || !bounded || !nullable)
    }
}

/// The key bytes of a range bound on the key column after `prefix`: None when no row can
/// match. Bounds the key order cannot serve are left open (the filter decides); inexact
/// ones are inclusive.
fn range_bounds(
    ctx: &ExecCtx,
    prefix: Vec<u8>,
    range: &KeyRange,
    next_col: Option<&ColumnType>,
) -> Result<Option<KeyBounds>> {
    let mut b = KeyBounds { start: prefix.clone(), end: prefix_end(&prefix), exact: true, nulls_out: false };
    let lower = range.lower.as_ref().map(|(e, incl)| ctx.eval_const(e).map(|v| (v, *incl))).transpose()?;
    let upper = range.upper.as_ref().map(|(e, incl)| ctx.eval_const(e).map(|v| (v, *incl))).transpose()?;
    let Some(ty) = next_col else {
        b.exact = lower.is_none() && upper.is_none();
        return Ok(Some(b));
    };
    // A string key bounded by a string and a number (BETWEEN 1 AND 'x') compares as doubles
    // throughout: neither bound follows the key's order.
    if ty.is_string()
        && [&lower, &upper].iter().any(|b| b.as_ref().is_some_and(|(v, _)| !matches!(v, Value::Bytes(_) | Value::Null)))
    {
        b.exact = false;
        return Ok(Some(b));
    }
    if let Some((v, incl)) = &lower {
        match key_conv(ty, v, Side::Lower) {
            KeyConv::Empty => return Ok(None),
            KeyConv::Unbounded => {}
            KeyConv::Unusable => b.exact = false,
            KeyConv::At(v, exact) => {
                let mut k = prefix.clone();
                crate::table::encode_key(&mut k, &v);
                b.start = if *incl || !exact { k } else { prefix_end(&k) };
                b.exact &= exact;
                b.nulls_out = true;
            }
        }
    }
    if let Some((v, incl)) = &upper {
        match key_conv(ty, v, Side::Upper) {
            KeyConv::Empty => return Ok(None),
            KeyConv::Unbounded => {}
            KeyConv::Unusable => b.exact = false,
            KeyConv::At(v, exact) => {
                let mut k = prefix;
                crate::table::encode_key(&mut k, &v);
                b.end = if *incl || !exact { prefix_end(&k) } else { k };
                b.exact &= exact;
            }
        }
    }
    Ok(Some(b))
}

/// The row keys of a point access's tuples, each once, in the tuples' order (a tuple no
/// row can match gives none); None when some value cannot be looked up by key.
fn point_keys(ctx: &ExecCtx, table: &TableInfo, points: &[Vec<Expr>]) -> Result<Option<Vec<Vec<u8>>>> {
    let pk = table.pk.as_deref().unwrap_or_default();
    let mut seen = HashSet::default();
    let mut keys = Vec::with_capacity(points.len());
    for p in points {
        let vals = match eq_values(ctx, p, pk, table)? {
            EqKey::Values(vals) => vals,
            EqKey::Empty => continue,
            EqKey::Unusable => return Ok(None),
        };
        let mut k = row_prefix(table.table_id());
        for v in &vals {
            crate::table::encode_key(&mut k, v);
        }
        // A few points are told apart by looking; many, by hashing.
        let fresh = if points.len() <= 8 { !keys.contains(&k) } else { seen.insert(k.clone()) };
        if fresh {
            keys.push(k);
        }
    }
    Ok(Some(keys))
}

/// An index lookup join's inner side that is one table's point get per outer row: reads
/// the rows all of `outer` (the join's next left rows) will look up in one batched read,
/// which the lookups then take from `ExecCtx::prefetched` instead of one read each.
/// Nothing is read ahead for a locking or cached table's lookup, or for fewer than two
/// rows; at most `MAX_BATCH` keys are.
pub(super) async fn prefetch_points(ctx: &mut ExecCtx<'_>, inner: &Plan, outer: &[Row]) -> Result<()> {
    ctx.prefetched = None;
    let Plan::Scan { table, access: Access::Points(points), lock: false, .. } = inner else { return Ok(()) };
    if outer.len() < 2 || table.cached {
        return Ok(());
    }
    let mut seen = HashSet::default();
    let mut keys = Vec::new();
    for row in outer {
        if keys.len() >= MAX_BATCH {
            break;
        }
        ctx.outer.push(row.clone());
        let found = point_keys(ctx, table, points);
        ctx.outer.pop();
        // None: this row's lookup reads the whole table; the others still use what is
        // read here.
        for k in found?.unwrap_or_default() {
            if seen.insert(k.clone()) {
                keys.push(k);
            }
        }
    }
    if keys.len() < 2 {
        return Ok(());
    }
    checkpoint().await?;
    let values = ctx.txn.batch_get(&keys).await?;
    let mut charge = Charge::new();
    let mut rows = HashMap::with_capacity_and_hasher(keys.len(), Default::default());
    for (k, v) in keys.into_iter().zip(values) {
        charge.add(k.len() + v.as_ref().map_or(0, Vec::len) + 48)?;
        rows.insert(k, v);
    }
    ctx.prefetched = Some(super::Prefetched { table: table.id, rows, _charge: charge });
    Ok(())
}

/// Key values for equality on key columns.
enum EqKey {
    /// No row can match.
    Empty,
    /// Some value cannot be looked up by key (its comparison disagrees with key order).
    Unusable,
    /// The key values.
    Values(Vec<Value>),
}

fn eq_values(ctx: &ExecCtx, exprs: &[Expr], cols: &[usize], table: &TableInfo) -> Result<EqKey> {
    let mut vals = Vec::with_capacity(exprs.len());
    let mut empty = false;
    for (e, &c) in exprs.iter().zip(cols) {
        match key_conv(&table.columns[c].ty, &ctx.eval_const(e)?, Side::Eq) {
            KeyConv::At(v, _) => vals.push(v),
            KeyConv::Unusable | KeyConv::Unbounded => return Ok(EqKey::Unusable),
            KeyConv::Empty => empty = true,
        }
    }
    Ok(if empty { EqKey::Empty } else { EqKey::Values(vals) })
}

/// Whether some key value of the access path cannot be looked up by key: the path then
/// reads the whole table (its filter holds the predicates).
fn access_unusable(ctx: &ExecCtx, access: &Access, table: &TableInfo) -> Result<bool> {
    let pk = table.pk.as_deref().unwrap_or_default();
    let unusable = |exprs: &[Expr], cols: &[usize]| -> Result<bool> {
        Ok(matches!(eq_values(ctx, exprs, cols, table)?, EqKey::Unusable))
    };
    match access {
        Access::Full => Ok(false),
        Access::Points(ts) | Access::Prefixes(ts) => {
            for t in ts {
                if unusable(t, pk)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Access::PkRange(r) => unusable(&r.eq, pk),
        Access::Index(i, r) => unusable(&r.eq, &table.indexes[*i].columns),
    }
}
