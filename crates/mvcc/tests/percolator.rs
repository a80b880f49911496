//! Percolator scenarios on the MVCC store, each named after what it proves.

use std::sync::Arc;

use strata_common::{Error, Timestamp};
use strata_kv::{Client, LockMode, Mutation, PessimisticLockRequest, PrewriteRequest, TxnStatus};
use strata_mvcc::{LocalClient, MvccStore};
use strata_storage::MemoryEngine;

fn client() -> LocalClient {
    LocalClient::new(Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open store")), false)
}

fn ts(t: u64) -> Timestamp {
    Timestamp::compose(t, 0)
}

fn put(k: &str, v: &str) -> Mutation {
    Mutation::Put(k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

fn prewrite(muts: Vec<Mutation>, start: Timestamp, mode: LockMode) -> Arc<PrewriteRequest> {
    let primary = muts[0].key().to_vec();
    let locked = vec![mode == LockMode::Pessimistic; muts.len()];
    Arc::new(PrewriteRequest { mutations: muts, primary, start_ts: start, ttl_ms: 3000, mode, locked })
}

/// A request to lock `key` alone (its own primary), failing at once on another's lock.
fn lock_one(key: &str, start: u64, for_update: u64) -> PessimisticLockRequest {
    PessimisticLockRequest {
        keys: vec![key.as_bytes().to_vec()],
        primary: key.as_bytes().to_vec(),
        start_ts: ts(start),
        for_update_ts: ts(for_update),
        ttl_ms: 3000,
        wait_timeout_ms: None,
        seen: None,
    }
}

async fn write(c: &LocalClient, muts: Vec<Mutation>, start: u64, commit: u64) {
    let keys: Vec<Vec<u8>> = muts.iter().map(|m| m.key().to_vec()).collect();
    c.prewrite(prewrite(muts, ts(start), LockMode::Optimistic)).await.expect("prewrite");
    c.commit(&keys, ts(start), ts(commit)).await.expect("commit");
}

async fn get(c: &LocalClient, k: &str, at: u64) -> Result<Option<String>, Error> {
    let v = c.batch_get(&[k.as_bytes().to_vec()], ts(at)).await?;
    Ok(v.into_iter().next().flatten().map(|b| String::from_utf8(b).expect("utf8")))
}

#[tokio::test]
async fn snapshot_reads_see_only_versions_committed_before_them() {
    let c = client();
    write(&c, vec![put("a", "1")], 10, 11).await;
    write(&c, vec![put("a", "2")], 20, 21).await;
    write(&c, vec![Mutation::Delete(b"a".to_vec())], 30, 31).await;
    assert_eq!(get(&c, "a", 5).await.expect("read"), None);
    assert_eq!(get(&c, "a", 11).await.expect("read").as_deref(), Some("1"));
    assert_eq!(get(&c, "a", 25).await.expect("read").as_deref(), Some("2"));
    assert_eq!(get(&c, "a", 40).await.expect("read"), None);
}

#[tokio::test]
async fn scan_returns_latest_visible_version_per_key_and_honours_limit() {
    let c = client();
    write(&c, vec![put("k1", "a"), put("k2", "b"), put("k3", "c")], 10, 11).await;
    write(&c, vec![put("k2", "B"), Mutation::Delete(b"k3".to_vec())], 20, 21).await;
    let rows = c.scan(b"k", b"l", ts(30), 100).await.expect("scan");
    assert_eq!(rows, vec![(b"k1".to_vec(), b"a".to_vec()), (b"k2".to_vec(), b"B".to_vec())]);
    let old = c.scan(b"k", b"l", ts(15), 2).await.expect("scan");
    assert_eq!(old.len(), 2);
    assert_eq!(old[1].1, b"b".to_vec());
    let big = "x".repeat(1000);
    write(&c, vec![put("k4", &big)], 40, 41).await;
    assert_eq!(get(&c, "k4", 50).await.expect("read"), Some(big));
}

#[tokio::test]
async fn prewrite_lock_blocks_readers_until_resolved() {
    let c = client();
    c.prewrite(prewrite(vec![put("p", "1"), put("s", "1")], ts(10), LockMode::Optimistic)).await.expect("prewrite");
    assert!(matches!(get(&c, "s", 20).await, Err(Error::KeyLocked(_))));
    // Readers older than the transaction are not blocked.
    assert_eq!(get(&c, "s", 5).await.expect("read"), None);
    // The primary commits; the secondary is resolved by a reader that checks the primary.
    c.commit(&[b"p".to_vec()], ts(10), ts(11)).await.expect("commit primary");
    let status = c.check_txn_status(b"p", ts(10), ts(20)).await.expect("status");
    assert_eq!(status, TxnStatus::Committed(ts(11)));
    c.resolve_locks(&[b"s".to_vec()], ts(10), Some(ts(11))).await.expect("resolve");
    assert_eq!(get(&c, "s", 20).await.expect("read").as_deref(), Some("1"));
}

#[tokio::test]
async fn expired_primary_is_rolled_back_and_cannot_commit_later() {
    let c = client();
    c.prewrite(prewrite(vec![put("p", "1")], ts(10), LockMode::Optimistic)).await.expect("prewrite");
    assert!(matches!(c.check_txn_status(b"p", ts(10), ts(11)).await, Ok(TxnStatus::Locked { .. })));
    let status = c.check_txn_status(b"p", ts(10), ts(10 + 5000)).await.expect("status");
    assert_eq!(status, TxnStatus::RolledBack);
    assert!(matches!(c.commit(&[b"p".to_vec()], ts(10), ts(12)).await, Err(Error::TxnRolledBack(_))));
    // A late prewrite of the same transaction is refused too.
    let late = c.prewrite(prewrite(vec![put("p", "1")], ts(10), LockMode::Optimistic)).await;
    assert!(matches!(late, Err(Error::TxnRolledBack(_))));
}

#[tokio::test]
async fn optimistic_prewrite_detects_write_conflict() {
    let c = client();
    write(&c, vec![put("x", "1")], 20, 21).await;
    let r = c.prewrite(prewrite(vec![put("x", "2")], ts(15), LockMode::Optimistic)).await;
    assert!(matches!(r, Err(Error::WriteConflict { .. })), "{r:?}");
}

#[tokio::test]
async fn pessimistic_lock_conflicts_waits_and_times_out() {
    let c = client();
    write(&c, vec![put("x", "1")], 20, 21).await;
    let req = |start: u64, fu: u64, wait: Option<u64>| PessimisticLockRequest {
        keys: vec![b"x".to_vec()],
        primary: b"x".to_vec(),
        start_ts: ts(start),
        for_update_ts: ts(fu),
        ttl_ms: 3000,
        wait_timeout_ms: wait,
        seen: None,
    };
    // A newer commit than for_update_ts is a conflict; the statement retries with a new ts.
    assert!(matches!(c.pessimistic_lock(req(15, 15, None)).await, Err(Error::WriteConflict { .. })));
    c.pessimistic_lock(req(15, 22, None)).await.expect("lock");
    assert!(matches!(c.pessimistic_lock(req(30, 30, Some(50))).await, Err(Error::LockWaitTimeout)));
    // Pessimistic locks do not block readers.
    assert_eq!(get(&c, "x", 40).await.expect("read").as_deref(), Some("1"));
    // A waiter wakes when the holder commits, then sees the conflict with its commit.
    let waiter = {
        let c = c.clone();
        tokio::spawn(async move { c.pessimistic_lock(req(31, 31, Some(5000))).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let mut p = (*prewrite(vec![put("x", "2")], ts(15), LockMode::Pessimistic)).clone();
    p.locked = vec![true];
    c.prewrite(Arc::new(p)).await.expect("prewrite");
    c.commit(&[b"x".to_vec()], ts(15), ts(32)).await.expect("commit");
    let r = waiter.await.expect("join");
    assert!(matches!(r, Err(Error::WriteConflict { .. })), "{r:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hot_key_passes_from_waiter_to_waiter() {
    // A release wakes one waiter; one that does not end up with the key (it timed out, or
    // found a conflict) passes the wake on, so nobody waits out its timeout for a free key.
    let c = client();
    write(&c, vec![put("x", "0")], 50, 60).await;
    let req = |start: u64, fu: u64, wait: u64| PessimisticLockRequest {
        keys: vec![b"x".to_vec()],
        primary: b"x".to_vec(),
        start_ts: ts(start),
        for_update_ts: ts(fu),
        ttl_ms: 10_000,
        wait_timeout_ms: Some(wait),
        seen: None,
    };
    c.pessimistic_lock(req(100, 100, 0)).await.expect("first holder");
    let started = std::time::Instant::now();
    let mut waiters = Vec::new();
    // Queued one after another (each blocked before the next comes), so the wakes go in
    // this order.
    for i in 0..6u64 {
        let c0 = c.clone();
        waiters.push(tokio::spawn(async move {
            c0.pessimistic_lock(req(101 + i, 500 + i, 10_000)).await?;
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            c0.rollback(&[b"x".to_vec()], ts(101 + i)).await
        }));
        tokio::time::sleep(std::time::Duration::from_millis(15)).await;
        if i == 1 {
            // Among them, one that gives up and one whose read is stale once it gets in.
            let c1 = c.clone();
            waiters.push(tokio::spawn(async move { c1.pessimistic_lock(req(200, 200, 30)).await.map(|_| ()) }));
            tokio::time::sleep(std::time::Duration::from_millis(15)).await;
            let c2 = c.clone();
            waiters.push(tokio::spawn(async move { c2.pessimistic_lock(req(201, 55, 10_000)).await.map(|_| ()) }));
            tokio::time::sleep(std::time::Duration::from_millis(15)).await;
        }
    }
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    c.rollback(&[b"x".to_vec()], ts(100)).await.expect("first release");
    let mut outcomes = Vec::new();
    for w in waiters {
        outcomes.push(w.await.expect("join"));
    }
    let elapsed = started.elapsed();
    assert!(matches!(outcomes[2], Err(Error::LockWaitTimeout)), "{:?}", outcomes[2]);
    assert!(matches!(outcomes[3], Err(Error::WriteConflict { .. })), "{:?}", outcomes[3]);
    for (i, o) in outcomes.iter().enumerate().filter(|(i, _)| ![2, 3].contains(i)) {
        assert!(o.is_ok(), "waiter {i}: {o:?}");
    }
    assert!(elapsed < std::time::Duration::from_secs(5), "a wake was lost: {elapsed:?}");
}

#[tokio::test]
async fn pessimistic_lock_returns_the_latest_committed_values() {
    let c = client();
    let big = "b".repeat(600);
    write(&c, vec![put("k1", "old"), put("k2", &big), put("k3", "gone")], 10, 11).await;
    write(&c, vec![put("k1", "new"), Mutation::Delete(b"k3".to_vec())], 12, 13).await;
    // A lock-only record on k1 after its last value, and a rollback: neither is a value.
    write(&c, vec![Mutation::Lock(b"k1".to_vec())], 14, 15).await;
    c.rollback(&[b"k2".to_vec()], ts(16)).await.expect("rollback");
    let keys: Vec<Vec<u8>> = ["k3", "k1", "absent", "k2"].iter().map(|k| k.as_bytes().to_vec()).collect();
    let req = PessimisticLockRequest {
        keys: keys.clone(),
        primary: keys[0].clone(),
        start_ts: ts(20),
        for_update_ts: ts(20),
        ttl_ms: 3000,
        wait_timeout_ms: None,
        seen: None,
    };
    let values = c.pessimistic_lock(req.clone()).await.expect("lock");
    let expected = vec![None, Some(b"new".to_vec()), None, Some(big.as_bytes().to_vec())];
    assert_eq!(values, expected);
    // Locking again (already ours) reads the same.
    assert_eq!(c.pessimistic_lock(req).await.expect("relock"), expected);
    // And a batch read agrees, key by key.
    assert_eq!(c.batch_get(&keys, ts(20)).await.expect("batch get"), expected);
}

#[tokio::test]
async fn a_rolled_back_transaction_cannot_lock_or_write_its_keys_again() {
    let c = client();
    let lock = |k: &str, start: u64, fu: u64| PessimisticLockRequest {
        keys: vec![k.as_bytes().to_vec()],
        primary: b"p".to_vec(),
        start_ts: ts(start),
        for_update_ts: ts(fu),
        ttl_ms: 3000,
        wait_timeout_ms: None,
        seen: None,
    };
    c.pessimistic_lock(lock("p", 10, 10)).await.expect("lock p");
    let mut p = (*prewrite(vec![put("p", "1")], ts(10), LockMode::Pessimistic)).clone();
    p.locked = vec![true];
    c.prewrite(Arc::new(p)).await.expect("prewrite p");
    // Another transaction finds the primary expired and rolls it back.
    let status = c.check_txn_status(b"p", ts(10), ts(10 + 5000)).await.expect("status");
    assert_eq!(status, TxnStatus::RolledBack);
    let again = c.pessimistic_lock(lock("p", 10, 12)).await;
    assert!(matches!(again, Err(Error::TxnRolledBack(_))), "{again:?}");
    // An unlocked write of the same transaction (a non-unique index entry) is refused too,
    // where a rollback of it was recorded.
    c.rollback(&[b"s".to_vec()], ts(10)).await.expect("rollback s");
    let mut s = (*prewrite(vec![put("s", "1")], ts(10), LockMode::Pessimistic)).clone();
    s.locked = vec![false];
    let late = c.prewrite(Arc::new(s)).await;
    assert!(matches!(late, Err(Error::TxnRolledBack(_))), "{late:?}");
    // A pessimistic transaction's unlocked write of a key committed after it began goes
    // through (no conflict check), and a Lock record newer than for_update_ts is not a
    // conflict for a pessimistic lock: neither changed what the transaction read.
    write(&c, vec![put("u", "1"), Mutation::Lock(b"w".to_vec())], 30, 31).await;
    let mut u = (*prewrite(vec![put("u", "2")], ts(20), LockMode::Pessimistic)).clone();
    u.locked = vec![false];
    c.prewrite(Arc::new(u)).await.expect("unlocked write of a newer key");
    c.commit(&[b"u".to_vec()], ts(20), ts(40)).await.expect("commit u");
    assert_eq!(get(&c, "u", 50).await.expect("read").as_deref(), Some("2"));
    c.pessimistic_lock(lock("w", 25, 25)).await.expect("lock over a newer Lock record");
}

#[tokio::test]
async fn deadlock_victim_gets_an_error() {
    let c = client();
    let lock = |k: &str, start: u64, wait: Option<u64>| PessimisticLockRequest {
        wait_timeout_ms: wait,
        ..lock_one(k, start, start)
    };
    c.pessimistic_lock(lock("a", 10, None)).await.expect("t1 locks a");
    c.pessimistic_lock(lock("b", 11, None)).await.expect("t2 locks b");
    let t1 = {
        let c = c.clone();
        tokio::spawn(async move { c.pessimistic_lock(lock("b", 10, Some(5000))).await })
    };
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let r2 = c.pessimistic_lock(lock("a", 11, Some(5000))).await;
    assert!(matches!(r2, Err(Error::Deadlock)), "{r2:?}");
    c.rollback(&[b"b".to_vec()], ts(11)).await.expect("victim rolls back");
    t1.await.expect("join").expect("t1 gets b after the victim rolls back");
}

#[tokio::test]
async fn recovery_commits_locks_of_committed_primaries_and_rolls_back_the_rest() {
    let c = client();
    c.prewrite(prewrite(vec![put("p", "1"), put("s", "1")], ts(10), LockMode::Optimistic)).await.expect("prewrite");
    c.commit(&[b"p".to_vec()], ts(10), ts(11)).await.expect("commit primary only");
    c.prewrite(prewrite(vec![put("q", "1"), put("r", "1")], ts(12), LockMode::Optimistic)).await.expect("prewrite");
    assert_eq!(c.recover_locks().expect("recover"), 3);
    assert_eq!(get(&c, "s", 20).await.expect("read").as_deref(), Some("1"));
    assert_eq!(get(&c, "q", 20).await.expect("read"), None);
    assert_eq!(get(&c, "r", 20).await.expect("read"), None);
}

#[tokio::test]
async fn gc_keeps_what_readers_above_the_safe_point_see() {
    let c = client();
    write(&c, vec![put("a", "1")], 10, 11).await;
    write(&c, vec![put("a", "2")], 20, 21).await;
    write(&c, vec![put("b", "1")], 22, 23).await;
    write(&c, vec![Mutation::Delete(b"b".to_vec())], 24, 25).await;
    write(&c, vec![put("a", "3")], 30, 31).await;
    let stats = c.store().gc(ts(26)).expect("gc");
    assert_eq!(stats.versions_removed, 3);
    assert_eq!(get(&c, "a", 26).await.expect("read").as_deref(), Some("2"));
    assert_eq!(get(&c, "a", 40).await.expect("read").as_deref(), Some("3"));
    assert_eq!(get(&c, "b", 26).await.expect("read"), None);
}

#[tokio::test]
async fn gc_skips_passes_that_could_remove_nothing() {
    let c = client();
    write(&c, vec![put("a", "1")], 10, 11).await;
    write(&c, vec![put("a", "2")], 20, 21).await;
    // The first pass walks everything (the store does not know what is there): the write
    // CF holds a@11, moved there by a@21, which is only in the latest CF.
    let first = c.store().gc(ts(15)).expect("gc");
    assert_eq!((first.versions_removed, first.records_walked), (0, 1));
    // a@21 was above that safe point: a pass above it has work.
    let second = c.store().gc(ts(30)).expect("gc");
    assert_eq!((second.versions_removed, second.records_walked), (1, 1));
    // Nothing written since and everything below the last safe point: nothing to walk.
    assert_eq!(c.store().gc(ts(40)).expect("gc").records_walked, 0);
    assert_eq!(c.store().gc(ts(50)).expect("gc").records_walked, 0);
    // A commit makes the next pass walk, and the one after its safe point passes the commit.
    write(&c, vec![put("a", "3")], 60, 61).await;
    assert_eq!(c.store().gc(ts(55)).expect("gc").versions_removed, 0);
    // (a@21 moved into the write CF; a@61 is only in the latest CF.)
    let above = c.store().gc(ts(70)).expect("gc");
    assert_eq!((above.versions_removed, above.records_walked), (1, 1));
    assert_eq!(c.store().gc(ts(80)).expect("gc").records_walked, 0);
    // A rollback record is a write too, even at a timestamp below the last safe point.
    c.rollback(&[b"z".to_vec()], ts(5)).await.expect("rollback");
    let stale = c.store().gc(ts(90)).expect("gc");
    assert_eq!((stale.versions_removed, stale.records_walked), (1, 1));
    assert_eq!(get(&c, "a", 100).await.expect("read").as_deref(), Some("3"));
    // Commits newer than the safe point (a steady load, the safe point lagging by the GC
    // life time) give a pass nothing to do until the safe point reaches them.
    write(&c, vec![Mutation::Delete(b"c".to_vec())], 100, 101).await;
    write(&c, vec![put("d", "1")], 102, 103).await;
    write(&c, vec![put("d", "2")], 104, 105).await;
    assert_eq!(c.store().gc(ts(95)).expect("gc").records_walked, 0);
    assert_eq!(c.store().gc(ts(100)).expect("gc").records_walked, 0, "the oldest new record is c@101");
    let reached = c.store().gc(ts(104)).expect("gc");
    // c@101's deletion goes (nothing older), d@103 stays: the version readers at 104 see.
    assert_eq!((reached.versions_removed, reached.records_walked), (1, 2));
    assert_eq!(get(&c, "d", 104).await.expect("read").as_deref(), Some("1"));
    // d@105 (latest only) was above that pass: a pass past it removes d@103.
    let past = c.store().gc(ts(110)).expect("gc");
    assert_eq!((past.versions_removed, past.records_walked), (1, 1));
    assert_eq!(get(&c, "d", 110).await.expect("read").as_deref(), Some("2"));
    assert_eq!(get(&c, "c", 110).await.expect("read"), None);
    assert_eq!(c.store().gc(ts(120)).expect("gc").records_walked, 0);
    // Updating a row written long ago moves its old version (a@61) into the write CF, but
    // that version is what readers below the update see: no pass has work before 131.
    write(&c, vec![put("a", "4")], 130, 131).await;
    assert_eq!(c.store().gc(ts(125)).expect("gc").records_walked, 0);
    assert_eq!(get(&c, "a", 125).await.expect("read").as_deref(), Some("3"));
    let updated = c.store().gc(ts(131)).expect("gc");
    assert_eq!((updated.versions_removed, updated.records_walked), (1, 1));
    assert_eq!(get(&c, "a", 131).await.expect("read").as_deref(), Some("4"));
}

#[tokio::test]
async fn destroy_range_removes_every_version_value_and_lock_of_the_range_only() {
    let c = client();
    let big = "x".repeat(1000);
    // Keys at and around group-encoding boundaries (8 bytes).
    let inside = ["t1", "t1234567", "t12345678", "t1\u{ff}\u{ff}"];
    let outside = ["t0zzzzzzzzz", "t2", "t"];
    for (i, k) in inside.iter().chain(outside.iter()).enumerate() {
        let base = 10 + 10 * i as u64;
        write(&c, vec![put(k, &big)], base, base + 1).await;
        write(&c, vec![put(k, "v2")], base + 2, base + 3).await;
    }
    // An uncommitted lock inside the range.
    c.prewrite(prewrite(vec![put("t1lock", &big)], ts(500), LockMode::Optimistic)).await.expect("prewrite");

    // Long values in the data CF, as an older store kept them, inside the range and out.
    let engine = c.store().engine().clone();
    let legacy = |k: &str| strata_mvcc::records::versioned(&strata_mvcc::records::encode_user_key(k.as_bytes()), ts(7));
    let mut b = strata_storage::WriteBatch::default();
    for k in ["t12345678", "t2"] {
        b.put(strata_storage::Cf::Data, legacy(k), big.clone().into_bytes());
    }
    engine.write(b, true).expect("write");

    c.store().destroy_range(b"t1", b"t2").expect("destroy");

    assert!(engine.get(strata_storage::Cf::Data, &legacy("t2")).expect("get").is_some(), "outside the range");
    for cf in
        [strata_storage::Cf::Data, strata_storage::Cf::Write, strata_storage::Cf::Latest, strata_storage::Cf::Lock]
    {
        for (key, _) in cf_entries(&engine, cf) {
            let user = match cf {
                strata_storage::Cf::Lock => key.clone(),
                strata_storage::Cf::Latest => strata_mvcc::records::decode_user_key(&key).expect("decode"),
                _ => {
                    let (enc, _) = strata_mvcc::records::split_versioned(&key).expect("versioned");
                    strata_mvcc::records::decode_user_key(enc).expect("decode")
                }
            };
            assert!(
                !(user.as_slice() >= b"t1".as_slice() && user.as_slice() < b"t2".as_slice()),
                "{cf:?} still holds {:?}",
                String::from_utf8_lossy(&user)
            );
        }
    }
    for k in outside {
        assert_eq!(get(&c, k, 1000).await.expect("read").as_deref(), Some("v2"), "{k} outside the range is kept");
    }
    assert_eq!(get(&c, "t0zzzzzzzzz", 52).await.expect("read").as_deref(), Some(big.as_str()), "old versions kept");
    for k in inside {
        assert_eq!(get(&c, k, 1000).await.expect("read"), None);
    }
    assert_eq!(get(&c, "t1lock", 1000).await.expect("no lock left"), None);
}

#[tokio::test]
async fn a_heart_beat_keeps_a_live_transaction_from_being_judged_expired() {
    let c = client();
    // Prewritten at 1000 ms with a 3 s TTL: at 10 s it would look dead.
    c.prewrite(prewrite(vec![put("hb", "v")], ts(1_000), LockMode::Optimistic)).await.expect("prewrite");
    assert!(c.txn_heart_beat(b"hb", ts(1_000), 20_000).await.expect("heart beat"));
    // A shorter TTL never shortens it.
    assert!(c.txn_heart_beat(b"hb", ts(1_000), 10).await.expect("heart beat"));
    let status = c.check_txn_status(b"hb", ts(1_000), ts(10_000)).await.expect("status");
    assert!(matches!(status, TxnStatus::Locked { ttl_left_ms: 11_000 }), "{status:?}");
    // Past the extended TTL it is dead, rolled back, and further heart beats say so.
    let status = c.check_txn_status(b"hb", ts(1_000), ts(30_000)).await.expect("status");
    assert_eq!(status, TxnStatus::RolledBack);
    assert!(!c.txn_heart_beat(b"hb", ts(1_000), 60_000).await.expect("heart beat"));
    assert!(c.commit(&[b"hb".to_vec()], ts(1_000), ts(31_000)).await.is_err(), "a rolled back txn cannot commit");
}

/// Every record of one column family, raw.
fn cf_entries(engine: &Arc<dyn strata_storage::Engine>, cf: strata_storage::Cf) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut cur = engine.cursor(cf, &[], &[0xFF; 16]).expect("cursor");
    cur.seek(&[]);
    let mut out = Vec::new();
    while cur.valid().expect("valid") {
        out.push((cur.key().to_vec(), cur.value().to_vec()));
        cur.next();
    }
    out
}

#[tokio::test]
async fn locks_stay_in_memory_and_commit_writes_the_transaction_in_one_batch() {
    use strata_storage::Cf;
    let c = client();
    let engine = c.store().engine().clone();
    let long = "L".repeat(1000); // past the inline limit of write records
    c.pessimistic_lock(lock_one("a", 10, 10)).await.expect("lock");
    let mut req = prewrite(vec![put("a", "short"), put("b", &long)], ts(10), LockMode::Pessimistic);
    Arc::get_mut(&mut req).expect("sole owner").locked = vec![true, false];
    c.prewrite(req).await.expect("prewrite");
    for cf in [Cf::Lock, Cf::Write, Cf::Latest, Cf::Data] {
        assert!(cf_entries(&engine, cf).is_empty(), "{cf:?} written before commit");
    }
    assert_eq!(c.store().lock_count(), 2);
    // The locks still block readers that might see the commit, and scans too.
    assert!(matches!(get(&c, "b", 20).await, Err(Error::KeyLocked(_))));
    assert!(matches!(c.scan(b"a", b"z", ts(20), 100).await, Err(Error::KeyLocked(_))));
    assert_eq!(get(&c, "b", 5).await.expect("older reader"), None);

    c.commit(&[b"a".to_vec(), b"b".to_vec()], ts(10), ts(11)).await.expect("commit");
    assert_eq!(c.store().lock_count(), 0);
    assert!(cf_entries(&engine, Cf::Lock).is_empty(), "nothing ever reaches the lock CF");
    // A new Put is written once, to the latest CF, its value inline whatever its size.
    assert_eq!(cf_entries(&engine, Cf::Write).len(), 0);
    assert_eq!(cf_entries(&engine, Cf::Latest).len(), 2, "each key's newest record");
    assert_eq!(cf_entries(&engine, Cf::Data).len(), 0);
    assert_eq!(get(&c, "a", 20).await.expect("read").as_deref(), Some("short"));
    assert_eq!(get(&c, "b", 20).await.expect("read").as_deref(), Some(long.as_str()));
    let rows = c.scan(b"a", b"z", ts(20), 100).await.expect("scan");
    assert_eq!(rows.len(), 2);
}

#[tokio::test]
async fn a_crash_before_commit_leaves_nothing_behind() {
    let engine: Arc<dyn strata_storage::Engine> = Arc::new(MemoryEngine::new());
    {
        let c = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open")), false);
        let long = "L".repeat(1000);
        c.prewrite(prewrite(vec![put("a", "1"), put("b", &long)], ts(10), LockMode::Optimistic))
            .await
            .expect("prewrite");
    } // the process dies here
    let c = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("reopen")), false);
    assert_eq!(c.recover_locks().expect("recover"), 0);
    // The raw CF holds the store's layout record, nothing of the transaction.
    for cf in strata_storage::Cf::ALL.into_iter().filter(|cf| *cf != strata_storage::Cf::Raw) {
        assert!(cf_entries(&engine, cf).is_empty(), "{cf:?} holds a trace of the uncommitted transaction");
    }
    assert_eq!(get(&c, "a", 20).await.expect("read"), None);
    assert_eq!(get(&c, "b", 20).await.expect("read"), None);
}

#[tokio::test]
async fn locks_an_older_version_left_on_disk_are_loaded_and_resolved() {
    use strata_mvcc::records::{encode_user_key, versioned, Kind, Lock, Write};
    use strata_storage::{Cf, WriteBatch};
    let engine: Arc<dyn strata_storage::Engine> = Arc::new(MemoryEngine::new());
    let long = vec![b'L'; 1000];
    let lock = |kind: Kind, primary: &str, start: u64, value: Option<Vec<u8>>| Lock {
        kind,
        primary: primary.as_bytes().into(),
        start_ts: ts(start),
        ttl_ms: 3000,
        for_update_ts: Timestamp::ZERO,
        short_value: value,
    };
    // As an older version left them: transaction 10 committed its primary "p" at 11 but not
    // its secondary "s" (long value already in the data CF); transaction 12 never committed;
    // a pessimistic lock of transaction 14.
    let mut b = WriteBatch::default();
    let w = Write { kind: Kind::Put, start_ts: ts(10), short_value: Some(b"1".to_vec()), delta_base: None };
    b.put(Cf::Write, versioned(&encode_user_key(b"p"), ts(11)), w.encode());
    b.put(Cf::Lock, b"s".to_vec(), lock(Kind::Put, "p", 10, None).encode());
    b.put(Cf::Data, versioned(&encode_user_key(b"s"), ts(10)), long.clone());
    b.put(Cf::Lock, b"q".to_vec(), lock(Kind::Put, "q", 12, Some(b"2".to_vec())).encode());
    b.put(Cf::Lock, b"r".to_vec(), lock(Kind::Pessimistic, "r", 14, None).encode());
    engine.write(b, true).expect("write");

    let c = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open")), false);
    assert_eq!(c.store().lock_count(), 3, "loaded from the lock CF");
    assert!(matches!(get(&c, "s", 20).await, Err(Error::KeyLocked(_))), "a loaded lock blocks readers");
    assert_eq!(c.recover_locks().expect("recover"), 3);
    assert_eq!(c.store().lock_count(), 0);
    assert!(cf_entries(&engine, Cf::Lock).is_empty(), "resolved locks are deleted on disk too");
    let s = c.batch_get(&[b"s".to_vec()], ts(20)).await.expect("read").remove(0);
    assert_eq!(s, Some(long), "the secondary of a committed primary commits, with its stored value");
    assert_eq!(get(&c, "q", 20).await.expect("read"), None);
    assert_eq!(get(&c, "r", 20).await.expect("read"), None);
}

/// Records what a change feed was handed, and whether the key's lock was still held then.
struct Recorder {
    store: std::sync::Weak<MvccStore>,
    seen: parking_lot::Mutex<Vec<(strata_kv::CommittedChange, bool)>>,
}

impl strata_kv::ChangeSink for Recorder {
    fn wants(&self, key: &[u8]) -> bool {
        key.starts_with(b"t")
    }
    fn committed(&self, changes: Vec<strata_kv::CommittedChange>) {
        let store = self.store.upgrade().expect("store");
        for c in changes {
            let locked = store.all_locks().iter().any(|(k, _)| *k == c.key);
            self.seen.lock().push((c, locked));
        }
    }
}

#[tokio::test]
async fn change_feed_gets_committed_puts_and_deletes_before_their_locks_go() {
    let store = Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open store"));
    let c = LocalClient::new(store.clone(), false);
    let rec = Arc::new(Recorder { store: Arc::downgrade(&store), seen: parking_lot::Mutex::new(Vec::new()) });
    c.subscribe(rec.clone()).expect("subscribe");
    let big = "y".repeat(1000);
    write(&c, vec![put("t1", "a"), put("u1", "ignored"), put("t2", &big)], 10, 11).await;
    write(&c, vec![Mutation::Delete(b"t1".to_vec()), Mutation::Lock(b"t2".to_vec())], 20, 21).await;
    // A rolled-back transaction commits nothing.
    c.prewrite(prewrite(vec![put("t3", "x")], ts(30), LockMode::Optimistic)).await.expect("prewrite");
    c.rollback(&[b"t3".to_vec()], ts(30)).await.expect("rollback");
    // A lock resolved by a reader is a commit too.
    c.prewrite(prewrite(vec![put("t4", "p"), put("t5", "s")], ts(40), LockMode::Optimistic)).await.expect("prewrite");
    c.commit(&[b"t4".to_vec()], ts(40), ts(41)).await.expect("commit primary");
    assert!(matches!(c.check_locks(b"t", b"u", ts(50)).await, Err(Error::KeyLocked(_))));
    assert!(c.check_locks(b"t", b"u", ts(39)).await.is_ok(), "an older reader is not blocked");
    c.resolve_locks(&[b"t5".to_vec()], ts(40), Some(ts(41))).await.expect("resolve");
    assert!(c.check_locks(b"t", b"u", ts(50)).await.is_ok());

    let seen = rec.seen.lock().clone();
    let got: Vec<(String, u64, Option<usize>)> = seen
        .iter()
        .map(|(ch, _)| {
            (
                String::from_utf8_lossy(&ch.key).into_owned(),
                ch.commit_ts.physical_ms(),
                ch.value.as_ref().map(|v| v.len()),
            )
        })
        .collect();
    let expect = vec![
        ("t1".to_string(), 11, Some(1)),
        ("t2".to_string(), 11, Some(1000)),
        ("t1".to_string(), 21, None),
        ("t4".to_string(), 41, Some(1)),
        ("t5".to_string(), 41, Some(1)),
    ];
    assert_eq!(got, expect);
    assert!(seen.iter().all(|(_, locked)| *locked), "every change arrives while its lock is held");
}

#[tokio::test]
async fn scan_changes_lists_the_newest_version_committed_after_a_timestamp() {
    let store = Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open store"));
    let c = LocalClient::new(store, false);
    let big = "z".repeat(1000);
    write(&c, vec![put("a", "a1"), put("b", "b1"), put("c", "c1"), put("d", "d1")], 10, 11).await;
    // After 15: b changes twice, c is deleted, e appears with a long value; d is only locked.
    write(&c, vec![put("b", "b2"), Mutation::Delete(b"c".to_vec()), Mutation::Lock(b"d".to_vec())], 20, 21).await;
    write(&c, vec![put("b", "b3"), put("e", &big)], 30, 31).await;
    c.prewrite(prewrite(vec![put("a", "rolled back")], ts(40), LockMode::Optimistic)).await.expect("prewrite");
    c.rollback(&[b"a".to_vec()], ts(40)).await.expect("rollback");
    write(&c, vec![put("f", "later")], 50, 51).await;

    let list = |after: u64, at: u64, limit: usize| {
        let c = &c;
        async move {
            c.scan_changes(b"a", b"z", ts(after), ts(at), limit)
                .await
                .expect("scan changes")
                .into_iter()
                .map(|ch| {
                    let v = ch.value.map(|v| {
                        if v.len() > 10 {
                            format!("{} bytes", v.len())
                        } else {
                            String::from_utf8(v).expect("utf8")
                        }
                    });
                    (String::from_utf8(ch.key).expect("utf8"), ch.commit_ts.physical_ms(), v)
                })
                .collect::<Vec<_>>()
        }
    };
    let s = |k: &str, t: u64, v: Option<&str>| (k.to_string(), t, v.map(str::to_string));
    // Newest at or below 45, committed after 15 (rollbacks and lock-only records are not changes).
    assert_eq!(list(15, 45, 100).await, vec![s("b", 31, Some("b3")), s("c", 21, None), s("e", 31, Some("1000 bytes"))]);
    // At 25 the newest of b is b2; e does not exist yet.
    assert_eq!(list(15, 25, 100).await, vec![s("b", 21, Some("b2")), s("c", 21, None)]);
    // Nothing changed after 31 up to 45; f comes in at 51.
    assert!(list(31, 45, 100).await.is_empty());
    assert_eq!(list(31, 60, 100).await, vec![s("f", 51, Some("later"))]);
    // The limit cuts the list in key order.
    assert_eq!(list(0, 60, 2).await, vec![s("a", 11, Some("a1")), s("b", 31, Some("b3"))]);
    // A lock that may commit below the read blocks it, as it blocks a scan.
    c.prewrite(prewrite(vec![put("c", "pending")], ts(70), LockMode::Optimistic)).await.expect("prewrite");
    assert!(matches!(c.scan_changes(b"a", b"z", ts(15), ts(80), 100).await, Err(Error::KeyLocked(_))));
    assert!(c.scan_changes(b"a", b"z", ts(15), ts(60), 100).await.is_ok(), "an older read is not blocked");
    assert!(c.scan_changes(b"a", b"b", ts(15), ts(80), 100).await.is_ok(), "nor one of another range");
}

/// Rollback records written before the store was opened (by an earlier process) are found
/// too: the in-memory note of rolled-back transactions starts empty, so a transaction from
/// below the oracle's persisted high-water mark is looked up in the write CF.
#[tokio::test]
async fn a_rollback_from_before_a_restart_still_refuses_the_lock() {
    let engine = Arc::new(MemoryEngine::new());
    let first = LocalClient::new(Arc::new(MvccStore::open(engine.clone()).expect("open")), false);
    first.prewrite(prewrite(vec![put("p", "1")], ts(10), LockMode::Optimistic)).await.expect("prewrite");
    let status = first.check_txn_status(b"p", ts(10), ts(10 + 5000)).await.expect("status");
    assert_eq!(status, TxnStatus::RolledBack);
    // The oracle had issued timestamps up to 20 ms when the process stopped.
    let mut batch = strata_storage::WriteBatch::default();
    batch.put(strata_storage::Cf::Raw, b"tso_limit".to_vec(), 20u64.to_le_bytes().to_vec());
    strata_storage::Engine::write(engine.as_ref(), batch, true).expect("write limit");
    drop(first);
    let again = LocalClient::new(Arc::new(MvccStore::open(engine).expect("reopen")), false);
    let r = again.pessimistic_lock(lock_one("p", 10, 12)).await;
    assert!(matches!(r, Err(Error::TxnRolledBack(_))), "{r:?}");
}
