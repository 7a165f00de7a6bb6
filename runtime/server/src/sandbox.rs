//! `kernel.sandbox` at start: the policy from the config, the machine checked (refused where
//! the confinement cannot hold), and the sandboxed `python3` kernelspec the embedded Jupyter is
//! given as its only one. The confinement itself is the `kernel_sandbox` crate's.

use std::path::{Path, PathBuf};

use jupyter_client::launcher::{OwnKernelSpecs, kernel_python};
use kernel_sandbox::Policy;
use kernel_sandbox::kernelspec::{self, EMBEDDED_NAME};
use server_core::capabilities::{Capabilities, KERNEL_SANDBOX};

use crate::RunError;
use crate::config::{Config, JupyterSource};

/// This server's sandboxed kernelspec and policy; removed when the server stops.
#[derive(Debug)]
pub struct SandboxedKernels {
    dir: PathBuf,
    pub specs: OwnKernelSpecs,
}

impl Drop for SandboxedKernels {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn refused(why: String) -> RunError {
    RunError::KernelSandbox(why)
}

/// `None` while `kernel.sandbox` is off; else the kernelspec to start the embedded Jupyter
/// with, once this machine has shown it can confine a kernel.
pub fn prepare(
    config: &Config,
    capabilities: &Capabilities,
) -> Result<Option<SandboxedKernels>, RunError> {
    if !capabilities.enabled(KERNEL_SANDBOX) {
        return Ok(None);
    }
    let root_dir = match &config.jupyter {
        JupyterSource::Embedded { root_dir, .. } => root_dir,
        JupyterSource::Remote { url, .. } => {
            return Err(refused(format!(
                "kernel.sandbox is on, but kernels run on a Jupyter this server did not start \
                 ({url}): a gateway's or another server's kernels are confined by whoever runs \
                 them, not by this server. Turn kernel.sandbox off, or drop --jupyter-url and \
                 --code-sandbox-url so the server starts its own Jupyter with sandboxed kernels"
            )));
        }
        JupyterSource::Hub(_) => {
            return Err(refused(
                "kernel.sandbox is on, but in Hub mode (--jupyterhub-url) each user's kernels run \
                 on their own single-user server, confined by the Hub's spawner, not by this \
                 server. Turn kernel.sandbox off, or confine the single-user servers"
                    .into(),
            ));
        }
    };
    if !cfg!(target_os = "linux") {
        return Err(refused(format!(
            "kernel.sandbox is on, but this machine is not Linux ({}); the sandbox needs Linux \
             namespaces, Landlock and seccomp. Turn kernel.sandbox off",
            std::env::consts::OS
        )));
    }
    let place = server_core::user_dirs::cache()
        .map(|cache| cache.join("kernel-sandbox"))
        .ok_or_else(|| {
            refused(
                "kernel.sandbox is on, but neither XDG_CACHE_HOME nor HOME is set, so the \
                 sandbox has no place for its kernels' state; set one of them"
                    .into(),
            )
        })?;
    let dir = place.join("servers").join(std::process::id().to_string());
    let root = root_dir.canonicalize().unwrap_or_else(|_| root_dir.clone());
    let policy = policy(config, &root, &place);
    let policy_file = dir.join("policy.json");
    policy
        .save(&policy_file)
        .map_err(|e| refused(format!("kernel.sandbox: {e}")))?;
    let kernels = SandboxedKernels {
        dir: dir.clone(),
        specs: OwnKernelSpecs {
            data_dir: dir.join("jupyter"),
            only: vec![EMBEDDED_NAME.to_owned()],
        },
    };
    check(&policy_file)?;
    let launcher = std::env::current_exe()
        .map_err(|e| refused(format!("kernel.sandbox: cannot find this program: {e}")))?;
    let spec = kernelspec::kernel_json(
        &launcher,
        &policy_file,
        &kernel_python()?,
        "Python 3 (sandboxed)",
    );
    kernelspec::write(
        &kernels.specs.data_dir.join("kernels"),
        EMBEDDED_NAME,
        &spec,
    )
    .map_err(|e| refused(format!("kernel.sandbox: {e}")))?;
    tracing::info!(
        "kernel.sandbox is on: kernels confined by {}; writable: {}; reads denied: {}; hosts \
         allowed through the egress proxy: {}",
        kernel_sandbox::mechanisms(),
        shown(&policy.writable),
        shown(&policy.deny_read),
        if policy.hosts.is_empty() {
            "none".to_owned()
        } else {
            policy.hosts.join(", ")
        }
    );
    Ok(Some(kernels))
}

fn shown(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

/// The operator's `[kernel_sandbox]` over the defaults: the root and `write` writable; the
/// default deny list, this server's own secrets, state and config, and `deny_read` hidden.
fn policy(config: &Config, root: &Path, place: &Path) -> Policy {
    let settings = &config.kernel_sandbox;
    let mut writable = vec![root.to_owned()];
    writable.extend(settings.write.iter().cloned());
    let mut deny_read = std::env::var_os("HOME")
        .map(|home| Policy::default_deny(Path::new(&home)))
        .unwrap_or_default();
    deny_read.extend(config.wasm.secrets.as_ref().map(|s| s.path().to_owned()));
    deny_read.extend(server_core::secrets::SecretStore::default_path());
    deny_read.extend(config.state.as_ref().map(|state| state.dir.clone()));
    deny_read.extend(settings.config_file.iter().cloned());
    deny_read.extend(settings.deny_read.iter().cloned());
    deny_read.sort();
    deny_read.dedup();
    Policy {
        writable,
        deny_read,
        hosts: settings.hosts.clone(),
        never_ports: Vec::new(),
        place: place.to_owned(),
    }
}

/// Runs this program's `kernel-sandbox check` (a fresh process: the check forks, which a
/// process with runtime threads must not).
fn check(policy_file: &Path) -> Result<(), RunError> {
    let program = std::env::current_exe()
        .map_err(|e| refused(format!("kernel.sandbox: cannot find this program: {e}")))?;
    let output = std::process::Command::new(program)
        .args(["kernel-sandbox", "check", "--policy"])
        .arg(policy_file)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| refused(format!("kernel.sandbox: cannot run its check: {e}")))?;
    if output.status.success() {
        return Ok(());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    let said = said
        .trim()
        .trim_start_matches("jupyter-mcp-server: ")
        .to_owned();
    Err(refused(format!(
        "kernel.sandbox is on, but {said}. A kernel never runs unconfined while the capability \
         says on: turn kernel.sandbox off, or run the server where {} are available",
        kernel_sandbox::mechanisms()
    )))
}
