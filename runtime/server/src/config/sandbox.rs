//! `[kernel_sandbox]` as the server uses it once the config file is read and checked.

use std::path::{Path, PathBuf};

use super::ConfigError;
use super::file::FileConfig;

/// `[kernel_sandbox]` resolved, with the config file's own path (a kernel never reads it).
#[derive(Debug, Clone)]
pub struct KernelSandboxSettings {
    /// Checked entries, as written.
    pub hosts: Vec<String>,
    pub write: Vec<PathBuf>,
    pub deny_read: Vec<PathBuf>,
    /// Each kernel's caps, its subprocesses included.
    pub memory_mb: u64,
    pub processes: u64,
    /// Headers the egress proxy fills from secrets, per host.
    pub credentials: Vec<CredentialSetting>,
    /// Whether `kernel.egress-prompts` may offer "always" (written to `hosts`).
    pub allow_always: bool,
    pub config_file: Option<PathBuf>,
}

/// One `[kernel_sandbox] credentials` entry, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialSetting {
    pub host: String,
    pub port: u16,
    pub secret: String,
    pub header: String,
    pub format: String,
}

impl Default for KernelSandboxSettings {
    fn default() -> Self {
        KernelSandboxSettings {
            hosts: Vec::new(),
            write: Vec::new(),
            deny_read: Vec::new(),
            memory_mb: kernel_sandbox::policy::default_memory_mb(),
            processes: kernel_sandbox::policy::DEFAULT_PROCESSES,
            credentials: Vec::new(),
            allow_always: false,
            config_file: None,
        }
    }
}

impl KernelSandboxSettings {
    /// The `[kernel_sandbox]` of the config file at `path`, checked as a start checks it.
    pub fn from_file(path: &Path) -> Result<Self, ConfigError> {
        Ok(FileConfig::read(path)?.kernel_sandbox)
    }
}
