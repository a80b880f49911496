//! Table locks: `LOCK TABLES ... READ | WRITE`, `UNLOCK TABLES` and
//! `FLUSH TABLES WITH READ LOCK`, with MySQL's rules.
//!
//! A session holding table locks may use only the tables it locked (1100) and write only
//! those it locked for WRITE (1099); a session holding the global read lock may not write
//! (1223). Other sessions wait, up to `lock_wait_timeout` (1205) or until KILLed: to read a
//! table another session locked for WRITE, to write one locked for READ or WRITE, and to
//! write anything under another session's global read lock.
//!
//! Statements register the tables they use for as long as they run, so a lock is granted
//! only once no other session's running statement conflicts with it (a statement-scoped
//! metadata lock). While no table lock is held or wanted anywhere — the normal case — a
//! statement only bumps an in-flight counter: `active` is zero and nothing is looked up.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use strata_common::{Code, Error, Result};
use tokio::sync::Notify;

/// A table, as (database, table) in lower case.
pub type TableKey = (String, String);

/// How a table is locked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Others may read, nobody may write.
    Read,
    /// Only the holder may use the table.
    Write,
}

#[derive(Default)]
struct Holders {
    readers: HashSet<u32>,
    writer: Option<u32>,
}

#[derive(Default)]
struct State {
    tables: HashMap<TableKey, Holders>,
    /// Per connection: what it locked with LOCK TABLES.
    held: HashMap<u32, HashMap<TableKey, Mode>>,
    /// Connections holding FLUSH TABLES WITH READ LOCK.
    global_read: HashSet<u32>,
    /// Running statements of sessions that took the slow path: what they use.
    using: HashMap<u32, Vec<(TableKey, bool)>>,
}

/// The server's table locks.
#[derive(Default)]
pub struct TableLocks {
    state: Mutex<State>,
    /// Lock sets held or being acquired (LOCK TABLES and FTWRL count one each).
    active: AtomicUsize,
    /// Statements running on the fast path (registered nowhere else).
    fast: AtomicUsize,
    changed: Notify,
}

/// What a running statement holds; released on drop.
pub enum Entry {
    /// No table locks anywhere when the statement started.
    Fast(Arc<TableLocks>),
    /// Registered in `using`.
    Using(Arc<TableLocks>, u32),
    /// Covered by the session's own LOCK TABLES.
    Own,
}

impl Drop for Entry {
    fn drop(&mut self) {
        match self {
            Entry::Fast(l) => l.leave_fast(),
            Entry::Using(l, conn) => {
                l.state.lock().using.remove(conn);
                l.changed.notify_waiters();
            }
            Entry::Own => {}
        }
    }
}

fn not_locked(t: &TableKey) -> Error {
    Error::user(Code::TableNotLockedForUse, format!("Table '{}' was not locked with LOCK TABLES", t.1))
}

impl TableLocks {
    /// A fast-path statement ended (or turned out to need the slow path): a lock waiting
    /// for running statements to drain may now be granted.
    fn leave_fast(&self) {
        if self.fast.fetch_sub(1, SeqCst) == 1 && self.active.load(SeqCst) > 0 {
            self.changed.notify_waiters();
        }
    }

    /// Admits a statement of `conn`. Only when some table lock exists does it ask `uses`
    /// for the statement's tables (each with whether it writes it) and how long it may
    /// wait (lock_wait_timeout); it then waits while another session's locks conflict.
    pub async fn enter(
        self: &Arc<Self>,
        conn: u32,
        uses: impl FnOnce() -> Result<(Vec<(TableKey, bool)>, Duration)>,
    ) -> Result<Entry> {
        self.fast.fetch_add(1, SeqCst);
        if self.active.load(SeqCst) == 0 {
            return Ok(Entry::Fast(self.clone()));
        }
        self.leave_fast();
        let (tables, timeout) = uses()?;
        {
            let st = self.state.lock();
            if let Some(mine) = st.held.get(&conn) {
                for (t, write) in &tables {
                    match mine.get(t) {
                        None => return Err(not_locked(t)),
                        Some(Mode::Read) if *write => {
                            return Err(Error::user(
                                Code::TableNotLockedForWrite,
                                format!("Table '{}' was locked with a READ lock and can't be updated", t.1),
                            ))
                        }
                        Some(_) => {}
                    }
                }
            }
            if st.global_read.contains(&conn) && tables.iter().any(|(_, w)| *w) {
                return Err(conflicting_read_lock());
            }
            if st.held.contains_key(&conn) {
                return Ok(Entry::Own);
            }
        }
        self.wait_until(timeout, |st| {
            let blocked = tables.iter().any(|(t, write)| {
                let h = st.tables.get(t);
                h.is_some_and(|h| h.writer.is_some_and(|w| w != conn))
                    || (*write && h.is_some_and(|h| h.readers.iter().any(|&r| r != conn)))
                    || (*write && st.global_read.iter().any(|&g| g != conn))
            });
            if blocked {
                return false;
            }
            st.using.insert(conn, tables.clone());
            true
        })
        .await?;
        Ok(Entry::Using(self.clone(), conn))
    }

    /// LOCK TABLES: replaces `conn`'s table locks with `tables` once no other session
    /// holds or uses them in a conflicting way.
    pub async fn lock_tables(&self, conn: u32, tables: Vec<(TableKey, Mode)>, timeout: Duration) -> Result<()> {
        self.lock_tables_within(conn, tables, timeout, false).await
    }

    /// `lock_tables` from inside a running statement of `conn` (a table rebuild locking its
    /// table): `own_fast` says whether that statement entered on the fast path, so the
    /// wait for fast-path statements to drain does not wait for it.
    pub async fn lock_tables_within(
        &self,
        conn: u32,
        tables: Vec<(TableKey, Mode)>,
        timeout: Duration,
        own_fast: bool,
    ) -> Result<()> {
        if self.state.lock().global_read.contains(&conn) && tables.iter().any(|(_, m)| *m == Mode::Write) {
            return Err(conflicting_read_lock());
        }
        self.unlock_tables(conn);
        let mut want: HashMap<TableKey, Mode> = HashMap::new();
        for (t, m) in tables {
            let e = want.entry(t).or_insert(m);
            if m == Mode::Write {
                *e = Mode::Write;
            }
        }
        self.acquire(timeout, own_fast as usize, |st| {
            let blocked = want.iter().any(|(t, m)| {
                let h = st.tables.get(t);
                let held = h.is_some_and(|h| {
                    h.writer.is_some_and(|w| w != conn) || (*m == Mode::Write && h.readers.iter().any(|&r| r != conn))
                });
                let used = st
                    .using
                    .iter()
                    .any(|(&c, ts)| c != conn && ts.iter().any(|(u, w)| u == t && (*m == Mode::Write || *w)));
                held || used || (*m == Mode::Write && st.global_read.iter().any(|&g| g != conn))
            });
            if blocked {
                return false;
            }
            for (t, m) in &want {
                let h = st.tables.entry(t.clone()).or_default();
                match m {
                    Mode::Read => {
                        h.readers.insert(conn);
                    }
                    Mode::Write => h.writer = Some(conn),
                }
            }
            st.held.insert(conn, want.clone());
            true
        })
        .await
    }

    /// FLUSH TABLES WITH READ LOCK: once no other session writes or holds a WRITE lock,
    /// nobody else may write until `conn` unlocks.
    pub async fn lock_global_read(&self, conn: u32, timeout: Duration) -> Result<()> {
        if self.state.lock().global_read.contains(&conn) {
            return Ok(());
        }
        self.acquire(timeout, 0, |st| {
            let writer = st.tables.values().any(|h| h.writer.is_some_and(|w| w != conn));
            let writing = st.using.iter().any(|(&c, ts)| c != conn && ts.iter().any(|(_, w)| *w));
            if writer || writing {
                return false;
            }
            st.global_read.insert(conn);
            true
        })
        .await
    }

    /// Takes a lock set (LOCK TABLES or the global read lock): counts it in `active` at
    /// once, so new statements take the slow path, then waits for fast-path statements to
    /// drain and for `try_take` to succeed; gives the count back if it never does.
    async fn acquire(&self, timeout: Duration, own: usize, mut try_take: impl FnMut(&mut State) -> bool) -> Result<()> {
        self.active.fetch_add(1, SeqCst);
        let r = self.wait_until(timeout, |st| self.fast.load(SeqCst) <= own && try_take(st)).await;
        if r.is_err() {
            self.active.fetch_sub(1, SeqCst);
            self.changed.notify_waiters();
        }
        r
    }

    /// UNLOCK TABLES (also at disconnect and BEGIN): drops `conn`'s table locks and its
    /// global read lock. Whether it held any.
    pub fn unlock_tables(&self, conn: u32) -> bool {
        let mut released = 0;
        {
            let mut st = self.state.lock();
            if let Some(mine) = st.held.remove(&conn) {
                for t in mine.keys() {
                    if let Some(h) = st.tables.get_mut(t) {
                        h.readers.remove(&conn);
                        if h.writer == Some(conn) {
                            h.writer = None;
                        }
                        if h.readers.is_empty() && h.writer.is_none() {
                            st.tables.remove(t);
                        }
                    }
                }
                released += 1;
            }
            if st.global_read.remove(&conn) {
                released += 1;
            }
        }
        if released > 0 {
            self.active.fetch_sub(released, SeqCst);
            self.changed.notify_waiters();
        }
        released > 0
    }

    /// Whether `conn` holds table locks (LOCK TABLES) — it then may not start a transaction
    /// without releasing them.
    pub fn holds(&self, conn: u32) -> bool {
        self.active.load(SeqCst) > 0 && {
            let st = self.state.lock();
            st.held.contains_key(&conn) || st.global_read.contains(&conn)
        }
    }

    /// Waits until `try_take` (run under the state lock) succeeds, re-checking whenever
    /// something is released; fails with 1205 after `timeout`, or when the statement is
    /// killed.
    async fn wait_until(&self, timeout: Duration, mut try_take: impl FnMut(&mut State) -> bool) -> Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let wait = async {
            loop {
                let changed = self.changed.notified();
                tokio::pin!(changed);
                changed.as_mut().enable();
                if try_take(&mut self.state.lock()) {
                    return Ok(());
                }
                // A release that wakes no waiter (a fast-path statement ending while
                // nobody was registered yet) is caught by the periodic re-check.
                match tokio::time::timeout_at(
                    deadline.min(tokio::time::Instant::now() + Duration::from_millis(200)),
                    changed,
                )
                .await
                {
                    Ok(()) => {}
                    Err(_) if tokio::time::Instant::now() >= deadline => return Err(Error::LockWaitTimeout),
                    Err(_) => {}
                }
            }
        };
        strata_common::cancel::or_cancelled(wait).await
    }
}

fn conflicting_read_lock() -> Error {
    Error::user(Code::CantUpdateWithReadLock, "Can't execute the query because you have a conflicting read lock")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(t: &str) -> TableKey {
        ("db".to_string(), t.to_string())
    }

    const SHORT: Duration = Duration::from_millis(300);

    #[tokio::test]
    async fn a_write_lock_keeps_others_out_until_unlocked() {
        let l = Arc::new(TableLocks::default());
        l.lock_tables(1, vec![(key("t"), Mode::Write)], SHORT).await.expect("lock");
        // The holder uses its table, not others.
        assert!(matches!(l.enter(1, || Ok((vec![(key("t"), true)], SHORT))).await, Ok(Entry::Own)));
        let e = l.enter(1, || Ok((vec![(key("u"), false)], SHORT))).await.err().map(|e| e.code());
        assert_eq!(e, Some(Code::TableNotLockedForUse));
        // Another session waits, then times out.
        let e = l.enter(2, || Ok((vec![(key("t"), false)], SHORT))).await.err();
        assert!(matches!(e, Some(Error::LockWaitTimeout)));
        // Unrelated tables are free.
        assert!(l.enter(2, || Ok((vec![(key("u"), true)], SHORT))).await.is_ok());
        // A waiter gets in once the lock goes.
        let l2 = l.clone();
        let waiter =
            tokio::spawn(
                async move { l2.enter(2, || Ok((vec![(key("t"), true)], Duration::from_secs(5)))).await.is_ok() },
            );
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(l.unlock_tables(1));
        assert!(waiter.await.expect("join"));
        assert_eq!(l.active.load(SeqCst), 0);
    }

    #[tokio::test]
    async fn read_locks_share_reads_and_block_writes() {
        let l = Arc::new(TableLocks::default());
        l.lock_tables(1, vec![(key("t"), Mode::Read)], SHORT).await.expect("lock");
        l.lock_tables(2, vec![(key("t"), Mode::Read)], SHORT).await.expect("second reader");
        let e = l.enter(1, || Ok((vec![(key("t"), true)], SHORT))).await.err().map(|e| e.code());
        assert_eq!(e, Some(Code::TableNotLockedForWrite));
        assert!(l.enter(3, || Ok((vec![(key("t"), false)], SHORT))).await.is_ok());
        assert!(matches!(l.enter(3, || Ok((vec![(key("t"), true)], SHORT))).await.err(), Some(Error::LockWaitTimeout)));
        // A WRITE lock waits for the readers.
        assert!(l.lock_tables(3, vec![(key("t"), Mode::Write)], SHORT).await.is_err());
        l.unlock_tables(1);
        l.unlock_tables(2);
        l.lock_tables(3, vec![(key("t"), Mode::Write)], SHORT).await.expect("write lock after readers left");
    }

    #[tokio::test]
    async fn a_lock_waits_for_running_statements_and_the_global_read_lock_stops_writers() {
        let l = Arc::new(TableLocks::default());
        let running = l.enter(2, || Ok((vec![(key("t"), true)], SHORT))).await.expect("enter");
        assert!(l.lock_tables(1, vec![(key("t"), Mode::Write)], SHORT).await.is_err(), "statement still running");
        drop(running);
        l.lock_global_read(1, SHORT).await.expect("FTWRL");
        assert!(l.enter(2, || Ok((vec![(key("t"), false)], SHORT))).await.is_ok(), "reads go on");
        assert!(l.enter(2, || Ok((vec![(key("t"), true)], SHORT))).await.is_err(), "writes wait");
        let e = l.enter(1, || Ok((vec![(key("t"), true)], SHORT))).await.err().map(|e| e.code());
        assert_eq!(e, Some(Code::CantUpdateWithReadLock));
        assert!(l.holds(1));
        l.unlock_tables(1);
        assert!(!l.holds(1));
        assert!(l.enter(2, || Ok((vec![(key("t"), true)], SHORT))).await.is_ok());
    }
}
