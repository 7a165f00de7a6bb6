//! The egress proxy's policy in the launcher: built from the policy file, and built again when
//! that file changes (the server rewrites it when `[kernel_sandbox] hosts` or `credentials`
//! change), so a change applies at the kernel's next connection without restarting it.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use egress::proxy::{CurrentPolicy, ProxyPolicy};

use crate::policy::Policy;

/// The policy file's size and modification time when last read.
type Stamp = (u64, Option<SystemTime>);

pub(crate) struct FromPolicyFile {
    path: PathBuf,
    /// Ports on this machine the proxy never reaches (the Jupyter Server's), found at start.
    never_ports: Vec<u16>,
    kernel: String,
    now: Mutex<(Stamp, Arc<ProxyPolicy>)>,
}

fn stamp(path: &PathBuf) -> Stamp {
    std::fs::metadata(path)
        .map(|meta| (meta.len(), meta.modified().ok()))
        .unwrap_or((0, None))
}

impl FromPolicyFile {
    pub(crate) fn new(path: PathBuf, policy: &Policy, kernel: String) -> Result<Self, String> {
        let first = build(policy, &kernel)?;
        Ok(FromPolicyFile {
            never_ports: policy.never_ports.clone(),
            now: Mutex::new((stamp(&path), Arc::new(first))),
            path,
            kernel,
        })
    }
}

impl CurrentPolicy for FromPolicyFile {
    fn current(&self) -> Arc<ProxyPolicy> {
        let mut now = self.now.lock().expect("policy lock");
        let seen = stamp(&self.path);
        if seen != now.0 {
            now.0 = seen;
            let rebuilt = Policy::load(&self.path)
                .map_err(|e| e.to_string())
                .and_then(|mut policy| {
                    policy.never_ports = self.never_ports.clone();
                    build(&policy, &self.kernel)
                });
            match rebuilt {
                Ok(policy) => {
                    eprintln!(
                        "jupyter-mcp-server kernel sandbox: kernel {}: hosts and credentials \
                         re-read from {}",
                        self.kernel,
                        self.path.display()
                    );
                    now.1 = Arc::new(policy);
                }
                Err(why) => eprintln!(
                    "jupyter-mcp-server kernel sandbox: kernel {}: the changed policy {} is \
                     not used ({why}); the previous one stays",
                    self.kernel,
                    self.path.display()
                ),
            }
        }
        now.1.clone()
    }
}

/// The proxy's policy for `policy`, for kernel `kernel`.
fn build(policy: &Policy, kernel: &str) -> Result<ProxyPolicy, String> {
    let hosts = policy
        .hosts
        .iter()
        .map(|entry| egress::HostRule::parse_in("[kernel_sandbox] hosts", entry))
        .collect::<Result<Vec<_>, _>>()?;
    let credentials = crate::credentials::for_proxy(&policy.credentials)?;
    let upstream_tls = if credentials.is_empty() {
        None
    } else {
        Some(egress::credentials::upstream_tls()?)
    };
    let secrets: Option<Arc<dyn egress::credentials::Secrets>> = policy
        .secrets_file
        .clone()
        .map(|path| Arc::new(crate::credentials::SecretsFile(path)) as _);
    Ok(ProxyPolicy {
        hosts,
        never_ports: policy.never_ports.clone(),
        setting: "[kernel_sandbox] hosts of the server's config file".into(),
        credentials,
        secrets,
        upstream_tls,
        asker: policy.egress_prompts.then(|| {
            Arc::new(crate::events::ServerAsker::new(
                policy.place.clone(),
                kernel.to_owned(),
                std::env::var("JPY_SESSION_NAME").ok(),
            )) as Arc<dyn egress::proxy::Asker>
        }),
    })
}
