//! What a sandboxed kernel may do: the directories it may write, the paths it may not read, the
//! hosts its proxy lets through. The server writes it (0600) where the kernelspec names it; the
//! launcher reads it at each kernel start.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::SandboxError;

/// Paths under the home directory no sandboxed kernel reads: keys and cloud credentials.
pub const DEFAULT_DENY_UNDER_HOME: [&str; 10] = [
    ".ssh",
    ".aws",
    ".gnupg",
    ".config/gcloud",
    ".azure",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".pypirc",
];

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Directories the kernel may write beneath (the root directory first, then the operator's
    /// `write`).
    pub writable: Vec<PathBuf>,
    /// Paths the kernel may not read: the defaults, the server's own secrets, state and config,
    /// then the operator's `deny_read`.
    pub deny_read: Vec<PathBuf>,
    /// `[kernel_sandbox] hosts`, as written (checked by the server at start).
    pub hosts: Vec<String>,
    /// Ports the proxy never reaches on an internal address (the Jupyter Server's).
    pub never_ports: Vec<u16>,
    /// The sandbox's own directory: the kernels' caches and state, and each kernel's private
    /// directory (its `TMPDIR`).
    pub place: PathBuf,
    /// Memory a kernel may use, its subprocesses included (`[kernel_sandbox] memory_mb`).
    #[serde(default = "default_memory_mb")]
    pub memory_mb: u64,
    /// Processes (and threads) a kernel may have at once (`[kernel_sandbox] processes`).
    #[serde(default = "default_processes")]
    pub processes: u64,
    /// Hosts whose requests the proxy adds a secret's header to (`[kernel_sandbox]
    /// credentials`).
    #[serde(default)]
    pub credentials: Vec<crate::credentials::PolicyCredential>,
    /// The operator's secrets file the proxy reads credentials' values from.
    #[serde(default)]
    pub secrets_file: Option<PathBuf>,
    /// The CA bundle the kernel trusts (the machine's roots and the server's authority), when
    /// there are credentials.
    #[serde(default)]
    pub ca_bundle: Option<PathBuf>,
    /// Whether a host not listed is put to the person through the server
    /// (`kernel.egress-prompts`) instead of refused at once.
    #[serde(default)]
    pub egress_prompts: bool,
}

/// The default process cap per kernel.
pub const DEFAULT_PROCESSES: u64 = 256;

fn default_processes() -> u64 {
    DEFAULT_PROCESSES
}

/// The default memory cap per kernel: a quarter of the machine's memory (1 GiB when it cannot
/// be read).
pub fn default_memory_mb() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|line| line.strip_prefix("MemTotal:"))
                .and_then(|rest| {
                    rest.trim()
                        .trim_end_matches("kB")
                        .trim()
                        .parse::<u64>()
                        .ok()
                })
        })
        .map_or(1024, |kib| (kib / 1024 / 4).max(64))
}

impl Policy {
    /// The default deny list for `home`.
    pub fn default_deny(home: &Path) -> Vec<PathBuf> {
        DEFAULT_DENY_UNDER_HOME
            .iter()
            .map(|entry| home.join(entry))
            .collect()
    }

    pub fn load(path: &Path) -> Result<Self, SandboxError> {
        let text = std::fs::read_to_string(path).map_err(|e| SandboxError::Policy {
            path: path.to_owned(),
            why: e.to_string(),
        })?;
        serde_json::from_str(&text).map_err(|e| SandboxError::Policy {
            path: path.to_owned(),
            why: e.to_string(),
        })
    }

    /// Written only for this user: it names what is hidden, which is nobody else's business.
    pub fn save(&self, path: &Path) -> Result<(), SandboxError> {
        let failed = |e: std::io::Error| SandboxError::Policy {
            path: path.to_owned(),
            why: e.to_string(),
        };
        if let Some(parent) = path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(parent)
                .map_err(failed)?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| SandboxError::Policy {
            path: path.to_owned(),
            why: e.to_string(),
        })?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(path)
            .map_err(failed)?;
        file.write_all(text.as_bytes()).map_err(failed)
    }

    /// Where the kernels' shared state lives inside the sandbox's place.
    pub fn state(&self, what: &str) -> PathBuf {
        self.place.join("state").join(what)
    }

    /// A kernel's private directory.
    pub fn private(&self, kernel: &str) -> PathBuf {
        self.place.join("kernels").join(kernel)
    }
}
