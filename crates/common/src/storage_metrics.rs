//! Process-wide counters of the storage engine (RocksDB below MVCC), rendered with the
//! server's metrics: the engine's crate sits below every crate that renders them.

use std::sync::atomic::{AtomicU64, Ordering};

/// Point reads of the latest CF its record cache answered.
pub static RECORD_CACHE_HITS: AtomicU64 = AtomicU64::new(0);
/// Point reads of the latest CF that went to the engine's files and memtables.
pub static RECORD_CACHE_MISSES: AtomicU64 = AtomicU64::new(0);
/// Bytes the record cache holds, as of the last eviction pass or clear (approximate).
pub static RECORD_CACHE_BYTES: AtomicU64 = AtomicU64::new(0);

/// Bytes the resident tables' records take (`storage_rocks::resident`).
pub static RESIDENT_BYTES: AtomicU64 = AtomicU64::new(0);
/// Tables resident or being loaded.
pub static RESIDENT_UNITS: AtomicU64 = AtomicU64::new(0);
/// Range scans a resident table's records answered.
pub static RESIDENT_SCANS: AtomicU64 = AtomicU64::new(0);

/// Appends the storage engine's counters in Prometheus's text format.
pub fn render(out: &mut String) {
    let name = "strata_storage_record_cache_reads_total";
    out.push_str(&format!(
        "# HELP {name} Point reads of current row versions, by whether the record cache held them.\n# TYPE {name} counter\n"
    ));
    out.push_str(&format!("{name}{{result=\"hit\"}} {}\n", RECORD_CACHE_HITS.load(Ordering::Relaxed)));
    out.push_str(&format!("{name}{{result=\"miss\"}} {}\n", RECORD_CACHE_MISSES.load(Ordering::Relaxed)));
    let one = [
        ("strata_storage_record_cache_bytes", "gauge", "Bytes the record cache holds.", &RECORD_CACHE_BYTES),
        ("strata_storage_resident_bytes", "gauge", "Bytes the records of resident tables take.", &RESIDENT_BYTES),
        (
            "strata_storage_resident_tables",
            "gauge",
            "Tables whose current records are held in memory (or being loaded).",
            &RESIDENT_UNITS,
        ),
        (
            "strata_storage_resident_scans_total",
            "counter",
            "Range scans answered from resident tables' records.",
            &RESIDENT_SCANS,
        ),
    ];
    for (name, kind, help, value) in one {
        out.push_str(&format!(
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}\n",
            value.load(Ordering::Relaxed)
        ));
    }
}
