//! The policy file a server's sandboxed kernels read, made and remade: the operator's
//! `[kernel_sandbox]` over the defaults, with each credentialed host's certificate issued by
//! the server's authority (whose key stays in memory) and the kernels' CA bundle. While the
//! server runs, the config file is watched and the policy rewritten when `hosts` or
//! `credentials` change; each launcher re-reads it at its kernel's next connection.

use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use kernel_sandbox::Policy;
use kernel_sandbox::credentials::{Authority, PolicyCredential, write_bundle};

use std::sync::Arc;

use server_core::capabilities::{Capabilities, EGRESS_PROMPTS};

use crate::config::KernelSandboxSettings;

/// How often the config file is looked at.
const POLL: Duration = Duration::from_secs(1);

/// What a policy is made from.
pub struct PolicyInputs {
    pub root: PathBuf,
    pub settings: KernelSandboxSettings,
    /// The operator's secrets file (read by the proxy for credentials; hidden from kernels).
    pub secrets: Option<PathBuf>,
    pub state: Option<PathBuf>,
    pub place: PathBuf,
    /// Where certificates go: a directory no kernel sees.
    pub private_dir: PathBuf,
    /// Where the kernels' CA bundle goes: readable by them.
    pub bundle: PathBuf,
    /// Paths hidden beyond the settings' (an installed kernelspec's own directory).
    pub also_hidden: Vec<PathBuf>,
    /// Made when the first credential needs it.
    authority: Option<Authority>,
    /// Whether `kernel.egress-prompts` was on when the policy was last made.
    pub prompts: bool,
}

impl std::fmt::Debug for PolicyInputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyInputs")
            .field("root", &self.root)
            .field("private_dir", &self.private_dir)
            .finish_non_exhaustive()
    }
}

impl PolicyInputs {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        root: PathBuf,
        settings: KernelSandboxSettings,
        secrets: Option<PathBuf>,
        state: Option<PathBuf>,
        place: PathBuf,
        private_dir: PathBuf,
        bundle: PathBuf,
        also_hidden: Vec<PathBuf>,
    ) -> Self {
        PolicyInputs {
            root,
            settings,
            secrets,
            state,
            place,
            private_dir,
            bundle,
            also_hidden,
            authority: None,
            prompts: false,
        }
    }

    /// The policy, with certificates issued for its credentials.
    pub fn make(&mut self) -> Result<Policy, String> {
        let mut policy = super::policy(
            &self.root,
            &self.settings,
            self.secrets.clone(),
            self.state.clone(),
            &self.place,
        );
        policy.deny_read.extend(self.also_hidden.iter().cloned());
        policy.egress_prompts = self.prompts;
        if self.settings.credentials.is_empty() {
            return Ok(policy);
        }
        if self.authority.is_none() {
            self.authority = Some(Authority::new().map_err(|e| {
                format!("kernel_sandbox.credentials: cannot make a certificate authority: {e}")
            })?);
        }
        let authority = self.authority.as_ref().expect("made above");
        let dir = self.private_dir.join("credentials");
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        for credential in &self.settings.credentials {
            let (certificate, key) = authority
                .issue_into(&dir, &credential.host, credential.port)
                .map_err(|e| format!("a certificate for {}: {e}", credential.host))?;
            policy.credentials.push(PolicyCredential {
                host: credential.host.clone(),
                port: credential.port,
                secret: credential.secret.clone(),
                header: credential.header.clone(),
                format: credential.format.clone(),
                certificate,
                key,
            });
        }
        write_bundle(&self.bundle, &authority.certificate_pem()).map_err(|e| e.to_string())?;
        policy.ca_bundle = Some(self.bundle.clone());
        policy.secrets_file = self
            .secrets
            .clone()
            .or_else(server_core::secrets::SecretStore::default_path);
        Ok(policy)
    }

    /// Watches the config file and `kernel.egress-prompts` until the process ends; when the
    /// file's `hosts` or `credentials` change, or the capability is switched, rewrites
    /// `policy_file`. A config that no longer parses is logged and skipped.
    pub fn watch(mut self, policy_file: PathBuf, capabilities: Arc<Capabilities>) {
        let config = self.settings.config_file.clone();
        tokio::spawn(async move {
            let mut seen = config.as_deref().map(stamp);
            loop {
                tokio::time::sleep(POLL).await;
                let prompts = capabilities.enabled(EGRESS_PROMPTS);
                if prompts != self.prompts {
                    self.prompts = prompts;
                    match self
                        .make()
                        .and_then(|policy| policy.save(&policy_file).map_err(|e| e.to_string()))
                    {
                        Ok(()) => tracing::info!(
                            "kernel.sandbox: kernel.egress-prompts is {} for running kernels \
                             from their next connection",
                            if prompts { "on" } else { "off" }
                        ),
                        Err(why) => {
                            tracing::warn!("kernel.sandbox: the policy was not rewritten: {why}")
                        }
                    }
                }
                let Some(config) = &config else {
                    continue;
                };
                let now = Some(stamp(config));
                if now == seen {
                    continue;
                }
                seen = now;
                self.reread(config, &policy_file);
            }
        });
    }

    fn reread(&mut self, config: &Path, policy_file: &Path) {
        let settings = match KernelSandboxSettings::from_file(config) {
            Ok(settings) => settings,
            Err(e) => {
                tracing::warn!(
                    "kernel.sandbox: {} changed but is not used: {e}; kernels keep the hosts \
                     and credentials they had",
                    config.display()
                );
                return;
            }
        };
        if settings.hosts == self.settings.hosts
            && settings.credentials == self.settings.credentials
        {
            return;
        }
        let before = std::mem::replace(&mut self.settings.hosts, settings.hosts);
        let credentials_before =
            std::mem::replace(&mut self.settings.credentials, settings.credentials);
        let written = self
            .make()
            .and_then(|policy| policy.save(policy_file).map_err(|e| e.to_string()));
        match written {
            Ok(()) => tracing::info!(
                "kernel.sandbox: hosts ({}) and credentials ({}) re-read from {}; running \
                 kernels use them from their next connection",
                shown_list(&self.settings.hosts),
                shown_list(
                    &self
                        .settings
                        .credentials
                        .iter()
                        .map(|c| format!("{}:{} from secret {}", c.host, c.port, c.secret))
                        .collect::<Vec<_>>()
                ),
                config.display()
            ),
            Err(why) => {
                self.settings.hosts = before;
                self.settings.credentials = credentials_before;
                tracing::warn!(
                    "kernel.sandbox: the changed hosts and credentials of {} are not used: {why}",
                    config.display()
                );
            }
        }
    }
}

fn shown_list(items: &[String]) -> String {
    if items.is_empty() {
        "none".into()
    } else {
        items.join(", ")
    }
}

fn stamp(path: &Path) -> (u64, Option<SystemTime>) {
    std::fs::metadata(path)
        .map(|meta| (meta.len(), meta.modified().ok()))
        .unwrap_or((0, None))
}

/// Adds `host` to the `[kernel_sandbox] hosts` of `config` (`add`), or takes it out, keeping the
/// rest of the file as written: how a person's "always" lasts, and how `sandbox revoke` takes
/// it back. The watcher then rewrites the kernels' policy.
pub fn write_host(config: &Path, host: &str, add: bool) -> Result<(), String> {
    let text = std::fs::read_to_string(config).map_err(|e| format!("{}: {e}", config.display()))?;
    let mut document: toml_edit::DocumentMut = text
        .parse()
        .map_err(|e| format!("{}: {e}", config.display()))?;
    let table = document
        .entry("kernel_sandbox")
        .or_insert_with(toml_edit::table)
        .as_table_mut()
        .ok_or_else(|| format!("{}: kernel_sandbox is not a table", config.display()))?;
    let hosts = table
        .entry("hosts")
        .or_insert_with(|| toml_edit::value(toml_edit::Array::new()))
        .as_array_mut()
        .ok_or_else(|| format!("{}: kernel_sandbox.hosts is not a list", config.display()))?;
    let present = hosts.iter().position(|v| v.as_str() == Some(host));
    match (add, present) {
        (true, None) => hosts.push(host),
        (false, Some(at)) => {
            hosts.remove(at);
        }
        _ => return Ok(()),
    }
    server_core::extensions::policy::replace_file(config, document.to_string())
        .map_err(|e| format!("{}: {e}", config.display()))
}
