//! The latest CF: reads through it agree with the full history in the write CF at every
//! timestamp, a current read never walks old versions, GC keeps it in step, and a store
//! written before it existed gets it built at open.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use strata_common::{Result, Timestamp};
use strata_kv::{Client, LockMode, Mutation, PessimisticLockRequest, PrewriteRequest};
use strata_mvcc::records::{encode_user_key, latest_record, versioned, Kind, Write};
use strata_mvcc::{LocalClient, MvccStore};
use strata_storage::{Cf, Cursor, Engine, MemoryEngine, WriteBatch};

fn ts(t: u64) -> Timestamp {
    Timestamp::compose(t, 0)
}

fn prewrite(muts: Vec<Mutation>, start: Timestamp) -> Arc<PrewriteRequest> {
    let primary = muts[0].key().to_vec();
    let locked = vec![false; muts.len()];
    Arc::new(PrewriteRequest {
        mutations: muts,
        primary,
        start_ts: start,
        ttl_ms: 3000,
        mode: LockMode::Optimistic,
        locked,
    })
}

/// A small deterministic generator (xorshift).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Each key's data changes: commit timestamp and value (None: deleted), oldest first.
type Model = BTreeMap<Vec<u8>, Vec<(u64, Option<Vec<u8>>)>>;

fn model_at(model: &Model, key: &[u8], at: u64) -> Option<Vec<u8>> {
    model.get(key)?.iter().rev().find(|(c, _)| *c <= at).and_then(|(_, v)| v.clone())
}

fn key(i: u64) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

/// Every read the store offers, at `at`, against the model: point reads, a batch read, a
/// full scan, limited scans, and the changes since `after`.
async fn check_reads(c: &LocalClient, model: &Model, keys: u64, at: u64, after: u64) {
    let all: Vec<Vec<u8>> = (0..keys).map(key).collect();
    let got = c.batch_get(&all, ts(at)).await.expect("batch get");
    for (k, v) in all.iter().zip(&got) {
        assert_eq!(*v, model_at(model, k, at), "get {} at {at}", String::from_utf8_lossy(k));
    }
    // A batch big enough for one MultiGet, out of order and with repeats, answers the same.
    let many: Vec<Vec<u8>> = (0..100).map(|i| all[(i * 7) % all.len()].clone()).collect();
    let got = c.batch_get(&many, ts(at)).await.expect("batch get");
    for (k, v) in many.iter().zip(&got) {
        assert_eq!(*v, model_at(model, k, at), "batched get {} at {at}", String::from_utf8_lossy(k));
    }
    let newest_of = |k: &[u8]| model.get(k).and_then(|h| h.last()).map_or(0, |(c, _)| *c);
    match c.batch_get_checked(&many, ts(at)).await {
        Ok(got) => {
            assert!(many.iter().all(|k| newest_of(k) <= at), "checked batch at {at} missed a newer version");
            assert!(many.iter().zip(&got).all(|(k, v)| *v == model_at(model, k, at)), "checked batch at {at}");
        }
        Err(strata_common::Error::WriteConflict { .. }) => {
            assert!(many.iter().any(|k| newest_of(k) > at), "checked batch at {at}: a conflict with nothing newer")
        }
        Err(e) => panic!("checked batch: {e}"),
    }
    let expected: Vec<(Vec<u8>, Vec<u8>)> =
        all.iter().filter_map(|k| model_at(model, k, at).map(|v| (k.clone(), v))).collect();
    assert_eq!(c.scan(b"k", b"l", ts(at), usize::MAX).await.expect("scan"), expected, "scan at {at}");
    for limit in [1, 3] {
        let part = c.scan(b"k", b"l", ts(at), limit).await.expect("scan");
        assert_eq!(part, expected.iter().take(limit).cloned().collect::<Vec<_>>(), "scan at {at} limit {limit}");
    }
    // Checked reads (RC check-ts): the same answers, or a write conflict for a key
    // committed after `at`.
    let newest = |k: &[u8]| model.get(k).and_then(|h| h.last()).map_or(0, |(c, _)| *c);
    for k in &all {
        match c.batch_get_checked(std::slice::from_ref(k), ts(at)).await {
            Ok(v) => {
                assert!(newest(k) <= at, "checked get {} at {at} missed a newer version", String::from_utf8_lossy(k));
                assert_eq!(v, vec![model_at(model, k, at)]);
            }
            Err(strata_common::Error::WriteConflict { conflict_ts, .. }) => {
                assert!(
                    newest(k) > at,
                    "checked get {} at {at}: a conflict with nothing newer",
                    String::from_utf8_lossy(k)
                );
                assert_eq!(conflict_ts, ts(newest(k)));
            }
            Err(e) => panic!("checked get: {e}"),
        }
    }
    match c.scan_checked(b"k", b"l", ts(at), usize::MAX).await {
        Ok(rows) => {
            assert!(all.iter().all(|k| newest(k) <= at), "checked scan at {at} missed a newer version");
            assert_eq!(rows, expected);
        }
        Err(strata_common::Error::WriteConflict { .. }) => {
            assert!(all.iter().any(|k| newest(k) > at), "checked scan at {at}: a conflict with nothing newer")
        }
        Err(e) => panic!("checked scan: {e}"),
    }
    let changes = c.scan_changes(b"k", b"l", ts(after), ts(at), usize::MAX).await.expect("changes");
    let want: Vec<(Vec<u8>, u64, Option<Vec<u8>>)> = all
        .iter()
        .filter_map(|k| {
            let (commit, v) = model.get(k)?.iter().rev().find(|(c, _)| *c <= at)?;
            (*commit > after).then(|| (k.clone(), *commit, v.clone()))
        })
        .collect();
    let got: Vec<(Vec<u8>, u64, Option<Vec<u8>>)> =
        changes.into_iter().map(|ch| (ch.key, ch.commit_ts.physical_ms(), ch.value)).collect();
    assert_eq!(got, want, "changes in ({after}, {at}]");
}

/// Runs `n` random transactions over `keys` keys from timestamp `*now` on (a few are rolled
/// back), recording what committed in `model`.
async fn random_txns(c: &LocalClient, model: &mut Model, rng: &mut Rng, now: &mut u64, keys: u64, n: usize) {
    random_txns_in(c, model, rng, now, keys, n, false).await
}

/// `random_txns`; with `pessimistic`, half the transactions lock their keys pessimistically
/// before the prewrite, and some prune deletions between the lock or the prewrite and the
/// commit.
async fn random_txns_in(
    c: &LocalClient,
    model: &mut Model,
    rng: &mut Rng,
    now: &mut u64,
    keys: u64,
    n: usize,
    pessimistic: bool,
) {
    let mut scanned: Option<(Timestamp, Vec<strata_kv::ScannedEntry>)> = None;
    for _ in 0..n {
        let start = *now;
        let commit = *now + 1;
        *now += 2;
        let mut muts = Vec::new();
        let mut touched = std::collections::BTreeSet::new();
        for _ in 0..1 + rng.below(3) {
            let i = rng.below(keys);
            if !touched.insert(i) {
                continue;
            }
            // Long values as well as short ones; lock-only records change nothing.
            muts.push(match rng.below(10) {
                0..=4 => Mutation::Put(key(i), format!("v{i}@{commit}").into_bytes()),
                5 => Mutation::Put(key(i), vec![b'L'; 300 + i as usize]),
                6..=7 => Mutation::Delete(key(i)),
                _ => Mutation::Lock(key(i)),
            });
        }
        let ks: Vec<Vec<u8>> = muts.iter().map(|m| m.key().to_vec()).collect();
        if pessimistic && rng.below(2) == 0 {
            // Half the locks come with what a locking scan read a few transactions earlier
            // (some of the keys committed again since): the lock must answer the latest
            // values all the same.
            if scanned.is_none() || rng.below(4) == 0 {
                let got = c.scan_for_lock(b"k", b"l", ts(start), usize::MAX).await.expect("scan for lock");
                scanned = Some((ts(start), got));
            }
            let seen = match (rng.below(2), &scanned) {
                (0, Some((at, got))) => {
                    let record = |k: &Vec<u8>| got.iter().find(|(g, _, _)| g == k).and_then(|(_, _, r)| r.clone());
                    Some(strata_kv::Seen { ts: *at, records: ks.iter().map(record).collect() })
                }
                _ => None,
            };
            let req = PessimisticLockRequest {
                keys: ks.clone(),
                primary: ks[0].clone(),
                start_ts: ts(start),
                for_update_ts: ts(start),
                ttl_ms: 3000,
                wait_timeout_ms: None,
                seen,
            };
            let values = c.pessimistic_lock(req).await.expect("lock");
            for (k, v) in ks.iter().zip(values) {
                assert_eq!(v, model_at(model, k, u64::MAX), "lock of {k:?} at {start}");
            }
            if rng.below(3) == 0 {
                c.store().prune_deletes(ts(start)).expect("prune");
            }
            let req = prewrite(muts.clone(), ts(start));
            let mut req = Arc::try_unwrap(req).expect("one owner");
            req.mode = LockMode::Pessimistic;
            req.locked = vec![true; req.mutations.len()];
            c.prewrite(Arc::new(req)).await.expect("pessimistic prewrite");
        } else {
            c.prewrite(prewrite(muts.clone(), ts(start))).await.expect("prewrite");
        }
        // A prewrite keeps what its point reads found for the commit, as a lock does.
        if pessimistic && rng.below(4) == 0 {
            c.store().prune_deletes(ts(start)).expect("prune");
        }
        if rng.below(8) == 0 {
            c.rollback(&ks, ts(start)).await.expect("rollback");
            continue;
        }
        c.commit(&ks, ts(start), ts(commit)).await.expect("commit");
        for m in muts {
            match m {
                Mutation::Put(k, v) | Mutation::Insert(k, v) => model.entry(k).or_default().push((commit, Some(v))),
                Mutation::Delete(k) => model.entry(k).or_default().push((commit, None)),
                Mutation::Lock(_) => {}
            }
        }
    }
}

#[tokio::test]
async fn reads_agree_with_the_history_at_every_timestamp_before_and_after_gc() {
    let c = LocalClient::new(Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open")), false);
    let keys = 12;
    let mut model = Model::new();
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut now = 10;
    random_txns(&c, &mut model, &mut rng, &mut now, keys, 300).await;
    for at in [5, 11, 12, 57, 200, 333, 480, now] {
        check_reads(&c, &model, keys, at, at.saturating_sub(40)).await;
    }
    // GC at 400: reads at or above it are unchanged.
    let removed = c.store().gc(ts(400)).expect("gc").versions_removed;
    assert!(removed > 100, "only {removed} versions collected");
    for at in [400, 401, 480, now] {
        check_reads(&c, &model, keys, at, 400).await;
    }
    // Writes after GC supersede versions it kept; a second pass keeps what readers above
    // its safe point need.
    let before = now;
    random_txns(&c, &mut model, &mut rng, &mut now, keys, 150).await;
    for at in [400, 480, before, before + 1, before + 77, now] {
        // (The changes since a point GC has passed may miss collected deletions.)
        check_reads(&c, &model, keys, at, at.saturating_sub(30).max(400)).await;
    }
    let safe = before + 100;
    assert!(c.store().gc(ts(safe)).expect("gc").versions_removed > 0);
    for at in [safe, safe + 1, safe + 50, now] {
        check_reads(&c, &model, keys, at, safe).await;
    }
}

/// An engine that counts the positioning calls of cursors over one column family.
struct Counting {
    inner: MemoryEngine,
    cf: Cf,
    steps: Arc<AtomicU64>,
}

struct CountingCursor<'a> {
    inner: Box<dyn Cursor + 'a>,
    steps: Option<Arc<AtomicU64>>,
}

impl Cursor for CountingCursor<'_> {
    fn seek(&mut self, key: &[u8]) {
        if let Some(s) = &self.steps {
            s.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.seek(key)
    }
    fn next(&mut self) {
        if let Some(s) = &self.steps {
            s.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.next()
    }
    fn valid(&self) -> Result<bool> {
        self.inner.valid()
    }
    fn key(&self) -> &[u8] {
        self.inner.key()
    }
    fn value(&self) -> &[u8] {
        self.inner.value()
    }
}

impl Engine for Counting {
    fn get(&self, cf: Cf, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if cf == self.cf {
            self.steps.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.get(cf, key)
    }
    fn cursor(&self, cf: Cf, lower: &[u8], upper: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        let steps = (cf == self.cf).then(|| self.steps.clone());
        Ok(Box::new(CountingCursor { inner: self.inner.cursor(cf, lower, upper)?, steps }))
    }
    fn versions_cursor(&self, cf: Cf, key: &[u8]) -> Result<Box<dyn Cursor + '_>> {
        let steps = (cf == self.cf).then(|| self.steps.clone());
        Ok(Box::new(CountingCursor { inner: self.inner.versions_cursor(cf, key)?, steps }))
    }
    fn write(&self, batch: WriteBatch, sync: bool) -> Result<()> {
        self.inner.write(batch, sync)
    }
    fn sync_wal(&self) -> Result<()> {
        self.inner.sync_wal()
    }
    fn compact_range(&self, cf: Cf, start: &[u8], end: &[u8]) -> Result<()> {
        self.inner.compact_range(cf, start, end)
    }
    fn size_bytes(&self) -> Result<u64> {
        self.inner.size_bytes()
    }
}

#[tokio::test]
async fn a_current_read_never_walks_old_versions() {
    let steps = Arc::new(AtomicU64::new(0));
    let engine = Arc::new(Counting { inner: MemoryEngine::new(), cf: Cf::Write, steps: steps.clone() });
    let c = LocalClient::new(Arc::new(MvccStore::open(engine).expect("open")), false);
    // 20 keys, each updated 50 times; every other key deleted at the end.
    let mut t = 10;
    for round in 0..50 {
        let muts: Vec<Mutation> = (0..20).map(|i| Mutation::Put(key(i), format!("{i}.{round}").into_bytes())).collect();
        let ks: Vec<Vec<u8>> = muts.iter().map(|m| m.key().to_vec()).collect();
        c.prewrite(prewrite(muts, ts(t))).await.expect("prewrite");
        c.commit(&ks, ts(t), ts(t + 1)).await.expect("commit");
        t += 2;
    }
    let dels: Vec<Mutation> = (0..20).step_by(2).map(|i| Mutation::Delete(key(i))).collect();
    let ks: Vec<Vec<u8>> = dels.iter().map(|m| m.key().to_vec()).collect();
    c.prewrite(prewrite(dels, ts(t))).await.expect("prewrite");
    c.commit(&ks, ts(t), ts(t + 1)).await.expect("commit");
    let now = t + 5;

    steps.store(0, Ordering::Relaxed);
    let rows = c.scan(b"k", b"l", ts(now), usize::MAX).await.expect("scan");
    assert_eq!(rows.len(), 10);
    assert_eq!(rows[0], (key(1), b"1.49".to_vec()));
    let all: Vec<Vec<u8>> = (0..20).map(key).collect();
    let got = c.batch_get(&all, ts(now)).await.expect("get");
    assert_eq!(got.iter().filter(|v| v.is_some()).count(), 10);
    assert_eq!(steps.load(Ordering::Relaxed), 0, "a current read touched the write CF");

    // A reader older than the last commits goes to the write CF for those keys only.
    let old = c.scan(b"k", b"l", ts(20), usize::MAX).await.expect("scan");
    assert_eq!(old.len(), 20);
    assert_eq!(old[3], (key(3), b"3.4".to_vec()));
    assert!(steps.load(Ordering::Relaxed) > 0);
}

#[tokio::test]
async fn gc_removes_the_latest_record_of_a_collected_deletion() {
    let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::new());
    let c = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open")), false);
    for (m, start) in [(Mutation::Put(b"a".to_vec(), b"1".to_vec()), 10), (Mutation::Delete(b"a".to_vec()), 20)] {
        c.prewrite(prewrite(vec![m], ts(start))).await.expect("prewrite");
        c.commit(&[b"a".to_vec()], ts(start), ts(start + 1)).await.expect("commit");
    }
    c.prewrite(prewrite(vec![Mutation::Put(b"b".to_vec(), b"2".to_vec())], ts(30))).await.expect("prewrite");
    c.commit(&[b"b".to_vec()], ts(30), ts(31)).await.expect("commit");
    let latest = |k: &[u8]| engine.get(Cf::Latest, &encode_user_key(k)).expect("get");
    assert!(latest(b"a").is_some());
    // Below the deletion nothing goes; past it, the deleted key is gone from both CFs.
    c.store().gc(ts(15)).expect("gc");
    assert!(latest(b"a").is_some());
    c.store().gc(ts(40)).expect("gc");
    assert_eq!(latest(b"a"), None);
    assert!(latest(b"b").is_some(), "a live key keeps its record");
    let rows = c.scan(b"", b"z", ts(50), 10).await.expect("scan");
    assert_eq!(rows, vec![(b"b".to_vec(), b"2".to_vec())]);
    // Written again after GC, it is back.
    c.prewrite(prewrite(vec![Mutation::Put(b"a".to_vec(), b"3".to_vec())], ts(60))).await.expect("prewrite");
    c.commit(&[b"a".to_vec()], ts(60), ts(61)).await.expect("commit");
    assert_eq!(c.batch_get(&[b"a".to_vec()], ts(70)).await.expect("get"), vec![Some(b"3".to_vec())]);
}

/// A write record as `Write::encode` gives it, for stores made by hand as older versions
/// left them.
fn write_record(kind: Kind, start: u64, value: Option<&[u8]>) -> Vec<u8> {
    Write { kind, start_ts: ts(start), short_value: value.map(<[u8]>::to_vec), delta_base: None }.encode()
}

#[tokio::test]
async fn compactions_drop_the_long_values_an_older_store_kept_apart() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine: Arc<dyn Engine> = Arc::new(strata_storage_rocks::RocksEngine::open(dir.path()).expect("open"));
    // As an older version left it: "a" put at 11 with its long value in the data CF, then
    // at 21 (inline); "b" put at 11 with a long value, its newest.
    let mut b = WriteBatch::default();
    let (a, bk) = (encode_user_key(b"a"), encode_user_key(b"b"));
    b.put(Cf::Write, versioned(&a, ts(11)), write_record(Kind::Put, 10, None));
    b.put(Cf::Data, versioned(&a, ts(10)), vec![b'L'; 400]);
    b.put(Cf::Write, versioned(&a, ts(21)), write_record(Kind::Put, 20, Some(b"a2")));
    b.put(Cf::Write, versioned(&bk, ts(11)), write_record(Kind::Put, 10, None));
    b.put(Cf::Data, versioned(&bk, ts(10)), vec![b'M'; 300]);
    engine.write(b, true).expect("write");
    let c = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open")), false);
    assert_eq!(c.batch_get(&[b"a".to_vec()], ts(15)).await.expect("get"), vec![Some(vec![b'L'; 400])]);
    // Past the safe point "a"@11 is below a kept version: a compaction drops its record and
    // the next GC step its value. "b"'s only version stays, value and all.
    let first = c.store().advance_gc(ts(30)).expect("advance");
    let all = [0u8; 0].as_slice()..[0xFFu8; 16].as_slice();
    engine.compact_range(Cf::Write, all.start, all.end).expect("compact");
    let second = c.store().advance_gc(ts(30)).expect("advance");
    assert_eq!(first.values_removed + second.values_removed, 1, "{first:?} {second:?}");
    assert_eq!(engine.get(Cf::Write, &versioned(&a, ts(11))).expect("get"), None);
    assert_eq!(engine.get(Cf::Data, &versioned(&a, ts(10))).expect("get"), None);
    assert_eq!(engine.get(Cf::Data, &versioned(&bk, ts(10))).expect("get"), Some(vec![b'M'; 300]));
    let keys = [b"a".to_vec(), b"b".to_vec()];
    assert_eq!(c.batch_get(&keys, ts(40)).await.expect("get"), vec![Some(b"a2".to_vec()), Some(vec![b'M'; 300])]);
}

#[tokio::test]
async fn a_store_from_before_the_latest_cf_gets_it_built_at_open() {
    let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::new());
    // As an older version left it: "a" put at 11 and at 21 (long value), "b" put at 11 and
    // deleted at 21, "c" put at 11 then a lock-only record at 31.
    let mut b = WriteBatch::default();
    let (a, bk, ck) = (encode_user_key(b"a"), encode_user_key(b"b"), encode_user_key(b"c"));
    b.put(Cf::Write, versioned(&a, ts(11)), write_record(Kind::Put, 10, Some(b"a1")));
    b.put(Cf::Write, versioned(&a, ts(21)), write_record(Kind::Put, 20, None));
    b.put(Cf::Data, versioned(&a, ts(20)), vec![b'L'; 400]);
    b.put(Cf::Write, versioned(&bk, ts(11)), write_record(Kind::Put, 10, Some(b"b1")));
    b.put(Cf::Write, versioned(&bk, ts(21)), write_record(Kind::Delete, 20, None));
    b.put(Cf::Write, versioned(&ck, ts(11)), write_record(Kind::Put, 10, Some(b"c1")));
    b.put(Cf::Write, versioned(&ck, ts(31)), write_record(Kind::Lock, 30, None));
    engine.write(b, true).expect("write");

    let c = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open")), false);
    let rows = c.scan(b"", b"z", ts(40), 10).await.expect("scan");
    assert_eq!(rows, vec![(b"a".to_vec(), vec![b'L'; 400]), (b"c".to_vec(), b"c1".to_vec())]);
    let old = c.scan(b"", b"z", ts(15), 10).await.expect("scan");
    assert_eq!(old.len(), 3);
    let keys: Vec<Vec<u8>> = [b"a", b"b", b"c"].iter().map(|k| k.to_vec()).collect();
    assert_eq!(c.batch_get(&keys, ts(40)).await.expect("get"), vec![Some(vec![b'L'; 400]), None, Some(b"c1".to_vec())]);
    drop(c);

    // A layout this version does not know is refused, not misread.
    let mut b = WriteBatch::default();
    b.put(Cf::Raw, b"mvcc.format".to_vec(), b"latest-v9".to_vec());
    engine.write(b, true).expect("write");
    let err = MvccStore::open(engine).err().expect("unknown layout refused");
    assert!(err.to_string().contains("unknown MVCC layout"), "{err}");
}

#[tokio::test]
async fn a_newest_put_lives_only_in_the_latest_cf_until_superseded() {
    let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::new());
    let c = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open")), false);
    let (v1, v2) = (vec![b'x'; 1000], vec![b'y'; 700]);
    let enc = encode_user_key(b"a");
    let commit = |v: &Vec<u8>, start: u64| {
        let (c, v) = (c.clone(), v.clone());
        async move {
            c.prewrite(prewrite(vec![Mutation::Put(b"a".to_vec(), v)], ts(start))).await.expect("prewrite");
            c.commit(&[b"a".to_vec()], ts(start), ts(start + 1)).await.expect("commit");
        }
    };
    commit(&v1, 10).await;
    // An insert is written once: its latest record, with the long value inline.
    let raw = engine.get(Cf::Latest, &enc).expect("get").expect("latest record");
    let (at, w) = strata_mvcc::records::split_latest(&raw).expect("decode");
    assert_eq!((at, w.kind, w.short_value), (ts(11), Kind::Put, Some(v1.as_slice())));
    assert_eq!(engine.get(Cf::Write, &versioned(&enc, ts(11))).expect("get"), None);
    assert_eq!(engine.get(Cf::Data, &versioned(&enc, ts(10))).expect("get"), None);
    // Superseded, it moves into the write CF, its long value inline (one entry, not a
    // record and a value); the new version is again only in the latest CF.
    commit(&v2, 20).await;
    let rec = engine.get(Cf::Write, &versioned(&enc, ts(11))).expect("get").expect("moved record");
    let moved = Write { kind: Kind::Put, start_ts: ts(10), short_value: Some(v1.clone()), delta_base: None };
    assert_eq!(Write::decode(&rec).expect("decode"), moved);
    assert_eq!(engine.get(Cf::Data, &versioned(&enc, ts(10))).expect("get"), None);
    assert_eq!(engine.get(Cf::Write, &versioned(&enc, ts(21))).expect("get"), None);
    let raw = engine.get(Cf::Latest, &enc).expect("get").expect("latest record");
    assert_eq!(strata_mvcc::records::split_latest(&raw).expect("decode").1.short_value, Some(v2.as_slice()));
    assert_eq!(c.batch_get(&[b"a".to_vec()], ts(30)).await.expect("get"), vec![Some(v2.clone())]);
    assert_eq!(c.batch_get(&[b"a".to_vec()], ts(15)).await.expect("get"), vec![Some(v1.clone())]);
    assert_eq!(c.batch_get(&[b"a".to_vec()], ts(5)).await.expect("get"), vec![None]);
    assert_eq!(c.scan(b"", b"z", ts(15), 10).await.expect("scan"), vec![(b"a".to_vec(), v1.clone())]);
    // A transaction's status is found on either side of the move.
    let status = |start: u64| c.store().check_txn_status(b"a", ts(start), ts(100), false).expect("status");
    assert_eq!(status(10), strata_kv::TxnStatus::Committed(ts(11)));
    assert_eq!(status(20), strata_kv::TxnStatus::Committed(ts(21)));
    // GC past both keeps only the newest (in the latest CF) and drops the moved one.
    c.store().gc(ts(40)).expect("gc");
    assert_eq!(engine.get(Cf::Write, &versioned(&enc, ts(11))).expect("get"), None);
    assert_eq!(engine.get(Cf::Data, &versioned(&enc, ts(10))).expect("get"), None);
    assert_eq!(c.batch_get(&[b"a".to_vec()], ts(50)).await.expect("get"), vec![Some(v2.clone())]);
    // A deletion has its twin in the write CF, where GC finds it; the Put it supersedes moves.
    c.prewrite(prewrite(vec![Mutation::Delete(b"a".to_vec())], ts(60))).await.expect("prewrite");
    c.commit(&[b"a".to_vec()], ts(60), ts(61)).await.expect("commit");
    assert!(engine.get(Cf::Write, &versioned(&enc, ts(61))).expect("get").is_some());
    assert!(engine.get(Cf::Write, &versioned(&enc, ts(21))).expect("get").is_some());
    assert_eq!(c.batch_get(&[b"a".to_vec()], ts(55)).await.expect("get"), vec![Some(v2)]);
    c.store().gc(ts(70)).expect("gc");
    assert_eq!(engine.get(Cf::Latest, &enc).expect("get"), None);
    assert_eq!(engine.get(Cf::Write, &versioned(&enc, ts(21))).expect("get"), None);
    assert_eq!(engine.get(Cf::Data, &versioned(&enc, ts(20))).expect("get"), None);
}

#[tokio::test]
async fn checks_that_walk_the_history_see_a_put_only_the_latest_cf_holds() {
    let engine: Arc<dyn Engine> = Arc::new(MemoryEngine::new());
    let c = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open")), false);
    c.prewrite(prewrite(vec![Mutation::Put(b"k".to_vec(), b"1".to_vec())], ts(12))).await.expect("prewrite");
    c.commit(&[b"k".to_vec()], ts(12), ts(15)).await.expect("commit");
    // An optimistic transaction that started at 10 and read k FOR UPDATE conflicts with it.
    let lock_only = c.prewrite(prewrite(vec![Mutation::Lock(b"k".to_vec())], ts(10))).await;
    assert!(matches!(lock_only, Err(strata_common::Error::WriteConflict { .. })), "{lock_only:?}");
    // A late duplicate of the committed transaction's prewrite is refused, not staged again.
    let again = c.prewrite(prewrite(vec![Mutation::Lock(b"k".to_vec())], ts(12))).await;
    assert!(again.is_err(), "{again:?}");
    assert_eq!(c.store().lock_count(), 0);
}

#[tokio::test]
async fn reads_below_the_prune_floor_still_see_pruned_deletions() {
    let c = LocalClient::new(Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open")), false);
    let keys = 12;
    let mut model = Model::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut now = 10;
    random_txns(&c, &mut model, &mut rng, &mut now, keys, 200).await;
    // Prune at 250: the deletions committed below it lose their latest records, and every
    // read, above or below the floor (a reader the caller did not know of), is unchanged.
    let first = c.store().prune_deletes(ts(250)).expect("prune");
    assert_eq!(
        c.store().pending_prunes() as u64,
        model.values().flatten().filter(|(c, v)| v.is_none() && *c > 250).count() as u64
    );
    for at in [5, 11, 57, 200, 249, 250, 251, 333, now] {
        check_reads(&c, &model, keys, at, at.saturating_sub(40)).await;
    }
    // Pruning, GC and new writes in turn.
    let before = now;
    random_txns(&c, &mut model, &mut rng, &mut now, keys, 100).await;
    let second = c.store().prune_deletes(ts(now)).expect("prune");
    assert_eq!(c.store().pending_prunes(), 0);
    // Each key whose last change is a deletion lost its latest record, once.
    let deleted_keys = model.values().filter(|h| h.last().is_some_and(|(_, v)| v.is_none())).count() as u64;
    assert!(deleted_keys > 0);
    assert_eq!(first + second, deleted_keys);
    for at in [250, before, before + 9, now] {
        check_reads(&c, &model, keys, at, at.saturating_sub(30)).await;
    }
    assert!(c.store().gc(ts(before)).expect("gc").versions_removed > 0);
    random_txns(&c, &mut model, &mut rng, &mut now, keys, 60).await;
    c.store().prune_deletes(ts(now - 20)).expect("prune");
    for at in [before, before + 9, now - 30, now - 21, now] {
        check_reads(&c, &model, keys, at, at.saturating_sub(30).max(before)).await;
    }
}

#[tokio::test]
async fn a_pruned_deletion_is_not_stepped_over_and_still_conflicts() {
    let steps = Arc::new(AtomicU64::new(0));
    let engine = Arc::new(Counting { inner: MemoryEngine::new(), cf: Cf::Latest, steps: steps.clone() });
    let c = LocalClient::new(Arc::new(MvccStore::open(engine).expect("open")), false);
    // A queue: 100 rows inserted, the oldest 90 deleted one by one.
    let muts: Vec<Mutation> = (0..100).map(|i| Mutation::Put(key(i), b"v".to_vec())).collect();
    let ks: Vec<Vec<u8>> = muts.iter().map(|m| m.key().to_vec()).collect();
    c.prewrite(prewrite(muts, ts(10))).await.expect("prewrite");
    c.commit(&ks, ts(10), ts(11)).await.expect("commit");
    for i in 0..90 {
        let t = 20 + 2 * i;
        c.prewrite(prewrite(vec![Mutation::Delete(key(i))], ts(t))).await.expect("prewrite");
        c.commit(&[key(i)], ts(t), ts(t + 1)).await.expect("commit");
    }
    let first = |at: u64| {
        let c = c.clone();
        async move { c.scan(b"k", b"l", ts(at), 1).await.expect("scan") }
    };
    steps.store(0, Ordering::Relaxed);
    assert_eq!(first(300).await, vec![(key(90), b"v".to_vec())]);
    assert!(steps.load(Ordering::Relaxed) > 90, "the scan steps over the deletions");
    // Pruned up to 150 (the deletions of k000..k064): the scan starts at k065.
    assert_eq!(c.store().prune_deletes(ts(150)).expect("prune"), 65);
    steps.store(0, Ordering::Relaxed);
    assert_eq!(first(300).await, vec![(key(90), b"v".to_vec())]);
    let n = steps.load(Ordering::Relaxed);
    assert!((26..40).contains(&n), "{n} steps");
    // A reader from before the deletions still sees the rows.
    assert_eq!(first(15).await, vec![(key(0), b"v".to_vec())]);
    assert_eq!(c.batch_get(&[key(5)], ts(15)).await.expect("get"), vec![Some(b"v".to_vec())]);
    // Write commands that started before a pruned deletion conflict with it.
    let late = c.prewrite(prewrite(vec![Mutation::Put(key(5), b"w".to_vec())], ts(12))).await;
    assert!(matches!(late, Err(strata_common::Error::WriteConflict { .. })), "{late:?}");
    let lock = strata_kv::PessimisticLockRequest {
        keys: vec![key(6)],
        primary: key(6),
        start_ts: ts(13),
        for_update_ts: ts(13),
        ttl_ms: 3000,
        wait_timeout_ms: None,
        seen: None,
    };
    let locked = c.pessimistic_lock(lock.clone()).await;
    assert!(matches!(locked, Err(strata_common::Error::WriteConflict { .. })), "{locked:?}");
    // At a newer for_update_ts the lock is taken, and the key reads as deleted.
    let locked = c.pessimistic_lock(strata_kv::PessimisticLockRequest { for_update_ts: ts(200), ..lock }).await;
    assert_eq!(locked.expect("lock"), vec![None]);
    // Pruning again skips what is not a deletion any more: k070 written since.
    c.prewrite(prewrite(vec![Mutation::Put(key(70), b"again".to_vec())], ts(400))).await.expect("prewrite");
    c.commit(&[key(70)], ts(400), ts(401)).await.expect("commit");
    c.store().prune_deletes(ts(500)).expect("prune");
    assert_eq!(first(500).await, vec![(key(70), b"again".to_vec())]);
    assert_eq!(c.scan(b"k", b"l", ts(500), usize::MAX).await.expect("scan").len(), 11);
}

#[tokio::test]
async fn commits_after_pessimistic_locks_keep_every_version() {
    // A pessimistic lock keeps the key's latest record for its commit, which moves it into
    // the write CF without reading it again: reads at every timestamp still agree with the
    // history, with deletions pruned between some locks and their commits, and after GC.
    let c = LocalClient::new(Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open")), false);
    let keys = 10;
    let mut model = Model::new();
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut now = 10;
    random_txns_in(&c, &mut model, &mut rng, &mut now, keys, 300, true).await;
    for at in [5, 11, 12, 57, 200, 333, 480, now] {
        check_reads(&c, &model, keys, at, at.saturating_sub(50)).await;
    }
    let mid = now;
    random_txns_in(&c, &mut model, &mut rng, &mut now, keys, 100, true).await;
    assert!(c.store().gc(ts(mid)).expect("gc").versions_removed > 0);
    for at in [mid, mid + 7, now - 3, now] {
        check_reads(&c, &model, keys, at, at.saturating_sub(30).max(mid)).await;
    }
    assert_eq!(c.store().lock_count(), 0);
}

#[tokio::test]
async fn a_one_step_commit_writes_only_keys_nobody_touched_since_its_start() {
    let c = LocalClient::new(Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open")), false);
    let get = |k: &'static [u8], at: u64| {
        let c = c.clone();
        async move { c.batch_get(&[k.to_vec()], ts(at)).await.expect("get").remove(0) }
    };
    let put = |k: &[u8], v: &[u8]| (k.to_vec(), v.to_vec());
    c.prewrite(prewrite(vec![Mutation::Put(b"a".to_vec(), b"old".to_vec())], ts(10))).await.expect("prewrite");
    c.commit(&[b"a".to_vec()], ts(10), ts(20)).await.expect("commit");

    // Untouched since 30: committed at 40, the superseded version kept for older readers.
    let wrote = c.commit_unread(vec![put(b"a", b"new"), put(b"b", b"two")], ts(30), ts(40)).await.expect("commit");
    assert!(wrote);
    assert_eq!(get(b"a", 39).await.as_deref(), Some(&b"old"[..]));
    assert_eq!(get(b"a", 40).await.as_deref(), Some(&b"new"[..]));
    assert_eq!(get(b"b", 39).await, None);
    assert_eq!(get(b"b", 40).await.as_deref(), Some(&b"two"[..]));

    // A key written at or after the start: nothing is written, not even the other keys.
    let wrote = c.commit_unread(vec![put(b"c", b"x"), put(b"a", b"newer")], ts(35), ts(50)).await.expect("commit");
    assert!(!wrote);
    assert_eq!(get(b"c", 60).await, None);
    assert_eq!(get(b"a", 60).await.as_deref(), Some(&b"new"[..]));

    // A locked key (a prewrite not yet committed): nothing is written.
    c.prewrite(prewrite(vec![Mutation::Put(b"d".to_vec(), b"theirs".to_vec())], ts(60))).await.expect("prewrite");
    let wrote = c.commit_unread(vec![put(b"e", b"x"), put(b"d", b"mine")], ts(65), ts(70)).await.expect("commit");
    assert!(!wrote);
    c.commit(&[b"d".to_vec()], ts(60), ts(75)).await.expect("commit");
    assert_eq!(get(b"d", 80).await.as_deref(), Some(&b"theirs"[..]));
    assert_eq!(get(b"e", 80).await, None);

    // Many keys (one MultiGet), all new, next to an old one: all written.
    let many: Vec<(Vec<u8>, Vec<u8>)> = (0..50u32).map(|i| (format!("m{i:03}").into_bytes(), vec![i as u8])).collect();
    let mut with_old = many.clone();
    with_old.push(put(b"a", b"newest"));
    assert!(c.commit_unread(with_old, ts(90), ts(95)).await.expect("commit"));
    let keys: Vec<Vec<u8>> = many.iter().map(|(k, _)| k.clone()).collect();
    let got = c.batch_get(&keys, ts(95)).await.expect("get");
    assert_eq!(got, many.iter().map(|(_, v)| Some(v.clone())).collect::<Vec<_>>());
    assert_eq!(get(b"a", 94).await.as_deref(), Some(&b"new"[..]));
    assert_eq!(get(b"a", 95).await.as_deref(), Some(&b"newest"[..]));

    // Runs large enough to probe their span for latest records first (a backfill's run).
    let run = |p: &str, v: u8| -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..100u32).map(|i| (format!("{p}{i:03}").into_bytes(), vec![v])).collect()
    };
    let read_run = |p: &'static str, at: u64| {
        let c = c.clone();
        async move {
            let keys: Vec<Vec<u8>> = (0..100u32).map(|i| format!("{p}{i:03}").into_bytes()).collect();
            c.batch_get(&keys, ts(at)).await.expect("get")
        }
    };
    // An empty span: all written.
    assert!(c.commit_unread(run("n", 1), ts(100), ts(105)).await.expect("commit"));
    assert_eq!(read_run("n", 105).await, vec![Some(vec![1]); 100]);
    assert_eq!(read_run("n", 104).await, vec![None; 100]);
    // One key of the span committed after the start: nothing written.
    c.prewrite(prewrite(vec![Mutation::Put(b"q050".to_vec(), b"theirs".to_vec())], ts(110))).await.expect("prewrite");
    c.commit(&[b"q050".to_vec()], ts(110), ts(115)).await.expect("commit");
    assert!(!c.commit_unread(run("q", 2), ts(112), ts(120)).await.expect("commit"));
    let got = read_run("q", 130).await;
    assert_eq!(got.iter().filter(|v| v.is_some()).count(), 1, "only the writer's key");
    assert_eq!(got[50].as_deref(), Some(&b"theirs"[..]));
    // A key of the span committed before the start: all written, its old version kept.
    assert!(c.commit_unread(run("q", 3), ts(130), ts(135)).await.expect("commit"));
    assert_eq!(read_run("q", 135).await, vec![Some(vec![3]); 100]);
    assert_eq!(get(b"q050", 134).await.as_deref(), Some(&b"theirs"[..]));
    assert_eq!(c.store().lock_count(), 0);
}

#[tokio::test]
async fn an_insert_mutation_fails_on_a_key_with_a_value_and_nothing_is_written() {
    let c = LocalClient::new(Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open")), false);
    let pessimistic = |muts: Vec<Mutation>, start: u64| {
        let mut req = Arc::try_unwrap(prewrite(muts, ts(start))).expect("one owner");
        req.mode = LockMode::Pessimistic;
        Arc::new(req)
    };
    c.prewrite(prewrite(vec![Mutation::Put(b"a".to_vec(), b"1".to_vec())], ts(10))).await.expect("prewrite");
    c.commit(&[b"a".to_vec()], ts(10), ts(11)).await.expect("commit");
    c.prewrite(prewrite(vec![Mutation::Put(b"d".to_vec(), b"1".to_vec())], ts(12))).await.expect("prewrite");
    c.commit(&[b"d".to_vec()], ts(12), ts(13)).await.expect("commit");
    c.prewrite(prewrite(vec![Mutation::Delete(b"d".to_vec())], ts(14))).await.expect("prewrite");
    c.commit(&[b"d".to_vec()], ts(14), ts(15)).await.expect("commit");

    // A key with a value: the whole prewrite fails, the other key is not locked.
    let both = vec![Mutation::Insert(b"b".to_vec(), b"2".to_vec()), Mutation::Insert(b"a".to_vec(), b"2".to_vec())];
    match c.prewrite(pessimistic(both, 20)).await {
        Err(strata_common::Error::AlreadyExists { key }) => assert_eq!(key, b"a"),
        other => panic!("expected AlreadyExists, got {other:?}"),
    }
    assert_eq!(c.store().lock_count(), 0);

    // Absent and deleted keys take the insert, committed like a Put.
    let fresh = vec![Mutation::Insert(b"b".to_vec(), b"2".to_vec()), Mutation::Insert(b"d".to_vec(), b"2".to_vec())];
    c.prewrite(pessimistic(fresh, 30)).await.expect("insert of absent keys");
    c.commit(&[b"b".to_vec(), b"d".to_vec()], ts(30), ts(31)).await.expect("commit");
    let got = c.batch_get(&[b"b".to_vec(), b"d".to_vec()], ts(32)).await.expect("get");
    assert_eq!(got, vec![Some(b"2".to_vec()), Some(b"2".to_vec())]);

    // A key another transaction holds is reported as locked (the committer waits for it).
    c.prewrite(prewrite(vec![Mutation::Put(b"e".to_vec(), b"x".to_vec())], ts(40))).await.expect("prewrite");
    let locked = c.prewrite(pessimistic(vec![Mutation::Insert(b"e".to_vec(), b"y".to_vec())], 41)).await;
    assert!(matches!(locked, Err(strata_common::Error::KeyLocked(_))), "{locked:?}");
}

/// Write records in the write CF, counted by kind, and whether at or below `at`.
fn write_cf_kinds(engine: &dyn Engine, at: u64) -> BTreeMap<(&'static str, bool), usize> {
    let mut kinds = BTreeMap::new();
    let mut c = engine.cursor(Cf::Write, &[], &[0xFF; 16]).expect("cursor");
    c.seek(&[]);
    while c.valid().expect("valid") {
        let kind = match Write::decode(c.value()).expect("record").kind {
            Kind::Put => "put",
            Kind::Delete => "delete",
            _ => "other",
        };
        let (_, commit) = strata_mvcc::records::split_versioned(c.key()).expect("versioned key");
        *kinds.entry((kind, commit <= ts(at))).or_default() += 1;
        c.next();
    }
    kinds
}

#[tokio::test]
async fn compactions_drop_old_versions_below_the_safe_point_and_reads_agree() {
    let dir = tempfile::tempdir().expect("tempdir");
    let engine: Arc<dyn Engine> = Arc::new(strata_storage_rocks::RocksEngine::open(dir.path()).expect("open"));
    let c = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open")), false);
    let keys = 12;
    let mut model = Model::new();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut now = 10;
    random_txns(&c, &mut model, &mut rng, &mut now, keys, 400).await;
    let all = [0u8; 0].as_slice()..[0xFFu8; 16].as_slice();
    engine.compact_range(Cf::Write, all.start, all.end).expect("compact");
    let before = write_cf_kinds(engine.as_ref(), 500);
    // Without a safe point compactions keep everything.
    let none = c.store().advance_gc(ts(1)).expect("advance");
    assert_eq!((none.records_walked, none.versions_compacted_away), (0, 0));
    // With one, a compaction drops what is below a kept version at or below it, and the
    // next step deletes the long values of what it dropped; no walk ran. The periodic GC
    // of a filtering store does not walk in its first interval either, although it has
    // never walked.
    let periodic = c.store().gc_periodic(ts(500), strata_mvcc::gc::FILTERED_WALK_INTERVAL).expect("gc");
    assert_eq!(periodic.records_walked, 0);
    engine.compact_range(Cf::Write, all.start, all.end).expect("compact");
    let dropped = c.store().advance_gc(ts(500)).expect("advance");
    assert_eq!(dropped.records_walked, 0);
    assert!(dropped.versions_compacted_away > 150, "compactions dropped only {dropped:?}");
    // Values are inline in their records: none was in the data CF (see
    // `compactions_drop_the_long_values_an_older_store_kept_apart` for those).
    assert_eq!(dropped.values_removed, 0, "{dropped:?}");
    let after = write_cf_kinds(engine.as_ref(), 500);
    let total = |kinds: &BTreeMap<(&str, bool), usize>, below: bool| {
        kinds.iter().filter(|((_, b), _)| *b == below).map(|(_, n)| n).sum::<usize>()
    };
    assert!(before.contains_key(&("other", true)), "the history has rollback or lock records: {before:?}");
    assert_eq!(
        after.get(&("other", true)),
        None,
        "rollback and lock records at or below the safe point stay: {after:?}"
    );
    // Nothing above the safe point goes; at or below it, one Put or Delete per key at most.
    assert_eq!(total(&after, false), total(&before, false));
    assert_eq!(total(&after, true) + dropped.versions_compacted_away as usize, total(&before, true));
    assert!(total(&after, true) <= keys as usize, "{after:?}");
    for at in [500, 501, 650, now] {
        check_reads(&c, &model, keys, at, 500).await;
    }
    // What compactions cannot decide alone, the walk still removes; reads stay right.
    let walked = c.store().gc_periodic(ts(500), std::time::Duration::ZERO).expect("gc");
    assert!(walked.records_walked > 0);
    for at in [500, 777, now] {
        check_reads(&c, &model, keys, at, 500).await;
    }
    // More writes, a later safe point, a compaction: the same again.
    let before = now;
    random_txns(&c, &mut model, &mut rng, &mut now, keys, 200).await;
    let safe = before + 150;
    c.store().advance_gc(ts(safe)).expect("advance");
    engine.compact_range(Cf::Write, all.start, all.end).expect("compact");
    let second = c.store().advance_gc(ts(safe)).expect("advance");
    assert!(second.versions_compacted_away > 50, "the second compaction dropped only {second:?}");
    for at in [safe, safe + 1, now] {
        check_reads(&c, &model, keys, at, safe).await;
    }
}

#[tokio::test]
async fn a_lock_takes_the_record_a_scan_read_unless_its_key_was_committed_since() {
    let c = LocalClient::new(Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open")), false);
    let commit = |k: &'static [u8], v: &'static [u8], start: u64| {
        let c = c.clone();
        async move {
            c.prewrite(prewrite(vec![Mutation::Put(k.to_vec(), v.to_vec())], ts(start))).await.expect("prewrite");
            c.commit(&[k.to_vec()], ts(start), ts(start + 1)).await.expect("commit");
        }
    };
    commit(b"a", b"a1", 10).await;
    commit(b"b", b"b1", 12).await;
    let got = c.scan_for_lock(b"a", b"c", ts(20), 10).await.expect("scan for lock");
    assert_eq!(
        got.iter().map(|(k, v, _)| (k.clone(), v.clone())).collect::<Vec<_>>(),
        vec![(b"a".to_vec(), b"a1".to_vec()), (b"b".to_vec(), b"b1".to_vec())]
    );
    assert!(got.iter().all(|(_, _, r)| r.is_some()), "both read from their latest records");
    // "b" is committed again after the scan; "a" is not.
    commit(b"b", b"b2", 30).await;
    // The record handed back for "a" is a stand-in with another value, to see which one
    // the lock answers with: the stand-in (no read), while "b" is read again.
    let stand_in = latest_record(ts(11), Kind::Put, ts(10), Some(b"as read"));
    let lock = PessimisticLockRequest {
        keys: vec![b"a".to_vec(), b"b".to_vec()],
        primary: b"a".to_vec(),
        start_ts: ts(40),
        for_update_ts: ts(40),
        ttl_ms: 3000,
        wait_timeout_ms: None,
        seen: Some(strata_kv::Seen { ts: ts(20), records: vec![Some(stand_in), got[1].2.clone()] }),
    };
    let values = c.pessimistic_lock(lock).await.expect("lock");
    assert_eq!(values, vec![Some(b"as read".to_vec()), Some(b"b2".to_vec())]);
    c.rollback(&[b"a".to_vec(), b"b".to_vec()], ts(40)).await.expect("rollback");
    // A key committed again after the scan conflicts as it would without the record.
    let lock = PessimisticLockRequest {
        keys: vec![b"b".to_vec()],
        primary: b"b".to_vec(),
        start_ts: ts(25),
        for_update_ts: ts(25),
        ttl_ms: 3000,
        wait_timeout_ms: None,
        seen: Some(strata_kv::Seen { ts: ts(20), records: vec![got[1].2.clone()] }),
    };
    let locked = c.pessimistic_lock(lock).await;
    assert!(matches!(locked, Err(strata_common::Error::WriteConflict { .. })), "{locked:?}");
    // The commit of a lock taken with a scan's record keeps the superseded version.
    let lock = PessimisticLockRequest {
        keys: vec![b"a".to_vec()],
        primary: b"a".to_vec(),
        start_ts: ts(50),
        for_update_ts: ts(50),
        ttl_ms: 3000,
        wait_timeout_ms: None,
        seen: Some(strata_kv::Seen { ts: ts(45), records: vec![got[0].2.clone()] }),
    };
    assert_eq!(c.pessimistic_lock(lock).await.expect("lock"), vec![Some(b"a1".to_vec())]);
    let mut req = Arc::try_unwrap(prewrite(vec![Mutation::Put(b"a".to_vec(), b"a2".to_vec())], ts(50))).expect("one");
    req.mode = LockMode::Pessimistic;
    req.locked = vec![true];
    c.prewrite(Arc::new(req)).await.expect("prewrite");
    c.commit(&[b"a".to_vec()], ts(50), ts(51)).await.expect("commit");
    let at = |t: u64| {
        let c = c.clone();
        async move { c.batch_get(&[b"a".to_vec()], ts(t)).await.expect("get").remove(0) }
    };
    assert_eq!(at(30).await, Some(b"a1".to_vec()));
    assert_eq!(at(60).await, Some(b"a2".to_vec()));
}
