//! Stopping a running statement or a connection from another connection (`KILL QUERY id`,
//! `KILL [CONNECTION] id`).
//!
//! Each session owns an [`Interrupt`]. `KILL` sets its state; the statement notices at its next
//! check and fails with 1317 (query) or 1927 (connection). Checks are cooperative: the executor
//! calls [`checkpoint`] once per row in its loops, so a long join or scan stops within one
//! row's work, and the statement's writes are undone by the usual statement rollback. The statement
//! finds its session's `Interrupt` through a task-local set around its execution, so the
//! operators need no extra argument.

use std::future::Future;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use strata_common::{Code, Error, Result};
use tokio::sync::Notify;

const RUNNING: u8 = 0;
const QUERY_KILLED: u8 = 1;
const CONNECTION_KILLED: u8 = 2;
const TIMED_OUT: u8 = 3;

/// One session's kill switch.
#[derive(Debug, Default)]
pub struct Interrupt {
    state: AtomicU8,
    wake: Notify,
    /// Woken on every kill or time-out, for waits that select on it.
    changed: Notify,
}

impl Interrupt {
    /// Stops the running statement (`KILL QUERY`); the connection goes on.
    pub fn kill_query(&self) {
        let _ = self.state.compare_exchange(RUNNING, QUERY_KILLED, Ordering::AcqRel, Ordering::Acquire);
        self.changed.notify_waiters();
    }

    /// Stops the running statement for running longer than `max_execution_time`.
    pub fn time_out(&self) {
        let _ = self.state.compare_exchange(RUNNING, TIMED_OUT, Ordering::AcqRel, Ordering::Acquire);
        self.changed.notify_waiters();
    }

    /// Stops the running statement and closes the connection (`KILL CONNECTION`).
    pub fn kill_connection(&self) {
        self.state.store(CONNECTION_KILLED, Ordering::Release);
        // A permit is kept if the connection is not waiting yet, so the wake-up is not lost.
        self.wake.notify_one();
        self.changed.notify_waiters();
    }

    /// Whether the connection was killed.
    pub fn connection_killed(&self) -> bool {
        self.state.load(Ordering::Acquire) == CONNECTION_KILLED
    }

    /// Resolves once the connection is killed (for an idle connection waiting on its socket).
    pub async fn until_connection_killed(&self) {
        while !self.connection_killed() {
            self.wake.notified().await;
        }
    }

    /// Forgets a `KILL QUERY` (or a time limit) that arrived after the previous statement
    /// ended: as in MySQL, it does not carry over to the next statement.
    pub fn begin_statement(&self) {
        for stale in [QUERY_KILLED, TIMED_OUT] {
            let _ = self.state.compare_exchange(stale, RUNNING, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// The error the running statement must stop with, if any.
    pub fn check(&self) -> Result<()> {
        match self.state.load(Ordering::Acquire) {
            RUNNING => Ok(()),
            QUERY_KILLED => Err(query_interrupted()),
            TIMED_OUT => Err(Error::user(
                Code::QueryTimeout,
                "Query execution was interrupted, maximum statement execution time exceeded",
            )),
            _ => Err(connection_killed()),
        }
    }
}

/// 1317: the statement was stopped by `KILL QUERY`.
pub fn query_interrupted() -> Error {
    Error::user(Code::QueryInterrupted, "Query execution was interrupted")
}

/// 1927: the statement's connection was killed.
pub fn connection_killed() -> Error {
    Error::user(Code::ConnectionKilled, "Connection was killed")
}

tokio::task_local! {
    static CURRENT: Arc<Interrupt>;
}

/// Runs `f` (one statement) so that [`check`] inside it answers for `interrupt`, and so
/// that lock waits below the SQL layer end when it is killed (`strata_common::cancel`).
pub async fn scope<F: Future>(interrupt: Arc<Interrupt>, f: F) -> F::Output {
    interrupt.begin_statement();
    let cancel: Arc<dyn strata_common::cancel::Cancel> = interrupt.clone();
    CURRENT.scope(interrupt, strata_common::cancel::scope(cancel, f)).await
}

impl strata_common::cancel::Cancel for Interrupt {
    fn cancelled(&self) -> std::pin::Pin<Box<dyn Future<Output = Error> + Send + '_>> {
        Box::pin(async move {
            loop {
                // Registered before the state is read, so a kill in between still wakes it.
                let notified = self.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if let Err(e) = self.check() {
                    return e;
                }
                notified.await;
            }
        })
    }
}

/// Fails if the running statement was killed. Outside [`scope`] it always passes.
pub fn check() -> Result<()> {
    CURRENT.try_with(|i| i.check()).unwrap_or(Ok(()))
}

/// Called once per row by the executor's loops: fails if the statement was killed, and hands
/// the worker thread back to the runtime every 128 rows (tokio's cooperative budget). Without
/// the yield a long query keeps its worker busy without ever polling the socket driver, so
/// other connections (the `KILL` among them) can stall until it ends.
pub async fn checkpoint() -> Result<()> {
    tokio::task::consume_budget().await;
    check()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn kill_query_stops_the_running_statement_only() {
        let i = Arc::new(Interrupt::default());
        let r = scope(i.clone(), async {
            check()?;
            i.kill_query();
            check()
        })
        .await;
        assert_eq!(r.map_err(|e| e.code()), Err(Code::QueryInterrupted));
        // The next statement starts afresh, and code outside a statement is never stopped.
        assert!(scope(i.clone(), async { check() }).await.is_ok());
        i.kill_query();
        assert!(check().is_ok());
        assert!(scope(i.clone(), async { check() }).await.is_ok(), "a kill between statements is dropped");
    }

    #[tokio::test]
    async fn a_time_limit_stops_the_statement_with_3024() {
        let i = Arc::new(Interrupt::default());
        let r = scope(i.clone(), async {
            i.time_out();
            check()
        })
        .await;
        assert_eq!(r.map_err(|e| e.code()), Err(Code::QueryTimeout));
        assert!(scope(i.clone(), async { check() }).await.is_ok(), "the next statement starts afresh");
    }

    #[tokio::test]
    async fn kill_connection_sticks_and_wakes_the_connection() {
        let i = Arc::new(Interrupt::default());
        let waiter = tokio::spawn({
            let i = i.clone();
            async move { i.until_connection_killed().await }
        });
        i.kill_connection();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter).await.expect("woken").expect("task");
        assert!(i.connection_killed());
        i.kill_query();
        let r = scope(i.clone(), async { check() }).await;
        assert_eq!(r.map_err(|e| e.code()), Err(Code::ConnectionKilled), "a killed connection stays killed");
        // Killed before anyone waits: the permit is kept.
        let j = Interrupt::default();
        j.kill_connection();
        tokio::time::timeout(std::time::Duration::from_secs(5), j.until_connection_killed()).await.expect("at once");
    }
}
