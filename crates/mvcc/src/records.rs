//! The records Percolator keeps in each column family, and how keys carry timestamps.
//!
//! ```text
//!   lock  CF:  key                      -> Lock  { kind, primary, start_ts, ttl, value? }
//!   write CF:  enc(key) ++ !commit_ts   -> Write { kind, start_ts, value? | (base_ts, delta) }
//!   data  CF:  enc(key) ++ !start_ts    -> value          (long values of older stores)
//!   latest CF: enc(key)                 -> commit_ts ++ Write   (the newest Put or Delete)
//! ```
//! The latest CF repeats the newest data record of each key from the write CF, written in
//! the same batch, so a reader whose timestamp is past it (almost every reader) reads one
//! entry per key, however many old versions the write CF holds; only a reader older than
//! the key's last commit looks in the write CF, and so never for the latest record itself.
//!
//! A Put's latest record is therefore its only copy while it is the newest (its kind byte
//! is `p`, "no twin": `latest_record`), with its value inline whatever its size: a current
//! read is one point get, and a row inserted once is written once. The commit that
//! supersedes it moves it into the write CF in the same batch, where the
//! readers older than the new version find it — as a delta against the new value when
//! that is much shorter (`delta_of`), naming the new version's commit timestamp as its
//! base (`Write::delta_base`; a reader rebuilds it with `apply_delta` from there, see
//! `MvccStore::undelta`). A Delete's latest record has its twin in
//! the write CF, as GC finds deletions there. Records written before these rules (layout
//! `latest-v1`) have twins, and may point into the data CF; so may write records of stores
//! written before every value was kept inline (values over 255 bytes went to the data CF,
//! as TiKV keeps them: a TPC-C stock or customer update then wrote four entries, record,
//! value, the new latest record and at GC the value's deletion, instead of two).
//! `enc` is the group encoding of the user key, so versions of different keys never
//! interleave even when one key is a prefix of another. Timestamps are stored inverted
//! (`!ts`, big-endian) so the newest version of a key comes first.

use strata_codec::memcmp;
use strata_codec::row::{get_varint, put_varint};
use strata_common::{Error, Result, Timestamp};

/// The kind byte of a latest-CF Put record whose write CF has no twin (module docs).
const TWINLESS_PUT: u8 = b'p';

/// The value tag of a write record holding a delta against a newer version (after 0, no
/// value, and 1, the value).
const DELTA_TAG: u8 = 2;

/// What a lock or write record does to its key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A write of a value.
    Put,
    /// A deletion.
    Delete,
    /// A lock-only record (no data change).
    Lock,
    /// A pessimistic lock: taken by a statement, not yet prewritten; readers ignore it.
    Pessimistic,
    /// A rollback record (write CF only).
    Rollback,
}

impl Kind {
    fn to_byte(self) -> u8 {
        match self {
            Kind::Put => b'P',
            Kind::Delete => b'D',
            Kind::Lock => b'L',
            Kind::Pessimistic => b'S',
            Kind::Rollback => b'R',
        }
    }
    fn from_byte(b: u8) -> Result<Kind> {
        Ok(match b {
            b'P' | TWINLESS_PUT => Kind::Put,
            b'D' => Kind::Delete,
            b'L' => Kind::Lock,
            b'S' => Kind::Pessimistic,
            b'R' => Kind::Rollback,
            other => return Err(Error::internal(format!("corrupt record kind {other}"))),
        })
    }
}

/// A lock in the lock CF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lock {
    /// What the lock will do when committed.
    pub kind: Kind,
    /// The transaction's primary key (shared by all the locks of one command).
    pub primary: std::sync::Arc<[u8]>,
    /// The transaction's start timestamp.
    pub start_ts: Timestamp,
    /// Time to live, ms, from the physical part of `start_ts`.
    pub ttl_ms: u64,
    /// For pessimistic locks, the statement timestamp the lock was taken at.
    pub for_update_ts: Timestamp,
    /// The staged value (Put only). A lock in the lock table carries it whatever its size;
    /// a lock in the lock CF (written by an older version) only if it is short.
    pub short_value: Option<Vec<u8>>,
}

/// A commit or rollback record in the write CF.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Write {
    /// Put, Delete, Lock or Rollback.
    pub kind: Kind,
    /// Start timestamp of the transaction that wrote it.
    pub start_ts: Timestamp,
    /// The value (Put only); None for a Put whose long value an older store kept in the
    /// data CF. With `delta_base`, not the value but its delta (`delta`).
    pub short_value: Option<Vec<u8>>,
    /// For a superseded Put kept as a delta: the commit timestamp of the version whose
    /// value the delta applies to (the one that superseded it; module docs).
    pub delta_base: Option<Timestamp>,
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(Error::internal("corrupt MVCC record: truncated"));
        }
        let (h, t) = self.0.split_at(n);
        self.0 = t;
        Ok(h)
    }
    fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn u64(&mut self) -> Result<u64> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }
    fn slice(&mut self) -> Result<&'a [u8]> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        self.take(u32::from_le_bytes(b) as usize)
    }
    fn bytes(&mut self) -> Result<Vec<u8>> {
        Ok(self.slice()?.to_vec())
    }
    fn opt_slice(&mut self) -> Result<Option<&'a [u8]>> {
        Ok(if self.u8()? == 1 { Some(self.slice()?) } else { None })
    }
    fn opt_bytes(&mut self) -> Result<Option<Vec<u8>>> {
        Ok(self.opt_slice()?.map(<[u8]>::to_vec))
    }
}

fn put_opt(out: &mut Vec<u8>, v: &Option<Vec<u8>>) {
    match v {
        Some(b) => {
            out.push(1);
            put_bytes(out, b);
        }
        None => out.push(0),
    }
}

impl Lock {
    /// Serializes the lock.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(40 + self.primary.len());
        out.push(self.kind.to_byte());
        out.extend_from_slice(&self.start_ts.0.to_le_bytes());
        out.extend_from_slice(&self.ttl_ms.to_le_bytes());
        out.extend_from_slice(&self.for_update_ts.0.to_le_bytes());
        put_bytes(&mut out, &self.primary);
        put_opt(&mut out, &self.short_value);
        out
    }

    /// Parses a lock.
    pub fn decode(b: &[u8]) -> Result<Lock> {
        let mut r = Reader(b);
        Ok(Lock {
            kind: Kind::from_byte(r.u8()?)?,
            start_ts: Timestamp(r.u64()?),
            ttl_ms: r.u64()?,
            for_update_ts: Timestamp(r.u64()?),
            primary: r.bytes()?.into(),
            short_value: r.opt_bytes()?,
        })
    }
}

impl Write {
    /// Serializes the record.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(20 + self.short_value.as_ref().map_or(0, |v| v.len()));
        out.push(self.kind.to_byte());
        out.extend_from_slice(&self.start_ts.0.to_le_bytes());
        match (&self.short_value, self.delta_base) {
            (Some(d), Some(base)) => {
                out.push(DELTA_TAG);
                out.extend_from_slice(&base.0.to_le_bytes());
                put_bytes(&mut out, d);
            }
            (v, _) => put_opt(&mut out, v),
        }
        out
    }

    /// The record, borrowed.
    pub fn as_ref(&self) -> WriteRef<'_> {
        WriteRef {
            kind: self.kind,
            start_ts: self.start_ts,
            short_value: self.short_value.as_deref(),
            delta_base: self.delta_base,
        }
    }

    /// Parses a record.
    pub fn decode(b: &[u8]) -> Result<Write> {
        Ok(WriteRef::decode(b)?.to_owned())
    }
}

/// A write record read in place (no copy of the value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriteRef<'a> {
    /// Put, Delete, Lock or Rollback.
    pub kind: Kind,
    /// Start timestamp of the transaction that wrote it.
    pub start_ts: Timestamp,
    /// The value (Put only); None for a Put whose long value an older store kept in the
    /// data CF. With `delta_base`, not the value but its delta (`delta`).
    pub short_value: Option<&'a [u8]>,
    /// As `Write::delta_base`.
    pub delta_base: Option<Timestamp>,
}

impl<'a> WriteRef<'a> {
    /// Parses a record without copying its value.
    pub fn decode(b: &'a [u8]) -> Result<WriteRef<'a>> {
        let mut r = Reader(b);
        let (kind, start_ts) = (Kind::from_byte(r.u8()?)?, Timestamp(r.u64()?));
        let (short_value, delta_base) = match r.u8()? {
            0 => (None, None),
            1 => (Some(r.slice()?), None),
            DELTA_TAG => {
                let base = Timestamp(r.u64()?);
                (Some(r.slice()?), Some(base))
            }
            other => return Err(Error::internal(format!("corrupt write record value tag {other}"))),
        };
        Ok(WriteRef { kind, start_ts, short_value, delta_base })
    }

    /// An owned copy.
    pub fn to_owned(self) -> Write {
        Write {
            kind: self.kind,
            start_ts: self.start_ts,
            short_value: self.short_value.map(<[u8]>::to_vec),
            delta_base: self.delta_base,
        }
    }
}

/// The latest CF's value for a `kind` (Put or Delete) record of the transaction
/// `start_ts` committed at `commit_ts`, with its value inline whatever its length. A Put's
/// is marked as having no twin in the write CF (module docs).
pub fn latest_record(commit_ts: Timestamp, kind: Kind, start_ts: Timestamp, value: Option<&[u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(22 + value.map_or(0, <[u8]>::len));
    out.extend_from_slice(&commit_ts.0.to_be_bytes());
    out.push(if kind == Kind::Put { TWINLESS_PUT } else { kind.to_byte() });
    out.extend_from_slice(&start_ts.0.to_le_bytes());
    match value {
        Some(v) => {
            out.push(1);
            put_bytes(&mut out, v);
        }
        None => out.push(0),
    }
    out
}

/// The latest CF's value for a data record committed at `commit_ts`, `encoded` being the
/// record as `Write::encode` gives it.
pub fn latest_value(commit_ts: Timestamp, encoded: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + encoded.len());
    out.extend_from_slice(&commit_ts.0.to_be_bytes());
    out.extend_from_slice(encoded);
    out
}

/// Splits a latest CF value into its commit timestamp and the record.
pub fn split_latest(value: &[u8]) -> Result<(Timestamp, WriteRef<'_>)> {
    if value.len() < 8 {
        return Err(Error::internal("corrupt latest record"));
    }
    let (ts, w) = value.split_at(8);
    let mut b = [0u8; 8];
    b.copy_from_slice(ts);
    Ok((Timestamp(u64::from_be_bytes(b)), WriteRef::decode(w)?))
}

/// Whether a latest CF value is a Put with no twin in the write CF (`latest_record`).
pub fn is_twinless(latest: &[u8]) -> bool {
    latest.get(8) == Some(&TWINLESS_PUT)
}

/// Values shorter than this are kept whole when superseded: a delta saves little on them,
/// and a small row updated over and over (a TPC-C district) would make a reader of an old
/// version walk a long chain of deltas.
pub const DELTA_MIN_LEN: usize = 64;

/// Byte runs closer than this are written as one run (a run's header costs 2 bytes or more).
const DELTA_RUN_GAP: usize = 8;

/// The delta that turns `new` back into `old`, if keeping it instead of `old` pays: both of
/// one length (a row whose updated columns have fixed widths), `old` at least
/// `DELTA_MIN_LEN` bytes, and the delta at most half of it. The delta is a sequence of runs,
/// each `skip:varint len:varint bytes[len]`: `skip` bytes of `new` kept, then `len` bytes
/// of `old` instead of `new`'s.
pub fn delta_of(old: &[u8], new: &[u8]) -> Option<Vec<u8>> {
    if old.len() != new.len() || old.len() < DELTA_MIN_LEN {
        return None;
    }
    let budget = old.len() / 2;
    let mut out = Vec::with_capacity(32);
    let mut done = 0; // bytes of `new` accounted for by the runs so far
    let mut i = 0;
    while i < old.len() {
        // The next differing byte, 8 bytes at a time where they are equal.
        while i + 8 <= old.len() && old[i..i + 8] == new[i..i + 8] {
            i += 8;
        }
        while i < old.len() && old[i] == new[i] {
            i += 1;
        }
        if i == old.len() {
            break;
        }
        // The run: up to the next stretch of DELTA_RUN_GAP equal bytes (or the end).
        let start = i;
        let mut end = i + 1;
        let mut j = end;
        while j < old.len() && j - end < DELTA_RUN_GAP {
            if old[j] != new[j] {
                end = j + 1;
            }
            j += 1;
        }
        put_varint(&mut out, (start - done) as u64);
        put_varint(&mut out, (end - start) as u64);
        out.extend_from_slice(&old[start..end]);
        if out.len() > budget {
            return None;
        }
        done = end;
        i = end;
    }
    Some(out)
}

/// The value `delta` (`delta_of`) stands for, given the value of its base version.
pub fn apply_delta(base: &[u8], delta: &[u8]) -> Result<Vec<u8>> {
    let corrupt = || Error::internal("corrupt MVCC delta");
    let mut out = base.to_vec();
    let mut input = delta;
    let mut at = 0usize;
    while !input.is_empty() {
        let mut length = || get_varint(&mut input).ok().and_then(|v| usize::try_from(v).ok()).ok_or_else(corrupt);
        let (skip, len) = (length()?, length()?);
        let start = at.checked_add(skip).ok_or_else(corrupt)?;
        let end = start.checked_add(len).filter(|&e| e <= out.len() && len <= input.len()).ok_or_else(corrupt)?;
        out[start..end].copy_from_slice(&input[..len]);
        input = &input[len..];
        at = end;
    }
    Ok(out)
}

/// The group-encoded form of a user key (the prefix of its versioned keys).
pub fn encode_user_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + key.len() / 8 + 17);
    memcmp::encode_bytes(&mut out, key);
    out
}

/// `enc(key) ++ !ts`.
pub fn versioned(encoded_key: &[u8], ts: Timestamp) -> Vec<u8> {
    let mut out = Vec::with_capacity(encoded_key.len() + 8);
    out.extend_from_slice(encoded_key);
    out.extend_from_slice(&(!ts.0).to_be_bytes());
    out
}

/// Splits a versioned key into the encoded user key and its timestamp.
pub fn split_versioned(raw: &[u8]) -> Result<(&[u8], Timestamp)> {
    if raw.len() < 8 {
        return Err(Error::internal("corrupt versioned key"));
    }
    let (k, ts) = raw.split_at(raw.len() - 8);
    let mut b = [0u8; 8];
    b.copy_from_slice(ts);
    Ok((k, Timestamp(!u64::from_be_bytes(b))))
}

/// The table whose encoded keys `[lower, upper)` (a cursor's bounds over the latest CF)
/// lie in, as the encoded bounds of all its keys (rows and indexes): the unit a storage
/// engine makes resident whole (`storage_rocks::UnitOf`). None for a range that is not
/// within one table (catalog keys, several tables).
pub fn table_unit(lower: &[u8], upper: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    // A table's keys start with 9 bytes (`t` and the id): encoded, a full group of 8 and
    // its marker, then the ninth byte.
    if lower.len() < 10 || lower[8] != 0xFF {
        return None;
    }
    let mut head = [0u8; 9];
    head[..8].copy_from_slice(&lower[..8]);
    head[8] = lower[9];
    let table = strata_codec::keys::table_of(&head)?;
    let prefix = strata_codec::keys::table_prefix(table);
    let start = encode_user_key(&prefix);
    let end = encode_user_key(&strata_codec::keys::prefix_end(&prefix));
    (lower >= start.as_slice() && upper <= end.as_slice() && lower < upper).then_some((start, end))
}

/// Decodes a group-encoded user key.
pub fn decode_user_key(encoded: &[u8]) -> Result<Vec<u8>> {
    let mut input = encoded;
    memcmp::decode_bytes(&mut input)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_unit_holds_its_rows_and_indexes_and_nothing_else() {
        use strata_codec::keys::{index_prefix, prefix_end, row_prefix, table_prefix};
        use strata_common::{IndexId, TableId};
        let t = TableId(42);
        let rows = (encode_user_key(&row_prefix(t)), encode_user_key(&prefix_end(&row_prefix(t))));
        let (start, end) = table_unit(&rows.0, &rows.1).expect("a row range is in its table");
        let idx = encode_user_key(&index_prefix(t, IndexId(3)));
        assert!(idx >= start && idx < end, "index entries are in the unit");
        assert!(rows.0 >= start && rows.1 <= end);
        // The neighbours' keys are outside.
        for other in [TableId(41), TableId(43)] {
            let k = encode_user_key(&row_prefix(other));
            assert!(k < start || k >= end, "{other:?}'s rows are outside");
        }
        // A range spanning two tables, or catalog keys, has no unit.
        let next = encode_user_key(&prefix_end(&table_prefix(TableId(43))));
        assert_eq!(table_unit(&rows.0, &next), None);
        assert_eq!(table_unit(&encode_user_key(b"mcatalog"), &encode_user_key(b"mcatalog\xff")), None);
        // A large id (a byte that is 0xFF in the id) still has its own unit.
        let big = TableId(0x00FF_FFFF_FFFF_FF00);
        let r = (encode_user_key(&row_prefix(big)), encode_user_key(&prefix_end(&row_prefix(big))));
        let (s2, e2) = table_unit(&r.0, &r.1).expect("unit");
        assert!(r.0 >= s2 && r.1 <= e2);
    }

    #[test]
    fn a_delta_gives_back_the_old_value_and_only_pays_its_way() {
        // A stock-like row: two fixed-width columns near the ends change, the rest stays.
        let new: Vec<u8> = (0..300u32).map(|i| (i * 7 % 251) as u8).collect();
        let mut old = new.clone();
        old[12..20].copy_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        old[250] ^= 0x55;
        old[258] ^= 0x01; // within DELTA_RUN_GAP of the last change: one run
        old[299] ^= 0xFF; // the very last byte
        let d = delta_of(&old, &new).expect("a few changed bytes pay");
        assert!(d.len() < 40, "{} bytes", d.len());
        assert_eq!(apply_delta(&new, &d).expect("apply"), old);
        // Equal values: an empty delta.
        assert_eq!(apply_delta(&new, &delta_of(&new, &new).expect("delta")).expect("apply"), new);
        // Other lengths, short values, or mostly different bytes: kept whole.
        assert_eq!(delta_of(&old[..299], &new[..298]), None);
        assert_eq!(delta_of(&old[..40], &new[..40]), None);
        let inverted: Vec<u8> = new.iter().map(|b| !b).collect();
        assert_eq!(delta_of(&inverted, &new), None);
        // A delta that reaches past its base is refused, not applied.
        assert!(apply_delta(&new[..100], &d).is_err());
        assert!(apply_delta(&new, &[0x80]).is_err());
        // Every single-byte change at every position round-trips.
        for i in 0..new.len() {
            let mut o = new.clone();
            o[i] = o[i].wrapping_add(1);
            let d = delta_of(&o, &new).expect("one byte");
            assert_eq!(apply_delta(&new, &d).expect("apply"), o, "byte {i}");
        }
    }

    #[test]
    fn a_delta_record_round_trips() {
        let w = Write {
            kind: Kind::Put,
            start_ts: Timestamp(7),
            short_value: Some(vec![0, 3, 1, 2, 3]),
            delta_base: Some(Timestamp(12)),
        };
        assert_eq!(Write::decode(&w.encode()).expect("write"), w);
        assert_eq!(WriteRef::decode(&w.encode()).expect("ref").delta_base, Some(Timestamp(12)));
    }

    #[test]
    fn records_round_trip_and_versions_sort_newest_first() {
        let l = Lock {
            kind: Kind::Put,
            primary: b"p".as_slice().into(),
            start_ts: Timestamp(5),
            ttl_ms: 3000,
            for_update_ts: Timestamp(6),
            short_value: Some(b"v".to_vec()),
        };
        assert_eq!(Lock::decode(&l.encode()).expect("lock"), l);
        let w = Write { kind: Kind::Rollback, start_ts: Timestamp(9), short_value: None, delta_base: None };
        assert_eq!(Write::decode(&w.encode()).expect("write"), w);
        let k = encode_user_key(b"key");
        assert!(versioned(&k, Timestamp(10)) < versioned(&k, Timestamp(9)));
        // A key that extends another never interleaves with its versions.
        let k2 = encode_user_key(b"key\0");
        assert!(versioned(&k, Timestamp(1)) < versioned(&k2, Timestamp(u64::MAX - 1)));
        let latest = latest_value(Timestamp(12), &w.encode());
        let (commit, r) = split_latest(&latest).expect("latest");
        assert_eq!((commit, r.to_owned()), (Timestamp(12), w));
        let put =
            Write { kind: Kind::Put, start_ts: Timestamp(3), short_value: Some(b"value".to_vec()), delta_base: None };
        assert_eq!(WriteRef::decode(&put.encode()).expect("ref").short_value, Some(b"value".as_slice()));
        assert!(split_latest(b"short").is_err());
        assert!(!is_twinless(&latest));
        let twinless = latest_record(Timestamp(12), Kind::Put, Timestamp(3), Some(b"value"));
        assert!(is_twinless(&twinless));
        let (commit, r) = split_latest(&twinless).expect("latest");
        assert_eq!((commit, r.to_owned()), (Timestamp(12), put.clone()));
        let del = latest_record(Timestamp(12), Kind::Delete, Timestamp(3), None);
        assert!(!is_twinless(&del));
        assert_eq!(split_latest(&del).expect("latest").1.kind, Kind::Delete);
        let v = versioned(&k, Timestamp(10));
        let (ek, ts) = split_versioned(&v).expect("split");
        assert_eq!((decode_user_key(ek).expect("decode"), ts), (b"key".to_vec(), Timestamp(10)));
    }
}
