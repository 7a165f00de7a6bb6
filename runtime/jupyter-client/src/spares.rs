//! Spare kernels for `kernel.prewarm`: a started, idle kernel kept ready per kernelspec, so a
//! new notebook (or the default kernel of `execute_code`) does not wait for one to start.
//!
//! A spare is never used before it is handed out and never taken back afterwards, so it carries
//! no one's state. It is checked alive (our connection and Jupyter's own record) before it is
//! handed out; one that died, was culled by Jupyter or sat idle too long is stopped and started
//! afresh. Spares are kernels we started: `list_kernels` marks them, and they are stopped at exit
//! like every kernel of ours.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::{Notify, watch};

use super::kernel::Kernel;

/// How long a kernelspec counts as recently asked for (the default one always does).
const RECENT: Duration = Duration::from_secs(3600);

/// How many spares to keep and for how long, from the config file (`prewarm_max`,
/// `prewarm_max_idle_seconds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SparePolicy {
    /// Spares kept per kernelspec.
    pub per_spec: usize,
    /// A spare idle longer than this is stopped and started again.
    pub max_idle: Duration,
}

impl Default for SparePolicy {
    fn default() -> Self {
        SparePolicy {
            per_spec: 1,
            max_idle: Duration::from_secs(3600),
        }
    }
}

/// A kernelspec name; `None` is the server's default kernelspec.
pub type SpecKey = Option<String>;

pub(super) struct Spare {
    pub kernel: Arc<Kernel>,
    pub since: Instant,
}

/// The spares of one Jupyter Server and the kernelspecs they are kept for.
pub(super) struct Spares {
    pub policy: SparePolicy,
    ready: std::sync::Mutex<HashMap<SpecKey, Vec<Spare>>>,
    asked: std::sync::Mutex<HashMap<SpecKey, Instant>>,
    /// Wakes the keeper after a spare was taken.
    pub wake: Notify,
    closed: AtomicBool,
    /// How many `SpareHold`s are alive: while any is, no new spare is started.
    holds: watch::Sender<usize>,
}

/// Keeps new spares from being started while alive: the call that just took a spare gets its
/// own requests answered first, instead of queueing on the Jupyter Server behind the launch of
/// the next kernel (a process start that also takes a core for a second).
pub struct SpareHold(Arc<Spares>);

impl Drop for SpareHold {
    fn drop(&mut self) {
        self.0.holds.send_modify(|n| *n -= 1);
    }
}

impl Spares {
    pub fn new(policy: SparePolicy) -> Self {
        Spares {
            policy,
            ready: Default::default(),
            asked: Default::default(),
            wake: Notify::new(),
            closed: AtomicBool::new(false),
            holds: watch::Sender::new(0),
        }
    }

    pub fn hold(self: &Arc<Self>) -> SpareHold {
        self.holds.send_modify(|n| *n += 1);
        SpareHold(self.clone())
    }

    /// Returns once no `SpareHold` is alive, or the spares were closed.
    pub async fn unheld(&self) {
        let mut holds = self.holds.subscribe();
        let _ = holds.wait_for(|n| *n == 0 || self.is_closed()).await;
    }

    /// Takes a spare of `spec`, noting that it is wanted; the keeper starts the next one.
    pub fn take(&self, spec: &SpecKey) -> Option<Spare> {
        self.asked
            .lock()
            .expect("spares lock")
            .insert(spec.clone(), Instant::now());
        let taken = self
            .ready
            .lock()
            .expect("spares lock")
            .get_mut(spec)
            .and_then(Vec::pop);
        self.wake.notify_one();
        taken
    }

    pub fn put(&self, spec: SpecKey, kernel: Arc<Kernel>) {
        self.ready
            .lock()
            .expect("spares lock")
            .entry(spec)
            .or_default()
            .push(Spare {
                kernel,
                since: Instant::now(),
            });
    }

    /// The kernelspecs to keep spares for: the default always, others while recently asked for.
    pub fn wanted(&self) -> Vec<SpecKey> {
        let mut asked = self.asked.lock().expect("spares lock");
        asked.retain(|spec, at| spec.is_none() || at.elapsed() < RECENT);
        let mut wanted: Vec<SpecKey> = asked.keys().cloned().collect();
        if !wanted.contains(&None) {
            wanted.push(None);
        }
        wanted
    }

    /// How many spares of `spec` are ready.
    pub fn count(&self, spec: &SpecKey) -> usize {
        self.ready
            .lock()
            .expect("spares lock")
            .get(spec)
            .map_or(0, Vec::len)
    }

    /// Removes and returns the spares `retire` picks (dead or idle too long), and those of
    /// kernelspecs no longer wanted.
    pub fn retire(&self, wanted: &[SpecKey], retire: impl Fn(&Spare) -> bool) -> Vec<Spare> {
        let mut ready = self.ready.lock().expect("spares lock");
        let mut retired = Vec::new();
        for (spec, spares) in ready.iter_mut() {
            let keep_spec = wanted.contains(spec);
            let (out, keep): (Vec<Spare>, Vec<Spare>) = std::mem::take(spares)
                .into_iter()
                .partition(|s| !keep_spec || retire(s));
            *spares = keep;
            retired.extend(out);
        }
        retired
    }

    pub fn ids(&self) -> Vec<String> {
        self.ready
            .lock()
            .expect("spares lock")
            .values()
            .flatten()
            .map(|s| s.kernel.id().to_owned())
            .collect()
    }

    /// Stops keeping spares; returns those ready, for the caller to shut down.
    pub fn close(&self) -> Vec<Spare> {
        self.closed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
        // Wakes a keeper waiting in `unheld`.
        self.holds.send_modify(|_| {});
        self.ready
            .lock()
            .expect("spares lock")
            .drain()
            .flat_map(|(_, spares)| spares)
            .collect()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_kernelspec_is_always_wanted_and_others_once_asked_for() {
        let spares = Spares::new(SparePolicy::default());
        assert_eq!(spares.wanted(), vec![None]);
        assert!(spares.take(&Some("julia".into())).is_none());
        let mut wanted = spares.wanted();
        wanted.sort();
        assert_eq!(wanted, vec![None, Some("julia".into())]);
    }

    #[tokio::test]
    async fn new_spares_wait_until_no_hold_is_left() {
        let spares = Arc::new(Spares::new(SparePolicy::default()));
        spares.unheld().await;
        let first = spares.hold();
        let second = spares.hold();
        let waiting = tokio::spawn({
            let spares = spares.clone();
            async move { spares.unheld().await }
        });
        drop(first);
        tokio::task::yield_now().await;
        assert!(!waiting.is_finished(), "one hold is still alive");
        drop(second);
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("released once the last hold is dropped")
            .unwrap();
        let _held = spares.hold();
        spares.close();
        tokio::time::timeout(Duration::from_secs(5), spares.unheld())
            .await
            .expect("closing releases the wait");
    }

    #[test]
    fn closing_stops_keeping_spares() {
        let spares = Spares::new(SparePolicy::default());
        assert!(!spares.is_closed());
        assert!(spares.close().is_empty());
        assert!(spares.is_closed());
        assert!(spares.ids().is_empty());
    }
}
