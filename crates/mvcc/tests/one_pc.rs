//! One-phase commits (`MvccStore::one_pc`): what readers and writers meet while one is in
//! flight, what a failed one leaves, and when the store declines one.

use std::sync::Arc;

use strata_common::{Error, Timestamp};
use strata_kv::{LockMode, Mutation, PessimisticLockRequest, PrewriteRequest};
use strata_mvcc::MvccStore;
use strata_storage::MemoryEngine;

fn store() -> Arc<MvccStore> {
    Arc::new(MvccStore::open(Arc::new(MemoryEngine::new())).expect("open store"))
}

fn ts(t: u64) -> Timestamp {
    Timestamp::compose(t, 0)
}

fn put(k: &str, v: &str) -> Mutation {
    Mutation::Put(k.as_bytes().to_vec(), v.as_bytes().to_vec())
}

fn req(muts: Vec<Mutation>, primary: &str, start: Timestamp, locked: bool) -> PrewriteRequest {
    let mode = if locked { LockMode::Pessimistic } else { LockMode::Optimistic };
    let locked = vec![locked; muts.len()];
    PrewriteRequest {
        mutations: muts,
        primary: primary.as_bytes().to_vec(),
        start_ts: start,
        ttl_ms: 3000,
        mode,
        locked,
    }
}

fn value(s: &MvccStore, k: &str, at: Timestamp) -> Option<String> {
    s.get(k.as_bytes(), at).expect("read").map(|v| String::from_utf8(v).expect("utf-8"))
}

fn never() -> strata_common::Result<Timestamp> {
    panic!("no commit timestamp may be taken")
}

#[test]
fn a_one_phase_commit_is_readable_at_its_timestamp_and_leaves_no_lock() {
    let s = store();
    let done = s.one_pc(&req(vec![put("ka", "1"), put("kb", "2")], "ka", ts(10), false), &|| Ok(ts(20)));
    assert_eq!(done.expect("commit"), Some(ts(20)));
    assert_eq!(value(&s, "ka", ts(20)).as_deref(), Some("1"));
    assert_eq!(value(&s, "kb", ts(25)).as_deref(), Some("2"));
    assert_eq!(value(&s, "kb", ts(19)), None, "invisible below its commit timestamp");
    assert_eq!(s.lock_count(), 0);
    assert!(s.check_locks(b"k", b"l", ts(30)).is_ok());
}

#[test]
fn its_keys_stand_locked_while_the_commit_timestamp_is_taken() {
    let s = store();
    s.one_pc(&req(vec![put("kb", "old")], "kb", ts(5), false), &|| Ok(ts(6))).expect("first commit");
    let r = req(vec![put("ka", "1"), put("kb", "2"), Mutation::Lock(b"kc".to_vec())], "ka", ts(10), false);
    let inside = s.clone();
    let next_ts = move || {
        let s = &inside;
        // A reader that could see the commit waits for it; an older one reads past it.
        match s.get(b"kb", ts(100)) {
            Err(Error::KeyLocked(l)) => {
                assert_eq!(l.primary, b"ka".to_vec());
                assert_eq!(l.start_ts, ts(10));
            }
            other => panic!("a reader at 100 read {other:?}"),
        }
        assert_eq!(value(s, "kb", ts(9)).as_deref(), Some("old"));
        assert!(matches!(s.check_locks(b"k", b"l", ts(100)), Err(Error::KeyLocked(_))));
        assert!(s.check_locks(b"k", b"l", ts(9)).is_ok());
        // A key only locked (read FOR UPDATE) changes no value: readers pass it.
        assert_eq!(value(s, "kc", ts(100)), None);
        // Another writer of a secondary meets the lock; the primary's latch is still held.
        let other = req(vec![put("kb", "x")], "kb", ts(11), false);
        assert!(matches!(s.try_prewrite(&other, false), Some(Err(Error::KeyLocked(_)))));
        let on_primary = req(vec![put("ka", "x")], "ka", ts(11), false);
        assert!(s.try_prewrite(&on_primary, false).is_none(), "the primary's latch is held");
        Ok(ts(20))
    };
    assert_eq!(s.one_pc(&r, &next_ts).expect("commit"), Some(ts(20)));
    assert_eq!(value(&s, "kb", ts(20)).as_deref(), Some("2"));
    assert_eq!(value(&s, "kb", ts(19)).as_deref(), Some("old"));
    assert!(s.check_locks(b"k", b"l", ts(100)).is_ok(), "nothing stays locked");
    assert_eq!(s.lock_count(), 0);
}

#[test]
fn a_conflict_fails_it_before_anything_is_written() {
    let s = store();
    s.one_pc(&req(vec![put("kb", "newer")], "kb", ts(15), false), &|| Ok(ts(16))).expect("first commit");
    let r = req(vec![put("ka", "1"), put("kb", "2")], "ka", ts(10), false);
    assert!(matches!(s.one_pc(&r, &never), Err(Error::WriteConflict { .. })));
    assert_eq!(value(&s, "ka", Timestamp::MAX), None);
    assert_eq!(value(&s, "kb", Timestamp::MAX).as_deref(), Some("newer"));
    assert!(s.check_locks(b"k", b"l", Timestamp::MAX).is_ok());
    // An INSERT of a key that exists fails the same way.
    let dup = req(vec![Mutation::Insert(b"kb".to_vec(), b"3".to_vec())], "kb", ts(30), false);
    assert!(matches!(s.one_pc(&dup, &never), Err(Error::AlreadyExists { .. })));
}

#[test]
fn it_declines_when_its_primary_is_not_one_of_its_keys() {
    let s = store();
    let r = req(vec![put("ka", "1")], "kz", ts(10), false);
    assert_eq!(s.one_pc(&r, &never).expect("declined"), None);
    assert_eq!(value(&s, "ka", Timestamp::MAX), None);
    assert_eq!(s.lock_count(), 0);
    // The two phases then work as ever.
    s.prewrite(&r, false).expect("prewrite");
    s.commit(&[b"ka".to_vec()], ts(10), ts(20), false).expect("commit");
    assert_eq!(value(&s, "ka", ts(20)).as_deref(), Some("1"));
}

#[test]
fn a_pessimistic_transactions_locks_go_with_its_commit() {
    let s = store();
    let lock = PessimisticLockRequest {
        keys: vec![b"ka".to_vec(), b"kb".to_vec()],
        primary: b"ka".to_vec(),
        start_ts: ts(10),
        for_update_ts: ts(10),
        ttl_ms: 3000,
        wait_timeout_ms: None,
        seen: None,
    };
    assert!(s.pessimistic_lock(&lock, false).expect("lock").is_ok());
    assert_eq!(s.lock_count(), 2);
    let r = req(vec![put("ka", "1"), put("kb", "2")], "ka", ts(10), true);
    assert_eq!(s.one_pc(&r, &|| Ok(ts(20))).expect("commit"), Some(ts(20)));
    assert_eq!(s.lock_count(), 0, "the pessimistic locks went with the commit");
    assert_eq!(value(&s, "kb", ts(20)).as_deref(), Some("2"));
    // Without its pessimistic locks a pessimistic commit is refused.
    let unlocked = req(vec![put("kc", "1")], "kc", ts(30), true);
    assert!(matches!(s.one_pc(&unlocked, &never), Err(Error::TxnRolledBack(_))));
}

#[test]
fn a_large_commands_checks_find_the_few_keys_that_exist_among_many_new_ones() {
    let s = store();
    let key = |i: usize| format!("k{i:05}");
    // Every 97th key of 0..1000 exists, committed at 6.
    let old: Vec<Mutation> = (0..1000).step_by(97).map(|i| put(&key(i), "old")).collect();
    s.one_pc(&req(old, &key(0), ts(5), false), &|| Ok(ts(6))).expect("first commit");
    // An INSERT of 1,000 keys meets the existing ones, wherever they lie.
    let inserts = |from: usize| -> Vec<Mutation> {
        (from..from + 1000).map(|i| Mutation::Insert(key(i).into_bytes(), b"new".to_vec())).collect()
    };
    let dup = req(inserts(0), &key(0), ts(10), false);
    assert!(matches!(s.one_pc(&dup, &never), Err(Error::AlreadyExists { .. })));
    // Past the existing keys nothing is met, and the rows commit.
    let fresh = req(inserts(1000), &key(1000), ts(10), false);
    assert_eq!(s.one_pc(&fresh, &|| Ok(ts(20))).expect("commit"), Some(ts(20)));
    assert_eq!(value(&s, &key(1500), ts(20)).as_deref(), Some("new"));
    // A large optimistic write finds the one key committed after its start.
    s.one_pc(&req(vec![put(&key(1700), "newer")], &key(1700), ts(25), false), &|| Ok(ts(26))).expect("commit");
    let puts: Vec<Mutation> = (1000..2000).map(|i| put(&key(i), "late")).collect();
    let late = req(puts, &key(1000), ts(22), false);
    assert!(matches!(s.one_pc(&late, &never), Err(Error::WriteConflict { .. })));
    // Overwrites read the values they supersede: the old versions stay readable.
    let puts: Vec<Mutation> = (0..1000).map(|i| put(&key(i), "over")).collect();
    s.one_pc(&req(puts, &key(0), ts(30), false), &|| Ok(ts(31))).expect("overwrite");
    assert_eq!(value(&s, &key(97), ts(31)).as_deref(), Some("over"));
    assert_eq!(value(&s, &key(97), ts(30)).as_deref(), Some("old"));
    assert_eq!(value(&s, &key(98), ts(30)), None);
}

/// A scan that a limit cuts short ignores locks past the last key it returned, so the lock
/// it is told about must be the first in key order: here a prewrite lock further on (in the
/// map) and a second commit's key must not hide the in-flight commit's key within the
/// rows returned (the bank test saw a reader sum half of a transfer).
#[test]
fn a_short_scan_meets_the_first_lock_in_key_order() {
    let s = store();
    for k in ["ka", "kb", "kc", "kd", "ke", "kf", "kx", "ky"] {
        s.one_pc(&req(vec![put(k, "old")], k, ts(5), false), &|| Ok(ts(6))).expect("load");
    }
    // A two-phase writer's lock on kx, and a one-phase commit of ky pausing in flight.
    s.prewrite(&req(vec![put("kx", "new")], "kx", ts(8), false), false).expect("prewrite kx");
    let outer = s.clone();
    let far = move || {
        let s = &outer;
        let inner = s.clone();
        let near = move || {
            let s = &inner;
            // Reading kb..: kb is the in-flight commit's, and is among the rows returned.
            match s.scan(b"ka", b"kz", ts(100), 3) {
                Err(Error::KeyLocked(l)) => assert_eq!(l.primary, b"kb".to_vec(), "the first lock is kb's"),
                other => panic!("a short scan read past the in-flight commit of kb: {other:?}"),
            }
            // With no limit, the same: the whole range is read.
            assert!(matches!(s.scan(b"ka", b"kz", ts(100), 100), Err(Error::KeyLocked(_))));
            // Below every lock's start, the old rows.
            let rows = s.scan(b"ka", b"kz", ts(7), 3).expect("an older reader passes the locks");
            assert_eq!(rows.len(), 3);
            Ok(ts(30))
        };
        let second = req(vec![put("kb", "new"), put("ke", "new")], "kb", ts(12), false);
        assert_eq!(s.one_pc(&second, &near).expect("commit kb"), Some(ts(30)));
        Ok(ts(31))
    };
    assert_eq!(s.one_pc(&req(vec![put("ky", "new")], "ky", ts(10), false), &far).expect("commit ky"), Some(ts(31)));
    assert_eq!(value(&s, "kb", ts(100)).as_deref(), Some("new"));
}
