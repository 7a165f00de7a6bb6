//! A notebook's kernel restarted, replaced by one of another kernelspec, or let go with the
//! notebook (unuse_notebook, and every notebook at exit).

use std::sync::Arc;

use super::open::{Attached, attach_session, start_kernel};
use super::{NotebookInUse, Released};
use crate::domain::kernelspecs::ChosenSpec;
use crate::domain::{Domain, Error};
use notebook_format::edit::Edit;

/// A notebook moved to a new kernel of another kernelspec.
pub struct Switched {
    /// The notebook as it is in use now, on the new kernel.
    pub notebook: Arc<NotebookInUse>,
    pub kernel_id: String,
    pub spec: ChosenSpec,
    /// What became of the kernel it had.
    pub released: Released,
    pub attached: Attached,
}

/// A notebook let go of.
pub struct Unused {
    pub released: Released,
    /// `Some(new)` when it was current: the notebook current now, if any is left.
    pub switched: Option<Option<String>>,
    /// Why its last edits could not be confirmed on disk, when they could not.
    pub not_saved: Option<String>,
}

impl Domain {
    /// Restarts the notebook's kernel: its state is cleared, a lost kernel comes back.
    pub async fn restart_notebook(&self, in_use: &NotebookInUse) -> Result<(), Error> {
        let Some(current) = in_use.kernel() else {
            // Nothing to restart yet: a fresh kernel is what a restart would give.
            self.attach_deferred_kernel(in_use, None).await?;
            return Ok(());
        };
        let kernel = self.jupyter().restart_kernel(&current).await.map_err(|e| {
            Error::Failed(format!("Failed to restart notebook '{}': {e}", in_use.name).into())
        })?;
        self.kernel_endings.forget(current.id());
        in_use.replace_kernel(kernel);
        Ok(())
    }

    /// Moves a notebook to a new kernel of another kernelspec: the new kernel is started first,
    /// then the old one released as unuse_notebook would, and the notebook's metadata updated.
    pub async fn switch_kernelspec(
        &self,
        in_use: &Arc<NotebookInUse>,
        kernel_name: &str,
    ) -> Result<Switched, Error> {
        let spec = self.kernelspec(kernel_name).await?;
        let jupyter = self.jupyter();
        let name = &in_use.name;
        let kernel = start_kernel(&jupyter, Some(&spec), name)
            .await
            .map_err(|e| {
                Error::Failed(format!("Failed to restart notebook '{name}': {e}").into())
            })?;
        let released = in_use.release(&jupyter).await;
        let existing = jupyter
            .rest()
            .list_sessions()
            .await
            .unwrap_or_default()
            .into_iter()
            .find(|s| s.path == in_use.path);
        let (origin, attached) = attach_session(&jupyter, &in_use.path, &kernel, existing).await?;
        let moved = Arc::new(NotebookInUse::new(
            name.clone(),
            in_use.path.clone(),
            in_use.document.clone(),
            Some((kernel.clone(), origin)),
            self.notebooks.change_sender(),
        ));
        let current = self.notebooks.current_name();
        self.notebooks.insert(moved.clone());
        if let Some(current) = current {
            self.notebooks.make_current(&current);
        }
        moved
            .apply(vec![Edit::SetNotebookMetadata {
                key: "kernelspec".into(),
                value: spec.metadata(),
            }])
            .await
            .map_err(Error::failed)?;
        Ok(Switched {
            notebook: moved,
            kernel_id: kernel.id().to_owned(),
            spec,
            released,
            attached,
        })
    }

    /// Lets go of a notebook: its name released, its document closed, and the kernel we
    /// started for it stopped unless someone else uses it.
    pub async fn unuse_notebook(&self, name: &str) -> Result<Unused, Error> {
        let Some((in_use, switched)) = self.notebooks.remove(name) else {
            // The lookup's own error keeps its next steps typed, for the face to word.
            return Err(self
                .notebooks
                .resolve(Some(name))
                .err()
                .expect("not registered")
                .into());
        };
        let not_saved = match in_use.document.close().await {
            Ok(()) => None,
            Err(e) => {
                tracing::warn!("closing '{}' failed: {e}", in_use.path);
                Some(e.to_string())
            }
        };
        let released = in_use.release(&self.jupyter()).await;
        Ok(Unused {
            released,
            switched,
            not_saved,
        })
    }

    /// At exit: leaves collaboration rooms first, so edits still queued reach them; then
    /// releases the notebooks' kernels as unuse_notebook would (a shared one keeps running) and
    /// stops the kernels we started.
    pub async fn release_all(&self) {
        let jupyter = self.jupyter();
        // Every notebook at once: saved (each document's own close) and its kernel released.
        let releases = self.notebooks.all().into_iter().map(|notebook| {
            let jupyter = &jupyter;
            async move {
                if let Err(e) = notebook.document.close().await {
                    tracing::warn!("closing '{}' failed: {e}", notebook.path);
                }
                if let Released::Shared(id) = notebook.release(jupyter).await {
                    tracing::info!(kernel = %id, "leaving the kernel of '{}' running: it is shared", notebook.path);
                }
            }
        });
        futures_util::future::join_all(releases).await;
        jupyter.shutdown().await;
    }
}
