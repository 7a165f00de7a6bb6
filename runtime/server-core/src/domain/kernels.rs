//! Kernel readiness: the one place that decides what happens when a notebook's kernel is gone.
//! A lost kernel is refused with the same message for every caller, or replaced when
//! `kernel.auto-restart` is on, and then the caller is handed a note saying so.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use super::notebooks::NotebookInUse;
use super::{Domain, Error, Message, Step};
use crate::capabilities::AUTO_RESTART;
use crate::say;
/// Whether a kernel is alive, or gone and why (for callers that show it).
pub use jupyter_client::kernel::Liveness;
use jupyter_client::kernel::{Kernel, Progress, ProgressSink};

/// Why kernels ended, where something outside the kernel's connection said: a sandboxed
/// kernel's launcher tells of a kernel killed at its memory cap. Kept until the kernel is
/// replaced or restarted, so each report in between names it.
#[derive(Debug, Default)]
pub struct KernelEndings(std::sync::Mutex<std::collections::HashMap<String, String>>);

impl KernelEndings {
    pub fn stopped_at_memory_cap(&self, kernel_id: &str, megabytes: u64) {
        self.0.lock().expect("endings lock").insert(
            kernel_id.to_owned(),
            format!(
                "was stopped at its memory cap of {megabytes} MB; raise kernel_sandbox.memory_mb \
                 or use less"
            ),
        );
    }

    /// How kernel `kernel_id` ended, in words that follow "the kernel", when known.
    pub fn of(&self, kernel_id: &str) -> Option<String> {
        self.0.lock().expect("endings lock").get(kernel_id).cloned()
    }

    /// `reason` (the connection's words) unless something better is known.
    pub fn or(&self, kernel_id: &str, reason: impl std::fmt::Display) -> String {
        self.of(kernel_id).unwrap_or_else(|| reason.to_string())
    }

    /// Forgotten once the kernel came back or was replaced.
    pub fn forget(&self, kernel_id: &str) -> Option<String> {
        self.0.lock().expect("endings lock").remove(kernel_id)
    }
}

/// The error every caller gets for a notebook whose kernel state was lost; `auto_restart`:
/// whether `kernel.auto-restart` is on (then the next call replaces it by itself); `ended`:
/// how it ended, when known ([`KernelEndings`]).
pub fn kernel_gone_message(
    notebook_name: &str,
    auto_restart: bool,
    ended: Option<String>,
) -> Message {
    let then = if auto_restart {
        " to start a fresh one now; kernel.auto-restart is on, so the next call that runs code \
         starts a replacement by itself."
    } else {
        " to start a fresh one, or enable the 'kernel.auto-restart' capability to have \
         replacements started automatically."
    };
    let how = ended.unwrap_or_else(|| "is gone".to_owned());
    say![
        format!(
            "The kernel of '{notebook_name}' {how}, and its session — every variable, import \
             and definition — went with it. Call "
        ),
        Step::RestartNotebook,
        then
    ]
}

/// A kernel ready to run code, and the note to show when it replaced a lost one.
pub struct ReadyKernel {
    pub kernel: Arc<Kernel>,
    pub replaced: Option<String>,
}

/// Awaits `starting` (a kernel being started or replaced), telling `progress` at each of its
/// intervals that the kernel is awaited: a gateway on a cluster answers a start request only once
/// the kernel's pod is scheduled and its image pulled, which takes tens of seconds. The wait is
/// bounded by `--kernel-start-timeout` where the start request is made.
pub(super) async fn reporting_start<T>(
    progress: Option<&(Duration, ProgressSink)>,
    start_timeout: Duration,
    starting: impl Future<Output = T>,
) -> T {
    let Some((every, sink)) = progress else {
        return starting.await;
    };
    let started = tokio::time::Instant::now();
    let every = (*every).max(Duration::from_millis(100));
    let mut ticker = tokio::time::interval_at(started + every, every);
    tokio::pin!(starting);
    loop {
        tokio::select! {
            done = &mut starting => return done,
            _ = ticker.tick() => sink(Progress {
                elapsed: started.elapsed(),
                timeout: start_timeout,
                output_count: 0,
                starting: true,
            }),
        }
    }
}

impl Domain {
    /// The notebook's kernel, ready to run code. A lost kernel is refused, or replaced when
    /// `kernel.auto-restart` is on — and then the note says so.
    /// A replacement's start is reported to `progress`.
    pub async fn ready_kernel(
        &self,
        in_use: &NotebookInUse,
        progress: Option<&(Duration, ProgressSink)>,
    ) -> Result<ReadyKernel, Error> {
        let Some(kernel) = in_use.kernel() else {
            let kernel = self.attach_deferred_kernel(in_use, progress).await?;
            return Ok(ReadyKernel {
                kernel,
                replaced: None,
            });
        };
        let Liveness::Gone(reason) = kernel.liveness() else {
            return Ok(ReadyKernel {
                kernel,
                replaced: None,
            });
        };
        if !self.capabilities.enabled(AUTO_RESTART) {
            let ended = self.kernel_endings.of(kernel.id());
            return Err(Error::Kernel(kernel_gone_message(
                &in_use.name,
                false,
                ended,
            )));
        }
        let jupyter = self.jupyter();
        let start_timeout = self.settings.kernel_start.timeout;
        let replacing = jupyter.replace_lost_kernel(&kernel);
        let fresh = reporting_start(progress, start_timeout, replacing)
            .await
            .map_err(|e| {
                Error::Failed(
                    format!(
                        "The kernel of '{}' is gone and no replacement could be started: {e}",
                        in_use.name
                    )
                    .into(),
                )
            })?;
        in_use.replace_kernel(fresh.clone());
        let reason = self
            .kernel_endings
            .forget(kernel.id())
            .unwrap_or_else(|| reason.to_string());
        let note = format!(
            "[KERNEL REPLACED: the kernel of '{}' {reason}; a new, empty kernel ('{}') replaced it \
             (kernel.auto-restart is on), so every earlier variable, import and definition is gone.]",
            in_use.name,
            fresh.id()
        );
        Ok(ReadyKernel {
            kernel: fresh,
            replaced: Some(note),
        })
    }
}
