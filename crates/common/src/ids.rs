//! Newtypes for identifiers and timestamps, so a table id is never passed where a timestamp
//! is expected.

use std::fmt;

/// A timestamp from the timestamp oracle: physical milliseconds in the high 46 bits, a
/// logical counter in the low 18 bits (TiDB's layout). Ordering of MVCC versions relies only
/// on these values, never on a wall clock.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timestamp(pub u64);

impl Timestamp {
    /// Bits reserved for the logical counter.
    pub const LOGICAL_BITS: u32 = 18;
    /// The smallest timestamp; no transaction ever gets it.
    pub const ZERO: Timestamp = Timestamp(0);
    /// The largest timestamp: reading at it sees every committed version.
    pub const MAX: Timestamp = Timestamp(u64::MAX);

    /// Builds a timestamp from its physical (ms) and logical parts.
    pub fn compose(physical_ms: u64, logical: u64) -> Timestamp {
        Timestamp((physical_ms << Self::LOGICAL_BITS) | logical)
    }

    /// The physical part in milliseconds.
    pub fn physical_ms(self) -> u64 {
        self.0 >> Self::LOGICAL_BITS
    }

    /// The next timestamp.
    pub fn next(self) -> Timestamp {
        Timestamp(self.0 + 1)
    }

    /// The previous timestamp (saturating at zero).
    pub fn prev(self) -> Timestamp {
        Timestamp(self.0.saturating_sub(1))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A table's identifier, unique in the cluster and never reused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableId(pub i64);

/// An index identifier, unique within its table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct IndexId(pub i64);

impl fmt::Display for TableId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}
