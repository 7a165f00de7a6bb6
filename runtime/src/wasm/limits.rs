//! A guest's limits: the memory cap of its store and the CPU time of the call in progress.

use std::time::{Duration, Instant};

use wasmtime::{ResourceLimiter, StoreLimits, StoreLimitsBuilder};

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

/// CPU time of the call in progress. The epoch ticker only wakes the check; time spent in host
/// functions (waiting on a kernel, say) is not the guest's and is subtracted.
#[derive(Debug)]
pub struct CallClock {
    pub limit: Duration,
    started: Instant,
    in_host: Duration,
    pub exceeded: bool,
}

impl CallClock {
    pub fn new(limit: Duration) -> Self {
        CallClock {
            limit,
            started: Instant::now(),
            in_host: Duration::ZERO,
            exceeded: false,
        }
    }

    pub fn start(&mut self) {
        self.started = Instant::now();
        self.in_host = Duration::ZERO;
        self.exceeded = false;
    }

    /// Checked at each epoch tick: `true` when the guest has used up its time.
    pub fn expired(&mut self) -> bool {
        let used = self.started.elapsed().saturating_sub(self.in_host);
        self.exceeded = used >= self.limit;
        self.exceeded
    }

    /// Runs a host function off the guest's clock.
    pub fn off_the_clock<R>(&mut self, f: impl FnOnce() -> R) -> R {
        let started = Instant::now();
        let result = f();
        self.in_host += started.elapsed();
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_in_host_functions_is_not_the_guests() {
        let mut clock = CallClock::new(Duration::from_millis(30));
        clock.start();
        // 60 ms waiting on the host (a kernel, say) leaves the guest's 30 ms untouched.
        clock.off_the_clock(|| std::thread::sleep(Duration::from_millis(60)));
        assert!(!clock.expired());
        std::thread::sleep(Duration::from_millis(40));
        assert!(clock.expired() && clock.exceeded);
        clock.start();
        assert!(
            !clock.expired() && !clock.exceeded,
            "each call starts afresh"
        );
    }
}
