//! Thread scheduling hints.

/// Asks the kernel for a short time slice (`slice`, clamped by Linux to 0.1-100 ms) for the
/// calling thread, so that when it wakes on a busy machine it runs at once instead of after
/// the running thread's slice.
///
/// Linux's EEVDF scheduler (6.6 and later) orders runnable threads by virtual deadline, a
/// thread's eligible time plus its slice (by default 0.75 ms times one plus the log2 of the
/// CPU count: 1.4-1.5 ms on two cores), and a thread that wakes
/// preempts the running one only if its deadline comes first. A thread that sleeps most
/// of the time and is waited for when it wakes — group commit's fsync thread — asks for a
/// short slice: its deadline then comes before a busy thread's, and the commits queued on it
/// are not held up behind a statement worker or a client's thread. A custom slice needs
/// Linux 6.12 or later and no privilege; elsewhere the call fails or is ignored and
/// nothing changes. Returns whether the slice is now the thread's.
pub fn request_short_slice(slice: std::time::Duration) -> bool {
    #[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        /// `struct sched_attr` as of its first version (48 bytes).
        #[repr(C)]
        struct SchedAttr {
            size: u32,
            policy: u32,
            flags: u64,
            nice: i32,
            priority: u32,
            runtime: u64,
            deadline: u64,
            period: u64,
        }
        extern "C" {
            fn syscall(number: i64, ...) -> i64;
            fn getpriority(which: i32, who: u32) -> i32;
        }
        #[cfg(target_arch = "x86_64")]
        const SYS_SCHED_SETATTR: i64 = 314;
        #[cfg(target_arch = "x86_64")]
        const SYS_SCHED_GETATTR: i64 = 315;
        #[cfg(target_arch = "aarch64")]
        const SYS_SCHED_SETATTR: i64 = 274;
        #[cfg(target_arch = "aarch64")]
        const SYS_SCHED_GETATTR: i64 = 275;
        const SCHED_OTHER: u32 = 0;
        const PRIO_PROCESS: i32 = 0;
        // SAFETY: getpriority takes plain integers (who = 0: the calling thread); it returns
        // the nice value, kept as it is below.
        #[allow(unsafe_code)]
        let nice = unsafe { getpriority(PRIO_PROCESS, 0) };
        let attr = SchedAttr {
            size: std::mem::size_of::<SchedAttr>() as u32,
            policy: SCHED_OTHER,
            flags: 0,
            nice,
            priority: 0,
            runtime: u64::try_from(slice.as_nanos()).unwrap_or(u64::MAX),
            deadline: 0,
            period: 0,
        };
        // SAFETY: sched_setattr(pid 0 = the calling thread, a valid sched_attr whose size
        // field is its size, flags 0) only reads `attr`, which outlives the call.
        #[allow(unsafe_code)]
        let rc = unsafe { syscall(SYS_SCHED_SETATTR, 0i32, &attr as *const SchedAttr, 0u32) };
        if rc != 0 {
            return false;
        }
        // Kernels before custom slices accept the call and ignore the runtime: read it back.
        let mut now =
            SchedAttr { size: 0, policy: 0, flags: 0, nice: 0, priority: 0, runtime: 0, deadline: 0, period: 0 };
        // SAFETY: sched_getattr(pid 0, a writable sched_attr, its size, flags 0) writes at
        // most `size` bytes into `now`, which outlives the call.
        #[allow(unsafe_code)]
        let rc = unsafe {
            syscall(SYS_SCHED_GETATTR, 0i32, &mut now as *mut SchedAttr, std::mem::size_of::<SchedAttr>() as u32, 0u32)
        };
        rc == 0 && now.runtime == attr.runtime.clamp(100_000, 100_000_000)
    }
    #[cfg(not(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64"))))]
    {
        let _ = slice;
        false
    }
}

/// [`request_short_slice`] for the slice in µs the environment variable `var` gives, or
/// `default_us` when it is unset or not a number; 0 asks for nothing (the kernel's slice).
/// The knob for A/B runs of a thread's slice. Returns whether a slice was taken.
pub fn request_slice_from_env(var: &str, default_us: u64) -> bool {
    let us = crate::env_number(var, default_us);
    us > 0 && request_short_slice(std::time::Duration::from_micros(us))
}

/// Bits in the affinity masks passed to the kernel: glibc's `cpu_set_t` (1,024 CPUs).
const MASK_BYTES: usize = 128;

/// The CPUs the calling thread may run on (its affinity mask), ascending; `None` where the
/// mask cannot be read (not Linux, or more than 1,024 CPUs).
pub fn allowed_cpus() -> Option<Vec<usize>> {
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn sched_getaffinity(pid: i32, size: usize, mask: *mut u8) -> i32;
        }
        let mut mask = [0u8; MASK_BYTES];
        // SAFETY: sched_getaffinity(pid 0 = the calling thread) writes at most `size` bytes
        // into `mask`, which is that long and outlives the call.
        #[allow(unsafe_code)]
        let rc = unsafe { sched_getaffinity(0, MASK_BYTES, mask.as_mut_ptr()) };
        if rc != 0 {
            return None;
        }
        let cpus: Vec<usize> = (0..MASK_BYTES * 8).filter(|&c| mask[c / 8] & (1 << (c % 8)) != 0).collect();
        (!cpus.is_empty()).then_some(cpus)
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

/// Lets the calling thread run on `cpus` (and no others). Returns whether the kernel took it.
pub fn set_current_thread_cpus(cpus: &[usize]) -> bool {
    #[cfg(target_os = "linux")]
    {
        extern "C" {
            fn sched_setaffinity(pid: i32, size: usize, mask: *const u8) -> i32;
        }
        let mut mask = [0u8; MASK_BYTES];
        for &cpu in cpus {
            if cpu >= MASK_BYTES * 8 {
                return false;
            }
            mask[cpu / 8] |= 1 << (cpu % 8);
        }
        // SAFETY: sched_setaffinity(pid 0 = the calling thread) reads `size` bytes of `mask`,
        // which is that long and outlives the call.
        #[allow(unsafe_code)]
        let rc = unsafe { sched_setaffinity(0, MASK_BYTES, mask.as_ptr()) };
        rc == 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpus;
        false
    }
}

/// One CPU each for the statement runtime's worker threads, when there are as many workers
/// as CPUs the process may use.
///
/// Left to itself, Linux put both of a 2-CPU box's runtime workers on one CPU for most of
/// a TPC-C run: a wake-up from a socket write or a futex places the woken thread on the
/// waker's CPU when that CPU runs nothing else (the waker is expected to sleep next, as a
/// thread per connection does after its reply), and on a busy box it does not look for an
/// idle CPU. A runtime worker does not sleep after a reply — it runs the next connection's
/// task — so the two workers and the client's threads queued on one CPU while the other
/// idled: 43% of one CPU idle while the other had runnable threads waiting (session 77,
/// `perf sched`). Pinned one to a CPU, the box's idle share fell from 15% to 6-7%.
pub struct WorkerPins {
    cpus: Vec<usize>,
    next: std::sync::atomic::AtomicUsize,
}

thread_local! {
    static PINNED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl WorkerPins {
    /// Pins for `workers` threads over the CPUs the calling thread may use, or `None` when
    /// their numbers differ (a CPU quota smaller than the mask, or a worker count set by
    /// hand: the kernel then places the threads) or there is only one.
    pub fn new(workers: usize) -> Option<WorkerPins> {
        let cpus = allowed_cpus()?;
        (workers > 1 && cpus.len() == workers)
            .then(|| WorkerPins { cpus, next: std::sync::atomic::AtomicUsize::new(0) })
    }

    /// The CPUs the workers are pinned to, in the order they are handed out.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Lets the calling thread run on every CPU the workers share out. A thread inherits
    /// the affinity of the thread that starts it, and the runtime starts its blocking
    /// pool's threads from whichever worker asks for one: each is widened back when it
    /// starts (a pinned worker then pins itself again when it first parks).
    pub fn unpin(&self) -> bool {
        set_current_thread_cpus(&self.cpus)
    }

    /// Pins the calling thread to the next CPU not yet handed out, the first time it
    /// calls (later calls do nothing); threads past the last CPU stay unpinned. Returns
    /// the CPU pinned to by this call.
    pub fn pin_once(&self) -> Option<usize> {
        if PINNED.with(|p| p.replace(true)) {
            return None;
        }
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let cpu = *self.cpus.get(i)?;
        set_current_thread_cpus(&[cpu]).then_some(cpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The calling thread's slice in ns as /proc shows it (Linux 6.6+), if it does.
    fn slice_ns() -> Option<u64> {
        let sched = std::fs::read_to_string("/proc/thread-self/sched").ok()?;
        let line = sched.lines().find(|l| l.starts_with("se.slice"))?;
        line.split(':').nth(1)?.trim().parse().ok()
    }

    #[test]
    fn the_slice_asked_for_is_the_threads() {
        let (took, before, after) = std::thread::spawn(|| {
            let before = slice_ns();
            let took = request_short_slice(std::time::Duration::from_micros(200));
            (took, before, slice_ns())
        })
        .join()
        .expect("thread ran");
        if took {
            assert_eq!(after, Some(200_000), "the kernel took the slice (was {before:?})");
        } else {
            assert_eq!(after, before, "a refused or ignored request changes nothing");
        }
    }

    #[test]
    fn workers_are_pinned_one_to_a_cpu_once_each() {
        let Some(cpus) = allowed_cpus() else { return };
        assert!(cpus.windows(2).all(|w| w[0] < w[1]), "ascending: {cpus:?}");
        assert!(WorkerPins::new(cpus.len() + 1).is_none(), "more workers than CPUs: the kernel places them");
        assert!(WorkerPins::new(1).is_none());
        if cpus.len() < 2 {
            return;
        }
        let pins = std::sync::Arc::new(WorkerPins::new(cpus.len()).expect("one worker per CPU"));
        let mut got: Vec<Option<usize>> = (0..cpus.len() + 1)
            .map(|_| {
                let pins = pins.clone();
                std::thread::spawn(move || {
                    let first = pins.pin_once();
                    assert_eq!(pins.pin_once(), None, "a second call does nothing");
                    let now = allowed_cpus().expect("readable");
                    match first {
                        Some(cpu) => assert_eq!(now, vec![cpu], "the thread runs only there"),
                        None => assert!(now.len() > 1, "past the last CPU the thread stays unpinned"),
                    }
                    first
                })
                .join()
                .expect("thread ran")
            })
            .collect();
        assert_eq!(got.pop(), Some(None), "one thread more than CPUs");
        assert_eq!(got.into_iter().map(|c| c.expect("pinned")).collect::<Vec<_>>(), cpus);
        // A thread started by a pinned one inherits its CPU until it is widened.
        let widened = std::thread::spawn(move || {
            let pinned = WorkerPins::new(cpus.len()).expect("one worker per CPU");
            assert!(pinned.pin_once().is_some());
            std::thread::spawn(move || {
                let inherited = allowed_cpus().expect("readable");
                assert!(pinned.unpin());
                (inherited, allowed_cpus().expect("readable"), pinned.cpus().to_vec())
            })
            .join()
            .expect("thread ran")
        })
        .join()
        .expect("thread ran");
        assert_eq!(widened.0.len(), 1, "started by a pinned thread: {widened:?}");
        assert_eq!(widened.1, widened.2, "widened to every CPU");
    }

    #[test]
    fn zero_from_the_environment_asks_for_nothing() {
        let (took, before, after) = std::thread::spawn(|| {
            let before = slice_ns();
            // Unset here, so the default: 0.
            let took = request_slice_from_env("STRATA_TEST_UNSET_SLICE_US", 0);
            (took, before, slice_ns())
        })
        .join()
        .expect("thread ran");
        assert!(!took);
        assert_eq!(after, before);
    }
}
