//! A progress bar for loads: rows done out of rows expected, with the current rate. Redrawn in
//! place on a terminal; on a pipe or log file, one line every few seconds.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Shared counters the loaders add to.
#[derive(Debug)]
pub struct Progress {
    label: String,
    expected: u64,
    done: AtomicU64,
    finished: AtomicBool,
    started: Instant,
}

impl Progress {
    /// A bar for `expected` rows.
    pub fn new(label: &str, expected: u64) -> Arc<Progress> {
        Arc::new(Progress {
            label: label.to_string(),
            expected: expected.max(1),
            done: AtomicU64::new(0),
            finished: AtomicBool::new(false),
            started: Instant::now(),
        })
    }

    /// Counts `rows` more rows as loaded.
    pub fn add(&self, rows: u64) {
        self.done.fetch_add(rows, Ordering::Relaxed);
    }

    /// Rows loaded so far.
    pub fn done(&self) -> u64 {
        self.done.load(Ordering::Relaxed)
    }

    /// Time since the bar was made.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Rows per second so far.
    pub fn rate(&self) -> f64 {
        self.done() as f64 / self.elapsed().as_secs_f64().max(1e-3)
    }

    /// The bar's text.
    pub fn line(&self) -> String {
        let done = self.done();
        let frac = (done as f64 / self.expected as f64).min(1.0);
        let width = 30;
        let filled = (frac * width as f64).round() as usize;
        format!(
            "{} [{}{}] {:>5.1}% {} rows, {:.0} rows/s, {:.0} s",
            self.label,
            "#".repeat(filled),
            " ".repeat(width - filled),
            frac * 100.0,
            done,
            self.rate(),
            self.elapsed().as_secs_f64()
        )
    }

    /// Draws the bar until [`Progress::finish`] is called; returns the drawing thread.
    pub fn spawn_drawer(self: &Arc<Self>) -> std::thread::JoinHandle<()> {
        let me = self.clone();
        std::thread::spawn(move || {
            let tty = std::io::stderr().is_terminal();
            let every = if tty { Duration::from_millis(250) } else { Duration::from_secs(5) };
            let mut last = Instant::now();
            while !me.finished.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(100));
                if last.elapsed() >= every {
                    last = Instant::now();
                    let mut err = std::io::stderr().lock();
                    if tty {
                        let _ = write!(err, "\r{}", me.line());
                    } else {
                        let _ = writeln!(err, "{}", me.line());
                    }
                    let _ = err.flush();
                }
            }
            let mut err = std::io::stderr().lock();
            let _ = if tty { write!(err, "\r{}\n", me.line()) } else { writeln!(err, "{}", me.line()) };
        })
    }

    /// Stops the drawer (it prints the final state once more).
    pub fn finish(&self) {
        self.finished.store(true, Ordering::Relaxed);
    }
}
