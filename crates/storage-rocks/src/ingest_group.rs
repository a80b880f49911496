//! Group ingestion: the table files of bulk commits that arrive while another is being
//! taken in go to RocksDB together, in one `IngestExternalFile` call per column family.
//!
//! A call's cost is mostly fixed: the log is synced first (the file's puts may rest on
//! writes it still buffers), RocksDB records the file numbers it reserves in the MANIFEST
//! (a write and an fsync) and then the new files (another), rebuilding the column
//! family's version each time, with writes held off meanwhile. A 4-warehouse TPC-C load
//! makes ~1,600 such commits of ~1,000 keys from four connections; one call each was a
//! quarter of the server's CPU in that load (BENCHMARKS.md, session 73). Files of one call
//! must not overlap each other (each then lands at the lowest level it fits, as alone);
//! one that overlaps another waits for a later call of the same group.
//!
//! The first committer to find no group running leads: it takes every file queued, its
//! own included, runs the calls, posts each file's outcome and wakes the others; a
//! committer whose file came too late for that group leads the next one.

use std::collections::HashMap;
use std::path::PathBuf;

use parking_lot::{Condvar, Mutex};
use strata_common::Result;
use strata_storage::Cf;

/// One committer's table file, waiting to be taken in.
pub(crate) struct Request {
    pub cf: Cf,
    pub path: PathBuf,
    /// Its first and last keys.
    pub first: Vec<u8>,
    pub last: Vec<u8>,
    /// Set when queued.
    id: u64,
}

impl Request {
    /// The file at `path`, holding keys `first..=last` of `cf`.
    pub fn new(cf: Cf, path: PathBuf, first: Vec<u8>, last: Vec<u8>) -> Request {
        Request { cf, path, first, last, id: 0 }
    }
}

#[derive(Default)]
struct State {
    /// A leader is running a group.
    busy: bool,
    pending: Vec<Request>,
    /// Outcomes of finished files, by request id, until their committers take them.
    done: HashMap<u64, Result<()>>,
    next_id: u64,
}

/// The queue of files to take in (see the module docs).
#[derive(Default)]
pub(crate) struct IngestGroups {
    state: Mutex<State>,
    finished: Condvar,
}

/// The files of one RocksDB call: same column family, no two overlapping.
pub(crate) struct Call<'a> {
    pub cf: Cf,
    pub files: Vec<&'a Request>,
}

impl IngestGroups {
    /// Takes in `file` with whatever else is queued, returning once it is in (or failed).
    /// `sync_log` runs once per group before its calls, `ingest` once per call.
    pub fn ingest(
        &self,
        mut file: Request,
        sync_log: impl Fn() -> Result<()>,
        ingest: impl Fn(&Call) -> Result<()>,
    ) -> Result<()> {
        let mut st = self.state.lock();
        let id = st.next_id;
        st.next_id += 1;
        file.id = id;
        st.pending.push(file);
        loop {
            if let Some(outcome) = st.done.remove(&id) {
                return outcome;
            }
            if st.busy {
                self.finished.wait(&mut st);
                continue;
            }
            st.busy = true;
            let group = std::mem::take(&mut st.pending);
            let outcomes = parking_lot::MutexGuard::unlocked(&mut st, || run_group(&group, &sync_log, &ingest));
            st.busy = false;
            st.done.extend(outcomes);
            self.finished.notify_all();
        }
    }
}

/// Runs `group`'s calls, returning each request's outcome.
fn run_group(
    group: &[Request],
    sync_log: &impl Fn() -> Result<()>,
    ingest: &impl Fn(&Call) -> Result<()>,
) -> Vec<(u64, Result<()>)> {
    if let Err(e) = sync_log() {
        return group.iter().map(|r| (r.id, Err(e.clone()))).collect();
    }
    let mut outcomes = Vec::with_capacity(group.len());
    for call in calls(group) {
        let outcome = ingest(&call);
        outcomes.extend(call.files.iter().map(|r| (r.id, outcome.clone())));
    }
    outcomes
}

/// `group` split into calls: by column family, and within those in rounds of
/// files that do not overlap each other (a file overlapping one already in the round waits
/// for the next), each round in key order.
pub(crate) fn calls(group: &[Request]) -> Vec<Call<'_>> {
    let mut sorted: Vec<&Request> = group.iter().collect();
    sorted.sort_by(|a, b| (a.cf, &a.first).cmp(&(b.cf, &b.first)));
    let mut out: Vec<Call> = Vec::new();
    let mut left = sorted;
    while !left.is_empty() {
        let mut later = Vec::new();
        let mut round: Option<Call> = None;
        for r in left {
            match &mut round {
                Some(c) if c.cf == r.cf => {
                    // Sorted by first key: `r` overlaps the round if it starts at or before
                    // the round's last file ends.
                    if c.files.last().is_some_and(|prev| r.first <= prev.last) {
                        later.push(r);
                    } else {
                        c.files.push(r);
                    }
                }
                _ => {
                    if let Some(c) = round.take() {
                        out.push(c);
                    }
                    round = Some(Call { cf: r.cf, files: vec![r] });
                }
            }
        }
        out.extend(round);
        left = later;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;

    fn req(id: u64, cf: Cf, first: &str, last: &str) -> Request {
        Request { cf, path: PathBuf::from(format!("{id}.sst")), first: first.into(), last: last.into(), id }
    }

    /// A call's files, and whether it failed.
    type CallMade = (Vec<PathBuf>, bool);

    fn ids(c: &Call) -> Vec<u64> {
        c.files.iter().map(|r| r.id).collect()
    }

    #[test]
    fn disjoint_files_of_one_column_family_share_a_call() {
        let group = vec![req(0, Cf::Latest, "m", "p"), req(1, Cf::Latest, "a", "c"), req(2, Cf::Latest, "d", "l")];
        let c = calls(&group);
        assert_eq!(c.len(), 1);
        assert_eq!(ids(&c[0]), vec![1, 2, 0], "in key order");
    }

    #[test]
    fn overlapping_files_and_other_column_families_get_calls_of_their_own() {
        let group = vec![
            req(0, Cf::Latest, "a", "f"),
            req(1, Cf::Latest, "c", "d"), // inside 0
            req(2, Cf::Latest, "f", "h"), // shares 0's last key
            req(3, Cf::Latest, "i", "k"),
            req(4, Cf::Write, "a", "z"),
        ];
        let c = calls(&group);
        let mut shape: Vec<(Cf, Vec<u64>)> = c.iter().map(|c| (c.cf, ids(c))).collect();
        shape.sort();
        assert_eq!(shape, vec![(Cf::Write, vec![4]), (Cf::Latest, vec![0, 3]), (Cf::Latest, vec![1, 2])]);
        // Every file is in exactly one call, and no call holds two that overlap.
        for call in &c {
            for w in call.files.windows(2) {
                assert!(w[0].last < w[1].first);
            }
        }
        assert_eq!(c.iter().map(|c| c.files.len()).sum::<usize>(), group.len());
    }

    #[test]
    fn concurrent_committers_share_groups_and_each_gets_its_own_outcome() {
        let groups = Arc::new(IngestGroups::default());
        let syncs = Arc::new(AtomicUsize::new(0));
        // Each call's files, and whether it failed.
        let made: Arc<Mutex<Vec<CallMade>>> = Arc::default();
        let threads: Vec<_> = (0..8u8)
            .map(|i| {
                let (g, s, m) = (groups.clone(), syncs.clone(), made.clone());
                std::thread::spawn(move || {
                    let key = vec![b'a' + i];
                    let sync = || {
                        s.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(std::time::Duration::from_millis(20));
                        Ok(())
                    };
                    let call = |call: &Call| {
                        // The file of committer 3 fails, and with it its whole call.
                        let paths: Vec<PathBuf> = call.files.iter().map(|r| r.path.clone()).collect();
                        let fail = paths.contains(&PathBuf::from("3.sst"));
                        m.lock().push((paths, fail));
                        if fail {
                            Err(strata_common::Error::Io("refused".into()))
                        } else {
                            Ok(())
                        }
                    };
                    let file = Request::new(Cf::Latest, PathBuf::from(format!("{i}.sst")), key.clone(), key);
                    g.ingest(file, sync, call).is_ok()
                })
            })
            .collect();
        let ok: Vec<bool> = threads.into_iter().map(|t| t.join().expect("committer thread")).collect();
        let made = made.lock();
        for (i, ok) in ok.iter().enumerate() {
            let path = PathBuf::from(format!("{i}.sst"));
            let in_calls: Vec<&CallMade> = made.iter().filter(|(p, _)| p.contains(&path)).collect();
            assert_eq!(in_calls.len(), 1, "file {i} is taken in by exactly one call");
            assert_eq!(*ok, !in_calls[0].1, "committer {i} sees its own call's outcome");
        }
        assert!(!ok[3]);
        // Eight committers arriving during 20-ms log syncs: fewer groups than committers,
        // and one call per group (no file overlaps another).
        let s = syncs.load(Ordering::SeqCst);
        assert!(s < 8, "{s} log syncs for 8 files");
        assert_eq!(s, made.len());
    }
}
