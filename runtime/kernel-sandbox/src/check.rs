//! `kernel-sandbox check`: the whole confinement tried on this machine in a throwaway child, so
//! a start with `kernel.sandbox` on is refused where it cannot hold.

use std::path::Path;

use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::ForkResult;

use crate::channel::control_pair;
use crate::confine::{self, Failed};
use crate::launch::{Layout, forced_off};
use crate::policy::Policy;
use crate::{SandboxError, sys};

/// Tries the whole confinement on this machine, in a throwaway child; when it holds, says how a
/// kernel's memory will be capped here.
pub fn check(policy_file: &Path) -> Result<String, SandboxError> {
    forced_off()?;
    let policy = Policy::load(policy_file)?;
    let private = policy.private(&format!("check-{}", std::process::id()));
    let layout = Layout::create(&policy, &private)?;
    let (outer_end, inner_end) = control_pair()?;
    let result = match sys::fork_single_threaded().map_err(SandboxError::Io)? {
        ForkResult::Child => {
            drop(outer_end);
            let code = match inner_check(&policy, &layout) {
                Ok(()) => 0,
                Err(failed) => {
                    let _ = inner_end.send(failed.to_string().as_bytes());
                    1
                }
            };
            std::process::exit(code);
        }
        ForkResult::Parent { child } => {
            drop(inner_end);
            let status = waitpid(child, None);
            let mut message = vec![0u8; 4096];
            let said = outer_end.recv(&mut message).unwrap_or(0);
            match status {
                Ok(WaitStatus::Exited(_, 0)) => Ok(()),
                _ if said > 0 => Err(SandboxError::Unavailable(
                    String::from_utf8_lossy(&message[..said]).into_owned(),
                )),
                other => Err(SandboxError::Unavailable(format!(
                    "the trial confinement ended as {other:?}"
                ))),
            }
        }
    };
    let _ = std::fs::remove_dir_all(&private);
    result?;
    let trial = crate::KernelCaps::create(
        &format!("jupyter-mcp-check-{}", std::process::id()),
        policy.memory_mb,
        policy.processes,
    );
    Ok(format!(
        "each kernel capped at {} MB of memory and {} processes ({})",
        policy.memory_mb,
        policy.processes,
        trial.describe()
    ))
}

fn inner_check(policy: &Policy, layout: &Layout) -> Result<(), Failed> {
    confine::enter_namespaces(&layout.deny_read(policy), &layout.empty_file)?;
    match sys::fork_single_threaded().map_err(|e| Failed {
        step: "fork",
        error: e.to_string(),
    })? {
        ForkResult::Child => {
            let code = match confine::restrict_self(&layout.writable(policy)) {
                Ok(()) => 0,
                Err(failed) => {
                    eprintln!("{failed}");
                    1
                }
            };
            std::process::exit(code);
        }
        ForkResult::Parent { child } => match waitpid(child, None) {
            Ok(WaitStatus::Exited(_, 0)) => Ok(()),
            other => Err(Failed {
                step: "Landlock, capabilities and seccomp",
                error: format!("the trial kernel process ended as {other:?}"),
            }),
        },
    }
}
