//! What a running statement carries besides its transaction: the session's size limits and
//! the warnings it raises. Scalar functions and operators deep in the executor find it through
//! a task-local set around the statement, so they need no extra argument.
//!
//! Outside a statement (constant folding in `SET`, unit tests) the limits are MySQL's
//! defaults and warnings go nowhere.

use std::cell::RefCell;
use std::future::Future;

use strata_common::Code;

/// Size limits of one statement, from the session's variables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `max_allowed_packet`: a string result longer than this becomes NULL with a warning.
    pub max_allowed_packet: usize,
    /// `group_concat_max_len`: GROUP_CONCAT results are cut to this many bytes.
    pub group_concat_max_len: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_allowed_packet: 64 << 20, group_concat_max_len: 1024 }
    }
}

struct Current {
    limits: Limits,
    warnings: RefCell<Vec<(Code, String)>>,
}

tokio::task_local! {
    static CURRENT: Current;
}

/// Runs `f` (one statement) under `limits`; returns its output and the warnings it raised.
pub async fn scope<F: Future>(limits: Limits, f: F) -> (F::Output, Vec<(Code, String)>) {
    let current = Current { limits, warnings: RefCell::new(Vec::new()) };
    CURRENT
        .scope(current, async move {
            let out = f.await;
            (out, CURRENT.with(|c| c.warnings.take()))
        })
        .await
}

/// The running statement's limits.
pub fn limits() -> Limits {
    CURRENT.try_with(|c| c.limits).unwrap_or_default()
}

/// Raises a warning on the running statement (`SHOW WARNINGS` lists it).
pub fn warn(code: Code, message: impl Into<String>) {
    let _ = CURRENT.try_with(|c| c.warnings.borrow_mut().push((code, message.into())));
}

/// Checks that a string result of `len` bytes from `function` fits `max_allowed_packet`.
/// When it does not, MySQL returns NULL with warning 1301 instead of building it; callers
/// check before they allocate.
pub fn fits_packet(function: &str, len: usize) -> bool {
    let max = limits().max_allowed_packet;
    if len <= max {
        return true;
    }
    warn(
        Code::WarnAllowedPacketOverflowed,
        format!("Result of {function}() was larger than max_allowed_packet ({max}) - truncated"),
    );
    false
}
