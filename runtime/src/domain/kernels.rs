//! Kernel readiness: the one place that decides what happens when a notebook's kernel is gone.
//! A lost kernel is refused with the same message for every caller, or replaced when
//! `kernel.auto-restart` is on, and then the caller is handed a note saying so.

use std::sync::Arc;

use super::notebooks::NotebookInUse;
use super::{Domain, Error};
use crate::capabilities::AUTO_RESTART;
use crate::jupyter::kernel::Kernel;
/// Whether a kernel is alive, or gone and why (for callers that show it).
pub use crate::jupyter::kernel::Liveness;

/// The error every caller gets for a notebook whose kernel state was lost.
pub fn kernel_gone_message(notebook_name: &str) -> String {
    format!(
        "The kernel of '{notebook_name}' is gone, and its session — every variable, import and \
         definition — went with it. Call restart_notebook to start a fresh one, or enable the \
         'kernel.auto-restart' capability to have replacements started automatically."
    )
}

/// A kernel ready to run code, and the note to show when it replaced a lost one.
pub struct ReadyKernel {
    pub kernel: Arc<Kernel>,
    pub replaced: Option<String>,
}

impl Domain {
    /// The notebook's kernel, ready to run code. A lost kernel is refused, or replaced when
    /// `kernel.auto-restart` is on — and then the note says so.
    pub async fn ready_kernel(&self, in_use: &NotebookInUse) -> Result<ReadyKernel, Error> {
        let kernel = in_use.kernel();
        let Liveness::Gone(reason) = kernel.liveness() else {
            return Ok(ReadyKernel {
                kernel,
                replaced: None,
            });
        };
        if !self.capabilities.enabled(AUTO_RESTART) {
            return Err(Error::Kernel(kernel_gone_message(&in_use.name)));
        }
        let fresh = self
            .jupyter()
            .replace_lost_kernel(&kernel)
            .await
            .map_err(|e| {
                Error::Failed(format!(
                    "The kernel of '{}' is gone and no replacement could be started: {e}",
                    in_use.name
                ))
            })?;
        in_use.replace_kernel(fresh.clone());
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
