//! A latency histogram with fixed buckets, for Prometheus's text format. Every layer that
//! times something the metrics endpoint shows (statement phases in the SQL layer, timestamp
//! waits, lock waits and commits in the transaction layer) records into one of these;
//! observations are relaxed atomic adds, so recording never blocks and rendering reads
//! without stopping anyone.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Upper bounds of the buckets, in seconds (100 µs to 10 s; the last bucket is +Inf).
pub const BOUNDS: [f64; 16] =
    [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0];

/// A duration histogram with fixed buckets.
#[derive(Debug)]
pub struct Histogram {
    /// Observations per bucket (not cumulative); the last one is +Inf.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_nanos: AtomicU64,
    count: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Histogram {
        Histogram::new()
    }
}

impl Histogram {
    /// An empty histogram (usable in a `static`).
    pub const fn new() -> Histogram {
        Histogram {
            buckets: [const { AtomicU64::new(0) }; BOUNDS.len() + 1],
            sum_nanos: AtomicU64::new(0),
            count: AtomicU64::new(0),
        }
    }

    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let i = BOUNDS.iter().position(|b| secs <= *b).unwrap_or(BOUNDS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        self.sum_nanos.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    /// How many observations were recorded.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    /// The sum of the observations.
    pub fn sum(&self) -> Duration {
        Duration::from_nanos(self.sum_nanos.load(Ordering::Relaxed))
    }

    /// Appends metric family `name` whole: its `# HELP` and `# TYPE` lines, then the
    /// unlabelled series (`render`).
    pub fn render_family(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        self.render(out, name, "");
    }

    /// Appends the histogram's `_bucket`, `_sum` and `_count` lines for metric `name` with
    /// `labels` (`key="value",...`, may be empty).
    pub fn render(&self, out: &mut String, name: &str, labels: &str) {
        let sep = if labels.is_empty() { "" } else { "," };
        let mut cumulative = 0;
        for (i, b) in self.buckets.iter().enumerate() {
            cumulative += b.load(Ordering::Relaxed);
            let le = BOUNDS.get(i).map_or("+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9;
        let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_cumulative_and_labels_optional() {
        let h = Histogram::new();
        h.observe(Duration::from_micros(50));
        h.observe(Duration::from_millis(3));
        h.observe(Duration::from_secs(20));
        let mut out = String::new();
        h.render(&mut out, "m", "");
        assert!(out.contains("m_bucket{le=\"0.0001\"} 1\n"), "{out}");
        assert!(out.contains("m_bucket{le=\"0.005\"} 2\n"), "{out}");
        assert!(out.contains("m_bucket{le=\"+Inf\"} 3\n"), "{out}");
        assert!(out.contains("m_count{} 3\n"), "{out}");
        assert_eq!(h.sum(), Duration::from_nanos(20_003_050_000));
        let mut labelled = String::new();
        h.render(&mut labelled, "m", "type=\"x\"");
        assert!(labelled.contains("m_bucket{type=\"x\",le=\"+Inf\"} 3\n"), "{labelled}");
    }
}
