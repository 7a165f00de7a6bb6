//! The directories a sandboxed kernel uses, made before the launcher forks: its private
//! directory (`TMPDIR`, its Jupyter runtime directory, its copy of the connection file), the
//! sandbox's shared state, and what it may write and may not read.

use std::os::unix::fs::{DirBuilderExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use crate::SandboxError;
use crate::policy::Policy;

/// The directories a kernel of this sandbox uses, made before anything forks.
pub(crate) struct Layout {
    pub(crate) private: PathBuf,
    pub(crate) tmp: PathBuf,
    pub(crate) runtime: PathBuf,
    pub(crate) empty_file: PathBuf,
    /// Connection files' directory (Jupyter's runtime directory): other kernels' keys.
    pub(crate) jupyter_runtime: Option<PathBuf>,
}

impl Layout {
    pub(crate) fn create(policy: &Policy, private: &Path) -> Result<Self, SandboxError> {
        let dir = |path: &Path| -> Result<(), SandboxError> {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(path)
                .map_err(|e| SandboxError::Place {
                    path: path.to_owned(),
                    why: e.to_string(),
                })
        };
        for state in ["ipython", "matplotlib", "cache", "site-packages"] {
            dir(&policy.state(state))?;
        }
        dir(private)?;
        let tmp = private.join("tmp");
        let runtime = private.join("runtime");
        dir(&tmp)?;
        dir(&runtime)?;
        let empty_file = private.join("empty");
        std::fs::write(&empty_file, b"").map_err(|e| SandboxError::Place {
            path: empty_file.clone(),
            why: e.to_string(),
        })?;
        let _ = std::fs::set_permissions(&empty_file, std::fs::Permissions::from_mode(0o000));
        Ok(Layout {
            private: private.to_owned(),
            tmp,
            runtime,
            empty_file,
            jupyter_runtime: None,
        })
    }

    pub(crate) fn deny_read(&self, policy: &Policy) -> Vec<PathBuf> {
        let mut paths = policy.deny_read.clone();
        paths.extend(self.jupyter_runtime.iter().cloned());
        // Whatever the policy file says: the servers' policies, kernelspecs and event sockets.
        paths.extend(crate::events::hidden(&policy.place));
        paths
    }

    pub(crate) fn writable(&self, policy: &Policy) -> Vec<PathBuf> {
        let mut paths = policy.writable.clone();
        paths.push(self.private.clone());
        for state in ["ipython", "matplotlib", "cache", "site-packages"] {
            paths.push(policy.state(state));
        }
        paths
    }
}
