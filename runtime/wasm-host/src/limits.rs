//! A guest's limits: the memory cap of its store, and the CPU time and wall-clock deadline of
//! the call in progress.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

use server_core::extensions::GuestLimits;

/// `StoreLimits` with an error that says which limit was hit.
pub struct MemoryCap {
    inner: StoreLimits,
    mb: u64,
}

impl MemoryCap {
    pub fn new(mb: u64) -> Self {
        let bytes = usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        MemoryCap {
            inner: StoreLimitsBuilder::new()
                .memory_size(bytes)
                .trap_on_grow_failure(true)
                .build(),
            mb,
        }
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        match self.inner.memory_growing(current, desired, maximum) {
            Ok(true) => Ok(true),
            _ => Err(wasmtime::format_err!(
                "{}: the guest asked for {} MiB",
                memory_limit_message(self.mb),
                desired >> 20
            )),
        }
    }

    fn table_growing(
        &mut self,
        current: usize,
        desired: usize,
        maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        self.inner.table_growing(current, desired, maximum)
    }
}

pub fn memory_limit_message(mb: u64) -> String {
    format!("reached its memory limit of {mb} MiB (limits.memory_mb)")
}

/// The kinds of call into a guest, each with its own default wall-clock bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallKind {
    /// What the host asks while loading: identity, capabilities, tools, propagate-errors, and
    /// the instance's own start-up.
    Load,
    /// A hook event: on the path of every tool call, so short.
    Hook,
    /// An extension's tool: may run code on a kernel, so as long as an execution's default.
    Tool,
}

impl CallKind {
    /// The wall-clock bound of one call: the operator's `wall_ms_per_call` when set.
    pub fn wall_limit(self, limits: &GuestLimits) -> Duration {
        if let Some(ms) = limits.wall_ms_per_call {
            return Duration::from_millis(ms);
        }
        Duration::from_secs(match self {
            CallKind::Load => 10,
            CallKind::Hook => 2,
            CallKind::Tool => 120,
        })
    }
}

/// Why a call was stopped from outside the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stopped {
    /// It used up its CPU time.
    Cpu,
    /// Its wall-clock deadline passed (running, or parked in a wait).
    Wall,
    /// The guest was switched off, or the server is shutting down.
    Shutdown,
    /// The operator revoked a directory the call had mounted.
    Revoked,
}

impl Stopped {
    pub fn describe_short(self) -> &'static str {
        match self {
            Stopped::Cpu => "the call used up its CPU time",
            Stopped::Wall => "the call's wall-clock deadline passed",
            Stopped::Shutdown => "the guest was switched off or the server is shutting down",
            Stopped::Revoked => "the operator revoked a directory the call was using",
        }
    }
}

/// The clocks of the call in progress: CPU time (the epoch ticker only wakes the check; time
/// spent in host functions or WASI waits is not the guest's and is subtracted) and the
/// wall-clock deadline, which counts everything.
#[derive(Debug)]
pub struct CallClock {
    pub limit: Duration,
    started: Instant,
    in_host: Duration,
    /// When the call must be over.
    pub deadline: Instant,
    /// The wall-clock bound the deadline was set from (for messages).
    pub wall_limit: Duration,
    pub stopped: Option<Stopped>,
}

impl CallClock {
    pub fn new(limit: Duration) -> Self {
        CallClock {
            limit,
            started: Instant::now(),
            in_host: Duration::ZERO,
            deadline: Instant::now() + limit,
            wall_limit: limit,
            stopped: None,
        }
    }

    pub fn start(&mut self, deadline: Instant, wall_limit: Duration) {
        self.started = Instant::now();
        self.in_host = Duration::ZERO;
        self.deadline = deadline;
        self.wall_limit = wall_limit;
        self.stopped = None;
    }

    /// Checked at each epoch tick: whether the call must stop, and why.
    pub fn expired(&mut self) -> Option<Stopped> {
        if self.stopped.is_none() {
            let now = Instant::now();
            let used = now
                .saturating_duration_since(self.started)
                .saturating_sub(self.in_host);
            if used >= self.limit {
                self.stopped = Some(Stopped::Cpu);
            } else if now >= self.deadline {
                self.stopped = Some(Stopped::Wall);
            }
        }
        self.stopped
    }

    /// Runs a host function (or a WASI wait) off the guest's CPU clock.
    pub fn off_the_clock<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let started = Instant::now();
        let result = f();
        self.in_host += started.elapsed();
        result
    }
}

/// Lines a guest may log per second (all its instances together); the rest are counted.
pub const LINES_PER_SECOND: u32 = 50;

/// How many lines one guest has logged in the current second, shared by its instances.
#[derive(Debug)]
pub struct LogBudget {
    window: Mutex<(Instant, u32, u64)>,
}

impl Default for LogBudget {
    fn default() -> Self {
        LogBudget {
            window: Mutex::new((Instant::now(), 0, 0)),
        }
    }
}

impl LogBudget {
    /// Whether one more line may be logged now; when a new second starts, the number of lines
    /// dropped in the last one is returned too.
    pub fn take(&self) -> (bool, u64) {
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let (started, used, dropped) = &mut *window;
        let mut reported = 0;
        if started.elapsed() >= Duration::from_secs(1) {
            *started = Instant::now();
            *used = 0;
            reported = std::mem::take(dropped);
        }
        if *used < LINES_PER_SECOND {
            *used += 1;
            (true, reported)
        } else {
            *dropped += 1;
            (false, reported)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_in_host_functions_is_not_the_guests_but_the_wall_clock_counts_it() {
        let mut clock = CallClock::new(Duration::from_millis(30));
        let far = Instant::now() + Duration::from_secs(60);
        clock.start(far, Duration::from_secs(60));
        // 60 ms waiting on the host (a kernel, say) leaves the guest's 30 ms untouched.
        clock.off_the_clock(|| std::thread::sleep(Duration::from_millis(60)));
        assert_eq!(clock.expired(), None);
        std::thread::sleep(Duration::from_millis(40));
        assert_eq!(clock.expired(), Some(Stopped::Cpu));
        clock.start(far, Duration::from_secs(60));
        assert_eq!(clock.expired(), None, "each call starts afresh");
        // Waiting counts on the wall clock.
        clock.start(
            Instant::now() + Duration::from_millis(20),
            Duration::from_millis(20),
        );
        clock.off_the_clock(|| std::thread::sleep(Duration::from_millis(25)));
        assert_eq!(clock.expired(), Some(Stopped::Wall));
    }

    #[test]
    fn the_operators_wall_limit_bounds_every_kind_of_call() {
        let mut limits = GuestLimits::default();
        assert_eq!(CallKind::Hook.wall_limit(&limits), Duration::from_secs(2));
        assert_eq!(CallKind::Tool.wall_limit(&limits), Duration::from_secs(120));
        limits.wall_ms_per_call = Some(300_000);
        for kind in [CallKind::Load, CallKind::Hook, CallKind::Tool] {
            assert_eq!(kind.wall_limit(&limits), Duration::from_secs(300));
        }
    }
}
