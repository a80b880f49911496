//! Latency and outcome accounting for a run: HDR histograms of microseconds per operation
//! kind, for the whole measurement window and for the current reporting interval.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency tracked exactly: one hour, in microseconds.
const MAX_MICROS: u64 = 3_600_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, MAX_MICROS, 3).expect("valid histogram bounds")
}

/// Outcomes of one operation kind over some window.
#[derive(Clone, Debug)]
pub struct Tally {
    /// Latency of every completed operation, in microseconds.
    pub latency: Histogram<u64>,
    /// Operations that completed (committed, or rolled back by design).
    pub ok: u64,
    /// Operations that failed after their retries ran out or with a non-retryable error.
    pub errors: u64,
    /// Retries after a retryable error (deadlock, lock wait timeout, write conflict).
    pub retries: u64,
    /// Completed operations that were rolled back on purpose (New-Order's 1%).
    pub rolled_back: u64,
}

impl Default for Tally {
    fn default() -> Self {
        Tally { latency: histogram(), ok: 0, errors: 0, retries: 0, rolled_back: 0 }
    }
}

impl Tally {
    /// Records one completed operation.
    pub fn record(&mut self, micros: u64) {
        self.ok += 1;
        self.latency.saturating_record(micros.clamp(1, MAX_MICROS));
    }

    /// Adds another tally into this one.
    pub fn merge(&mut self, other: &Tally) {
        self.ok += other.ok;
        self.errors += other.errors;
        self.retries += other.retries;
        self.rolled_back += other.rolled_back;
        // Both use the same bounds, so adding cannot fail.
        let _ = self.latency.add(&other.latency);
    }

    /// The latency at percentile `p` (0–100), in milliseconds.
    pub fn percentile_ms(&self, p: f64) -> f64 {
        if self.latency.is_empty() {
            return 0.0;
        }
        self.latency.value_at_percentile(p) as f64 / 1000.0
    }

    /// A serializable summary over `secs` seconds.
    pub fn summary(&self, secs: f64) -> TallySummary {
        TallySummary {
            count: self.ok,
            errors: self.errors,
            retries: self.retries,
            rolled_back: self.rolled_back,
            per_sec: if secs > 0.0 { self.ok as f64 / secs } else { 0.0 },
            avg_ms: if self.latency.is_empty() { 0.0 } else { self.latency.mean() / 1000.0 },
            p50_ms: self.percentile_ms(50.0),
            p95_ms: self.percentile_ms(95.0),
            p99_ms: self.percentile_ms(99.0),
            max_ms: if self.latency.is_empty() { 0.0 } else { self.latency.max() as f64 / 1000.0 },
        }
    }
}

/// The numbers of a [`Tally`], as reported.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct TallySummary {
    /// Completed operations.
    pub count: u64,
    /// Failed operations.
    pub errors: u64,
    /// Retries.
    pub retries: u64,
    /// Completed operations rolled back by design.
    pub rolled_back: u64,
    /// Completed operations per second.
    pub per_sec: f64,
    /// Mean latency, ms.
    pub avg_ms: f64,
    /// Median latency, ms.
    pub p50_ms: f64,
    /// 95th percentile latency, ms.
    pub p95_ms: f64,
    /// 99th percentile latency, ms.
    pub p99_ms: f64,
    /// Highest latency, ms.
    pub max_ms: f64,
}

/// Tallies per operation kind, plus the first few distinct error messages per kind.
#[derive(Debug, Default)]
pub struct Board {
    /// Per kind.
    pub tallies: BTreeMap<&'static str, Tally>,
    /// Distinct error messages per kind with how often each was seen.
    pub error_samples: BTreeMap<&'static str, BTreeMap<String, u64>>,
}

/// How many distinct error messages a kind keeps.
const MAX_ERROR_SAMPLES: usize = 8;

impl Board {
    /// The tally of `kind`.
    pub fn tally(&mut self, kind: &'static str) -> &mut Tally {
        self.tallies.entry(kind).or_default()
    }

    /// Notes a failure of `kind` with its message.
    pub fn error(&mut self, kind: &'static str, message: String) {
        self.tally(kind).errors += 1;
        let samples = self.error_samples.entry(kind).or_default();
        if let Some(n) = samples.get_mut(&message) {
            *n += 1;
        } else if samples.len() < MAX_ERROR_SAMPLES {
            samples.insert(message, 1);
        }
    }

    /// Adds another board into this one.
    pub fn merge(&mut self, other: &Board) {
        for (k, t) in &other.tallies {
            self.tally(k).merge(t);
        }
        for (k, samples) in &other.error_samples {
            let mine = self.error_samples.entry(k).or_default();
            for (m, n) in samples {
                if let Some(c) = mine.get_mut(m) {
                    *c += n;
                } else if mine.len() < MAX_ERROR_SAMPLES {
                    mine.insert(m.clone(), *n);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_come_from_the_recorded_latencies() {
        let mut t = Tally::default();
        for us in 1..=1000u64 {
            t.record(us * 1000); // 1..1000 ms
        }
        let s = t.summary(10.0);
        assert_eq!(s.count, 1000);
        assert!((s.per_sec - 100.0).abs() < 1e-9);
        assert!((s.p50_ms - 500.0).abs() < 1.0, "{}", s.p50_ms);
        assert!((s.p99_ms - 990.0).abs() < 1.5, "{}", s.p99_ms);
        assert!((s.max_ms - 1000.0).abs() < 1.0, "{}", s.max_ms);
    }

    #[test]
    fn boards_merge_counts_and_keep_error_samples_bounded() {
        let mut a = Board::default();
        a.tally("X").record(10);
        for i in 0..20 {
            a.error("X", format!("e{}", i % 10));
        }
        let mut b = Board::default();
        b.tally("X").record(20);
        b.tally("X").retries += 3;
        b.error("X", "e0".into());
        a.merge(&b);
        let t = &a.tallies["X"];
        assert_eq!((t.ok, t.errors, t.retries), (2, 21, 3));
        assert_eq!(a.error_samples["X"].len(), MAX_ERROR_SAMPLES);
        assert_eq!(a.error_samples["X"]["e0"], 3);
    }
}
