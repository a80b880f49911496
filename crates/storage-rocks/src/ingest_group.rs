//! Group ingestion: the table files of bulk commits that arrive while another is being
//! taken in go to RocksDB together, in one `IngestExternalFile` call per column family.
//!
//! A call's cost is mostly fixed: the log is synced first (the file's puts may rest on
//! writes it still buffers), RocksDB records the file numbers it reserves in the MANIFEST
//! (a write and an fsync) and then the new files (another), rebuilding the column
//! family's version each time, with writes held off meanwhile. A 4-warehouse TPC-C load
//! makes ~1,600 such commits of ~1,000 keys from four connections; one call each was a
//! quarter of the server's CPU in that load (BENCHMARKS.md, session 73). A commit's files
//! (one per table unit, `table_partitioner`) go in one call, so it is taken in whole or
//! not at all. Files of one call must not overlap each other (each then lands at the
//! lowest level it fits, as alone); a commit with a file overlapping another commit's
//! waits for a later call of the same group.
//!
//! The first committer to find no group running leads: it takes every request queued, its
//! own included, runs the calls, posts each request's outcome and wakes the others; a
//! committer whose request came too late for that group leads the next one.

use std::collections::HashMap;
use std::path::PathBuf;

use parking_lot::{Condvar, Mutex};
use strata_common::Result;
use strata_storage::Cf;

/// One table file of a request: where it is, and its first and last keys.
pub(crate) struct File {
    pub path: PathBuf,
    pub first: Vec<u8>,
    pub last: Vec<u8>,
}

impl File {
    fn overlaps(&self, other: &File) -> bool {
        self.first <= other.last && other.first <= self.last
    }
}

/// One committer's table files (disjoint, in key order), waiting to be taken in together.
pub(crate) struct Request {
    pub cf: Cf,
    pub files: Vec<File>,
    /// Set when queued.
    id: u64,
}

impl Request {
    /// `files` of `cf`, to be taken in by one call (all or none).
    pub fn new(cf: Cf, files: Vec<File>) -> Request {
        Request { cf, files, id: 0 }
    }

    fn first(&self) -> &[u8] {
        self.files.first().map_or(&[], |f| f.first.as_slice())
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

/// The requests of one RocksDB call: same column family, no two files overlapping.
pub(crate) struct Call<'a> {
    pub cf: Cf,
    pub requests: Vec<&'a Request>,
}

impl Call<'_> {
    /// Every file of the call, in key order.
    pub fn files(&self) -> Vec<&File> {
        let mut files: Vec<&File> = self.requests.iter().flat_map(|r| &r.files).collect();
        files.sort_by(|a, b| a.first.cmp(&b.first));
        files
    }

    fn overlaps(&self, r: &Request) -> bool {
        self.requests.iter().flat_map(|q| &q.files).any(|g| r.files.iter().any(|f| f.overlaps(g)))
    }
}

impl IngestGroups {
    /// Takes in `file`'s files with whatever else is queued, returning once they are in
    /// (or failed). `sync_log` runs once per group before its calls, `ingest` once per call.
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
        outcomes.extend(call.requests.iter().map(|r| (r.id, outcome.clone())));
    }
    outcomes
}

/// `group` split into calls: by column family, and within those in rounds of requests
/// whose files do not overlap each other's (a request with a file overlapping one already
/// in the round waits for the next), each round in key order of the requests' first files.
pub(crate) fn calls(group: &[Request]) -> Vec<Call<'_>> {
    let mut sorted: Vec<&Request> = group.iter().collect();
    sorted.sort_by(|a, b| (a.cf, a.first()).cmp(&(b.cf, b.first())));
    let mut out: Vec<Call> = Vec::new();
    let mut left = sorted;
    while !left.is_empty() {
        let mut later = Vec::new();
        let mut round: Option<Call> = None;
        for r in left {
            match &mut round {
                Some(c) if c.cf == r.cf => {
                    if c.overlaps(r) {
                        later.push(r);
                    } else {
                        c.requests.push(r);
                    }
                }
                _ => {
                    if let Some(c) = round.take() {
                        out.push(c);
                    }
                    round = Some(Call { cf: r.cf, requests: vec![r] });
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

    fn file(name: String, first: &str, last: &str) -> File {
        File { path: PathBuf::from(name), first: first.into(), last: last.into() }
    }

    fn req(id: u64, cf: Cf, first: &str, last: &str) -> Request {
        Request { cf, files: vec![file(format!("{id}.sst"), first, last)], id }
    }

    /// A call's files, and whether it failed.
    type CallMade = (Vec<PathBuf>, bool);

    fn ids(c: &Call) -> Vec<u64> {
        c.requests.iter().map(|r| r.id).collect()
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
            for w in call.files().windows(2) {
                assert!(w[0].last < w[1].first);
            }
        }
        assert_eq!(c.iter().map(|c| c.files().len()).sum::<usize>(), group.len());
    }

    #[test]
    fn a_request_s_files_go_in_one_call_and_interleave_with_others() {
        // Two commits' rows and index entries: rows apart, index entries interleaved but
        // disjoint (0's "i1".."i3", 1's "i4".."i6"); a third whose index entries fall among 0's.
        let two = |id: u64, rows: (&str, &str), idx: (&str, &str)| Request {
            cf: Cf::Latest,
            files: vec![file(format!("{id}r"), rows.0, rows.1), file(format!("{id}i"), idx.0, idx.1)],
            id,
        };
        let group = vec![
            two(0, ("r1", "r2"), ("x1", "x3")),
            two(1, ("r3", "r4"), ("x4", "x6")),
            two(2, ("r5", "r6"), ("x2", "x2")),
        ];
        let c = calls(&group);
        let shape: Vec<Vec<u64>> = c.iter().map(ids).collect();
        assert_eq!(shape, vec![vec![0, 1], vec![2]]);
        let paths: Vec<PathBuf> = c[0].files().iter().map(|f| f.path.clone()).collect();
        let want: Vec<PathBuf> = ["0r", "1r", "0i", "1i"].iter().map(PathBuf::from).collect();
        assert_eq!(paths, want, "every file of the call, in key order");
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
                        let paths: Vec<PathBuf> = call.files().iter().map(|f| f.path.clone()).collect();
                        let fail = paths.contains(&PathBuf::from("3.sst"));
                        m.lock().push((paths, fail));
                        if fail {
                            Err(strata_common::Error::Io("refused".into()))
                        } else {
                            Ok(())
                        }
                    };
                    let file = Request::new(
                        Cf::Latest,
                        vec![File { path: PathBuf::from(format!("{i}.sst")), first: key.clone(), last: key }],
                    );
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
