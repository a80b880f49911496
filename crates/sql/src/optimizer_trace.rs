//! MySQL's optimizer trace: with `SET optimizer_trace = 'enabled=on'`, each statement the
//! planner optimizes records its logical plan as bound and after every rule
//! (`crate::rules::RULES`), per query block (the statement's query, each derived table or
//! view planned on its own, each subquery); `information_schema.OPTIMIZER_TRACE` then shows
//! the last traced statement: QUERY, TRACE (JSON), MISSING_BYTES_BEYOND_MAX_MEM_SIZE and
//! INSUFFICIENT_PRIVILEGES, as in MySQL. A statement that reads OPTIMIZER_TRACE is not traced
//! (it would replace the trace it reads). The trace holds at most
//! `optimizer_trace_max_mem_size` bytes of plan text; the rest is counted as missing.
//!
//! TRACE is `{"steps": [{"query_block": .., "rule": .., "plan": [lines]}, ..]}`, the plan in
//! `LogicalPlan::explain`'s form; the first step of each block has rule "bound" (the plan as
//! the binder produced it).

use parking_lot::Mutex;
use strata_common::{Code, Error, Result};

use crate::logical::LogicalPlan;
use crate::rules::Trace;

/// One recorded plan.
#[derive(Debug, Clone)]
struct Step {
    block: String,
    rule: &'static str,
    plan: Vec<String>,
}

/// What one statement's planning recorded.
#[derive(Debug, Default)]
pub struct OptimizerTrace {
    inner: Mutex<Recorded>,
    max_bytes: usize,
}

#[derive(Debug, Default)]
struct Recorded {
    steps: Vec<Step>,
    bytes: usize,
    missing: usize,
    blocks: usize,
    reads_trace: bool,
}

/// The trace information_schema.OPTIMIZER_TRACE shows.
#[derive(Debug, Clone)]
pub struct TraceRow {
    /// The statement.
    pub query: String,
    /// The trace, JSON.
    pub trace: String,
    /// Bytes left out over `optimizer_trace_max_mem_size`.
    pub missing_bytes: usize,
}

impl OptimizerTrace {
    /// An empty trace holding at most `max_bytes` of plan text.
    pub fn new(max_bytes: usize) -> OptimizerTrace {
        OptimizerTrace { inner: Mutex::default(), max_bytes }
    }

    /// A name for the next query block optimized (`query_block` in the trace).
    pub fn next_block(&self, what: &str) -> String {
        let mut r = self.inner.lock();
        r.blocks += 1;
        format!("#{} {what}", r.blocks)
    }

    /// Records the plan `block` had before the rules (`bound`) and after each.
    pub fn record(&self, block: &str, bound: &LogicalPlan, after: Trace) {
        let mut lines = Vec::new();
        bound.explain(0, &mut lines);
        let mut r = self.inner.lock();
        for (rule, plan) in std::iter::once(("bound", lines)).chain(after) {
            let bytes: usize = plan.iter().map(|l| l.len() + 4).sum::<usize>() + rule.len() + block.len() + 40;
            if r.missing > 0 || r.bytes + bytes > self.max_bytes {
                r.missing += bytes;
                continue;
            }
            r.bytes += bytes;
            r.steps.push(Step { block: block.to_string(), rule, plan });
        }
    }

    /// Notes that the statement reads OPTIMIZER_TRACE (so it is not kept as the last trace).
    pub fn mark_reads_trace(&self) {
        self.inner.lock().reads_trace = true;
    }

    /// The row to keep for `query`, or None when nothing was planned or the statement read
    /// the trace.
    pub fn finish(&self, query: String, one_line: bool) -> Option<TraceRow> {
        let r = self.inner.lock();
        if r.reads_trace || (r.steps.is_empty() && r.missing == 0) {
            return None;
        }
        let steps: Vec<serde_json::Value> = r
            .steps
            .iter()
            .map(|s| serde_json::json!({ "query_block": s.block, "rule": s.rule, "plan": s.plan }))
            .collect();
        let doc = serde_json::json!({ "steps": steps });
        let trace = if one_line { serde_json::to_string(&doc) } else { serde_json::to_string_pretty(&doc) };
        Some(TraceRow { query, trace: trace.unwrap_or_default(), missing_bytes: r.missing })
    }
}

/// The `optimizer_trace` flags: enabled, one_line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    /// Trace statements.
    pub enabled: bool,
    /// TRACE without line breaks.
    pub one_line: bool,
}

impl Flags {
    /// Reads the variable's value (unknown text: off).
    pub fn parse(value: &str) -> Flags {
        Flags::set(Flags::default(), value).unwrap_or_default()
    }

    /// `current` with the assignments in `text` (`enabled=on,one_line=off`; `default`
    /// resets a flag, the whole text `default` both) applied; MySQL's error 1231 on
    /// anything else.
    pub fn set(mut current: Flags, text: &str) -> Result<Flags> {
        let bad = || {
            Error::user(
                Code::WrongValueForVar,
                format!("Variable 'optimizer_trace' can't be set to the value of '{text}'"),
            )
        };
        if text.trim().eq_ignore_ascii_case("default") {
            return Ok(Flags::default());
        }
        for part in text.split(',') {
            let (name, value) = part.split_once('=').ok_or_else(bad)?;
            // Read on every statement: compared in place, without lowercased copies.
            let value = value.trim();
            let value = if value.eq_ignore_ascii_case("on") {
                Some(true)
            } else if value.eq_ignore_ascii_case("off") {
                Some(false)
            } else if value.eq_ignore_ascii_case("default") {
                None
            } else {
                return Err(bad());
            };
            let name = name.trim();
            if name.eq_ignore_ascii_case("enabled") {
                current.enabled = value.unwrap_or(false);
            } else if name.eq_ignore_ascii_case("one_line") {
                current.one_line = value.unwrap_or(false);
            } else {
                return Err(bad());
            }
        }
        Ok(current)
    }

    /// The variable's value, as MySQL shows it.
    pub fn render(self) -> String {
        let on = |b: bool| if b { "on" } else { "off" };
        format!("enabled={},one_line={}", on(self.enabled), on(self.one_line))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_parse_merge_and_reject_nonsense() {
        let on = Flags::set(Flags::default(), "enabled=on").expect("valid");
        assert_eq!(on.render(), "enabled=on,one_line=off");
        let both = Flags::set(on, "one_line=ON").expect("valid");
        assert_eq!(both.render(), "enabled=on,one_line=on");
        assert_eq!(Flags::set(both, "enabled=default").expect("valid").render(), "enabled=off,one_line=on");
        assert_eq!(Flags::set(both, "default").expect("valid"), Flags::default());
        for bad in ["enabled", "enabled=yes", "colour=on", ""] {
            let e = Flags::set(on, bad).expect_err(bad);
            assert_eq!(e.code(), Code::WrongValueForVar, "{bad}");
        }
    }

    #[test]
    fn the_trace_keeps_steps_up_to_its_size_and_counts_the_rest() {
        let plan = LogicalPlan::Dual;
        let trace = OptimizerTrace::new(200);
        let block = trace.next_block("query");
        trace.record(&block, &plan, vec![("fold_constants", vec!["Dual".into()]), ("factor_or", vec!["Dual".into()])]);
        let row = trace.finish("SELECT 1".into(), true).expect("a trace");
        let doc: serde_json::Value = serde_json::from_str(&row.trace).expect("JSON");
        let rules: Vec<&str> =
            doc["steps"].as_array().expect("steps").iter().map(|s| s["rule"].as_str().expect("rule")).collect();
        // Each step costs about 60 bytes here: three fit in 200, the fourth would not.
        assert_eq!(rules, ["bound", "fold_constants", "factor_or"]);
        assert_eq!(row.missing_bytes, 0);
        trace.record(&block, &plan, Vec::new());
        assert!(trace.finish("SELECT 1".into(), true).expect("a trace").missing_bytes > 0);
        trace.mark_reads_trace();
        assert!(trace.finish("SELECT 1".into(), true).is_none());
    }
}
