//! A kernel restarted on purpose, reattached after Jupyter restarted it by itself, or replaced
//! by a new one: whichever way, the caller ends with a kernel that answers, and a restart of
//! Jupyter's is never taken for a new loss.

use std::sync::Arc;

use crate::kernel::{GoneReason, Kernel, KernelError, Liveness};
use crate::rest::RestError;
use crate::{Jupyter, RESTART_READY};

/// How many fresh connections a kernel Jupyter restarted by itself gets before it is given up
/// on for a new one: a connection made while the restart is under way may miss its answer.
const REATTACH_TRIES: usize = 2;

impl Jupyter {
    /// Restarts a kernel on purpose: its state is cleared and the restart is not taken for a
    /// loss. A kernel already gone is reconnected after the restart (or replaced if it no longer
    /// exists), so the caller always ends with a working kernel.
    pub async fn restart_kernel(&self, kernel: &Arc<Kernel>) -> Result<Arc<Kernel>, KernelError> {
        let id = kernel.id().to_owned();
        if kernel.liveness() == Liveness::Alive {
            kernel.connection().expect_restart(true);
            match self.rest.restart_kernel(&id).await {
                Ok(_) => {
                    kernel.wait_ready(RESTART_READY).await;
                    self.lifecycle("restarted", &id, &kernel.label()).await;
                    return Ok(kernel.clone());
                }
                Err(RestError::NotFound { .. }) => {}
                Err(e) => {
                    kernel.connection().expect_restart(false);
                    return Err(e.into());
                }
            }
        }
        // Our connection saw the kernel go: start over with a fresh connection, or a fresh
        // kernel when it no longer exists (restarting a deleted kernel is a 500, not a 404).
        self.kernels.lock().await.remove(&id);
        match self.rest.get_kernel(&id).await {
            Ok(_) => {
                // Its state is gone already, and Jupyter restarts a kernel whose process died by
                // itself: that restart is the one asked for (a second request while Jupyter's
                // restarter is at work fails with HTTP 500).
                if let Some(fresh) = self.reattach(&id, &kernel.label()).await? {
                    self.lifecycle("restarted", &id, &fresh.label()).await;
                    return Ok(fresh);
                }
                // Connect first, so the restart's own status messages are known to be ours.
                let fresh = self.kernel(&id).await?;
                fresh.set_label(&kernel.label());
                fresh.connection().expect_restart(true);
                let restarted = self.rest.restart_kernel(&id).await;
                if restarted.is_ok() && fresh.wait_ready(RESTART_READY).await {
                    self.lifecycle("restarted", &id, &fresh.label()).await;
                    return Ok(fresh);
                }
                // It cannot be restarted: a new kernel takes its place.
                tracing::warn!(kernel = %id, "the lost kernel could not be restarted; starting a new one");
                self.replace_with_new(kernel).await
            }
            Err(RestError::NotFound { .. }) => {
                self.started.lock().expect("started lock").remove(&id);
                self.start_replacement(&id, &kernel.label()).await
            }
            Err(e) => Err(e.into()),
        }
    }

    /// A working kernel in place of a lost one: the same kernel reattached when Jupyter already
    /// restarted it under its id (its state is gone either way), else a new kernel of ours.
    pub async fn replace_lost_kernel(
        &self,
        lost: &Arc<Kernel>,
    ) -> Result<Arc<Kernel>, KernelError> {
        let id = lost.id().to_owned();
        self.kernels.lock().await.remove(&id);
        let still_there = matches!(lost.liveness(), Liveness::Gone(GoneReason::Restarted))
            && self.rest.get_kernel(&id).await.is_ok();
        if still_there {
            // Jupyter may still be at it: a connection made mid-restart is tried again.
            for _ in 0..REATTACH_TRIES {
                if let Some(kernel) = self.reattach(&id, &lost.label()).await? {
                    self.lifecycle("restarted", &id, &lost.label()).await;
                    return Ok(kernel);
                }
            }
            tracing::warn!(
                kernel = %id,
                "the kernel Jupyter restarted did not answer; starting a new one in its place"
            );
        }
        self.replace_with_new(lost).await
    }

    /// A new kernel in place of a lost one, which is shut down first when it is ours (Jupyter
    /// may still be restarting it).
    async fn replace_with_new(&self, lost: &Arc<Kernel>) -> Result<Arc<Kernel>, KernelError> {
        let id = lost.id().to_owned();
        self.kernels.lock().await.remove(&id);
        self.stop_kernel(&id).await;
        self.start_replacement(&id, &lost.label()).await
    }

    /// A fresh connection to kernel `id`, which Jupyter is restarting or just restarted after
    /// its process died, once it answers: the restart's own statuses are not taken for a new
    /// one. `None` when it does not answer within `RESTART_READY` or is lost meanwhile.
    async fn reattach(&self, id: &str, label: &str) -> Result<Option<Arc<Kernel>>, KernelError> {
        let kernel = self.connect(id, true).await?;
        kernel.set_label(label);
        // Jupyter's own connections to the new process are still settling when it first
        // answers (outputs published then can be lost): it must answer twice, a moment apart.
        let ready = kernel.wait_ready(RESTART_READY).await && {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            kernel.wait_ready(RESTART_READY).await
        };
        // From here on a restart is news again.
        kernel.connection().expect_restart(false);
        if !ready || kernel.liveness() != Liveness::Alive {
            return Ok(None);
        }
        self.kernels
            .lock()
            .await
            .insert(id.to_owned(), kernel.clone());
        Ok(Some(kernel))
    }

    /// A new kernel in place of `lost_id`, of the same kernelspec when we started it from one.
    async fn start_replacement(
        &self,
        lost_id: &str,
        label: &str,
    ) -> Result<Arc<Kernel>, KernelError> {
        let spec = self.specs.lock().expect("specs lock").remove(lost_id);
        self.start_kernel_of(spec.as_deref(), label).await
    }
}
