//! The config file (`--config`, TOML): `[capabilities]`, `[execution_confirm]`, `[grant_prompts]`,
//! `[kernel_sandbox]`, `cache_dir`, `prewarm_max`,
//! `prewarm_max_idle_seconds`, `kernel_env`, `insecure_registries`, `trusted_keys`, `require_signatures` and
//! `[[extension]]` entries. Read with serde, refusing keys this
//! build does not know, so a typo never passes silently; relative paths are taken from the file's
//! directory.

use std::num::{NonZeroU32, NonZeroU64};
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::policy::{EntryOrigin, PolicyEntry, StorageEntry};
use super::{ConfigError, ExtensionConfig, GuestLimits};

/// What a config file says, its paths resolved.
#[derive(Debug, Default)]
pub(super) struct FileConfig {
    pub capabilities: Vec<(String, bool)>,
    pub cache_dir: Option<PathBuf>,
    pub extensions: Vec<ExtensionConfig>,
    pub prewarm: jupyter_client::spares::SparePolicy,
    pub sources: super::ExtensionSources,
    /// `kernel_env`, as written.
    pub kernel_env: Vec<String>,
    /// `[execution_confirm]`: which code needs a person's yes while `execution.confirm` is on.
    pub confirm: server_core::confirm::Rules,
    /// `[grant_prompts]`: what `extensions.grant-prompts` may ask for.
    pub grant_prompts: super::GrantPromptSettings,
    /// `[kernel_sandbox]`: what a kernel may reach while `kernel.sandbox` is on.
    pub kernel_sandbox: super::KernelSandboxSettings,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTables {
    #[serde(default)]
    capabilities: toml::Table,
    execution_confirm: Option<ConfirmEntry>,
    #[serde(default)]
    grant_prompts: GrantPromptsEntry,
    #[serde(default)]
    kernel_sandbox: KernelSandboxEntry,
    cache_dir: Option<PathBuf>,
    #[serde(default, rename = "extension")]
    extensions: Vec<ExtensionEntry>,
    /// Spare kernels per kernelspec while `kernel.prewarm` is on.
    prewarm_max: Option<u8>,
    /// Seconds a spare may stay idle before it is restarted.
    prewarm_max_idle_seconds: Option<NonZeroU64>,
    /// Environment for started kernels, as `--kernel-env` takes it (`KEY=VALUE` or `KEY`).
    #[serde(default)]
    kernel_env: Vec<String>,
    /// Registries reached over plain HTTP although not on a loopback address.
    #[serde(default)]
    insecure_registries: Vec<String>,
    /// Public keys (PEM, cosign's ECDSA P-256) whose signatures are trusted.
    #[serde(default)]
    trusted_keys: Vec<PathBuf>,
    /// Refuse components that carry no signature by a trusted key.
    #[serde(default)]
    require_signatures: bool,
}

/// One `[[extension]]` table (also what `extension add --config-entry` sends a running server).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExtensionEntry {
    /// The .wasm file to load, or an `oci://` reference.
    path: PathBuf,
    #[serde(default)]
    grants: Vec<String>,
    #[serde(default)]
    limits: LimitsEntry,
    #[serde(default)]
    config: toml::Table,
    /// Whether a failure of this hook handler fails the call it guards; the guest's own
    /// `propagate-errors` when left out.
    critical: Option<bool>,
    /// Hosts it may send HTTP requests to.
    #[serde(default)]
    allowed_hosts: Vec<String>,
    /// Directories it may use, relative to this file's folder.
    #[serde(default)]
    storage: Vec<StorageEntry>,
    /// Environment variables it sees, by name.
    #[serde(default)]
    env: Vec<String>,
    /// Names whose values spans never show.
    #[serde(default)]
    redact: Vec<String>,
}

/// `[execution_confirm]`: `ask` ("always", the default, or "matching") and the `patterns`
/// (regular expressions) that "matching" asks for; left out, the defaults.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfirmEntry {
    #[serde(default)]
    ask: AskEntry,
    patterns: Option<Vec<String>>,
}

/// `[grant_prompts]`: `never`, the grants the person is never asked for (as `grants` names
/// them, or a prefix ending in `*`), and `allow_always`, whether they may grant for good.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct GrantPromptsEntry {
    #[serde(default)]
    never: Vec<String>,
    #[serde(default)]
    allow_always: bool,
}

/// `[kernel_sandbox]`: `hosts` its egress proxy lets through (`HOST[:PORT]`, `*.example.org`),
/// `write`, directories it may write beyond the root, `deny_read`, paths it may not read
/// beyond the defaults, and each kernel's caps, `memory_mb` and `processes`. Relative paths are
/// taken from the file's directory; `~/` is the home.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct KernelSandboxEntry {
    #[serde(default)]
    hosts: Vec<String>,
    #[serde(default)]
    write: Vec<PathBuf>,
    #[serde(default)]
    deny_read: Vec<PathBuf>,
    memory_mb: Option<NonZeroU64>,
    processes: Option<NonZeroU64>,
    #[serde(default)]
    credentials: Vec<CredentialEntry>,
    /// Whether a person asked about a host (`kernel.egress-prompts`) may allow it always.
    #[serde(default)]
    allow_always: bool,
}

/// One of `[kernel_sandbox] credentials`: requests to `host` get `header` set to `format` with
/// the secret `secret` in place of `{}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialEntry {
    host: String,
    secret: String,
    #[serde(default = "default_credential_header")]
    header: String,
    #[serde(default = "default_credential_format")]
    format: String,
}

fn default_credential_header() -> String {
    "Authorization".into()
}

fn default_credential_format() -> String {
    "Bearer {}".into()
}

impl CredentialEntry {
    fn resolve(
        self,
        fail: &impl Fn(String) -> ConfigError,
    ) -> Result<super::CredentialSetting, ConfigError> {
        let bad = |why: String| fail(format!("kernel_sandbox.credentials: {why}"));
        let written = self.host.as_str();
        let (host, port) = if let Some(rest) = written.strip_prefix('[') {
            match rest.split_once(']') {
                Some((host, "")) => (host, Some(443)),
                Some((host, port)) => (host, port.strip_prefix(':').and_then(|p| p.parse().ok())),
                None => (rest, None),
            }
        } else if written.matches(':').count() == 1 {
            let (host, port) = written.split_once(':').unwrap_or((written, ""));
            (host, port.parse().ok())
        } else {
            (written, Some(443))
        };
        let Some(port) = port else {
            return Err(bad(format!(
                "host {written:?} has a port that is not a number"
            )));
        };
        let host = host.to_ascii_lowercase();
        if host.is_empty()
            || host.contains(['*', '/', '@', ' '])
            || egress::HostRule::parse_in("kernel_sandbox.credentials", &host).is_err()
        {
            return Err(bad(format!(
                "host {:?} is not one host (a name or an address, optionally :PORT; no \
                 wildcards: each credentialed host gets a certificate of its own)",
                self.host
            )));
        }
        server_core::secrets::check_name(&self.secret).map_err(|e| bad(e.to_string()))?;
        if self.header.is_empty()
            || !self
                .header
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        {
            return Err(bad(format!(
                "header {:?} is not an HTTP header name (letters, digits, '-')",
                self.header
            )));
        }
        if self.format.matches("{}").count() != 1 || self.format.contains(['\r', '\n']) {
            return Err(bad(format!(
                "format {:?} must hold {{}} exactly once, where the secret goes, on one line",
                self.format
            )));
        }
        Ok(super::CredentialSetting {
            host,
            port,
            secret: self.secret,
            header: self.header,
            format: self.format,
        })
    }
}

impl KernelSandboxEntry {
    fn resolve(
        self,
        base: &Path,
        fail: impl Fn(String) -> ConfigError,
    ) -> Result<super::KernelSandboxSettings, ConfigError> {
        for host in &self.hosts {
            egress::HostRule::parse_in("kernel_sandbox.hosts", host).map_err(&fail)?;
        }
        let home = std::env::var_os("HOME").map(PathBuf::from);
        let place = |path: PathBuf| -> Result<PathBuf, ConfigError> {
            match (path.strip_prefix("~"), &home) {
                (Ok(rest), Some(home)) => Ok(home.join(rest)),
                (Ok(_), None) => Err(fail(format!(
                    "kernel_sandbox: {} starts with ~ but HOME is not set; write the path out",
                    path.display()
                ))),
                (Err(_), _) => Ok(base.join(path)),
            }
        };
        let write = self
            .write
            .into_iter()
            .map(&place)
            .collect::<Result<Vec<_>, _>>()?;
        for dir in &write {
            if !dir.is_dir() {
                return Err(fail(format!(
                    "kernel_sandbox.write: {} is not a directory; create it or drop the entry",
                    dir.display()
                )));
            }
        }
        Ok(super::KernelSandboxSettings {
            hosts: self.hosts,
            write,
            deny_read: self
                .deny_read
                .into_iter()
                .map(&place)
                .collect::<Result<_, _>>()?,
            memory_mb: self
                .memory_mb
                .map_or_else(kernel_sandbox::policy::default_memory_mb, NonZeroU64::get),
            processes: self
                .processes
                .map_or(kernel_sandbox::policy::DEFAULT_PROCESSES, NonZeroU64::get),
            credentials: self
                .credentials
                .into_iter()
                .map(|entry| entry.resolve(&fail))
                .collect::<Result<_, _>>()?,
            allow_always: self.allow_always,
            config_file: None,
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum AskEntry {
    #[default]
    Always,
    Matching,
}

/// The `limits` table of an entry; what it leaves out keeps its default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsEntry {
    memory_mb: Option<NonZeroU64>,
    cpu_ms_per_call: Option<NonZeroU64>,
    wall_ms_per_call: Option<NonZeroU64>,
    max_consecutive_failures: Option<NonZeroU32>,
    http_request_bytes: Option<NonZeroU64>,
    http_response_bytes: Option<NonZeroU64>,
    http_ms_per_request: Option<NonZeroU64>,
}

impl LimitsEntry {
    fn resolve(self) -> GuestLimits {
        let defaults = GuestLimits::default();
        GuestLimits {
            memory_mb: or_default(self.memory_mb, defaults.memory_mb),
            cpu_ms_per_call: or_default(self.cpu_ms_per_call, defaults.cpu_ms_per_call),
            max_consecutive_failures: or_default(
                self.max_consecutive_failures,
                defaults.max_consecutive_failures,
            ),
            wall_ms_per_call: self.wall_ms_per_call.map(NonZeroU64::get),
            http_request_bytes: or_default(self.http_request_bytes, defaults.http_request_bytes),
            http_response_bytes: or_default(self.http_response_bytes, defaults.http_response_bytes),
            http_ms_per_request: or_default(self.http_ms_per_request, defaults.http_ms_per_request),
        }
    }
}

/// A limit as written (never zero: the type refuses it), else its default.
fn or_default<N: Into<T>, T>(written: Option<N>, default: T) -> T {
    written.map_or(default, Into::into)
}

impl FileConfig {
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let fail = |reason: String| ConfigError::ConfigFile {
            path: path.to_owned(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| fail(e.to_string()))?;
        let tables: FileTables = toml::from_str(&text).map_err(|e| fail(e.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let capabilities = tables
            .capabilities
            .into_iter()
            .map(|(name, value)| match value.as_bool() {
                Some(enabled) => Ok((name, enabled)),
                None => Err(fail(format!(
                    "capabilities.{name} must be true or false, not {value}"
                ))),
            })
            .collect::<Result<_, _>>()?;
        let extensions = tables
            .extensions
            .into_iter()
            .enumerate()
            .map(|(index, entry)| {
                let origin = EntryOrigin {
                    file: path.to_owned(),
                    index,
                };
                entry.resolve(base, Some(origin))
            })
            .collect();
        let confirm = match tables.execution_confirm {
            None => server_core::confirm::Rules::default(),
            Some(entry) => {
                let ask = match entry.ask {
                    AskEntry::Always => server_core::confirm::Ask::Always,
                    AskEntry::Matching => server_core::confirm::Ask::Matching,
                };
                server_core::confirm::Rules::new(ask, entry.patterns)
                    .map_err(|e| fail(format!("execution_confirm: {e}")))?
            }
        };
        let mut prewarm = jupyter_client::spares::SparePolicy::default();
        if let Some(n) = tables.prewarm_max {
            if n > 16 {
                return Err(fail(format!(
                    "prewarm_max must be 0 to 16 spare kernels per kernelspec, not {n}"
                )));
            }
            prewarm.per_spec = usize::from(n);
        }
        if let Some(seconds) = tables.prewarm_max_idle_seconds {
            prewarm.max_idle = std::time::Duration::from_secs(seconds.get());
        }
        let mut kernel_sandbox = tables.kernel_sandbox.resolve(base, fail)?;
        kernel_sandbox.config_file = Some(path.to_owned());
        Ok(FileConfig {
            kernel_sandbox,
            capabilities,
            cache_dir: tables.cache_dir.map(|dir| base.join(dir)),
            extensions,
            prewarm,
            kernel_env: tables.kernel_env,
            confirm,
            grant_prompts: super::GrantPromptSettings {
                never: tables.grant_prompts.never,
                allow_always: tables.grant_prompts.allow_always,
            },
            sources: super::ExtensionSources {
                insecure_registries: tables.insecure_registries,
                trusted_keys: tables
                    .trusted_keys
                    .into_iter()
                    .map(|key| base.join(key))
                    .collect(),
                require_signatures: tables.require_signatures,
                // Beside the config: server.toml → server.lock.
                lock_file: Some(path.with_extension("lock")),
                extensions_dir: None,
            },
        })
    }
}

impl ExtensionEntry {
    /// The entry with its paths taken from `base` (an `oci://` reference is kept as it is);
    /// `origin` is where it was read, so run-time grants can be written back there.
    pub fn resolve(self, base: &Path, origin: Option<EntryOrigin>) -> ExtensionConfig {
        let path = if super::is_oci(&self.path) {
            self.path
        } else {
            base.join(self.path)
        };
        ExtensionConfig {
            path,
            grants: self.grants,
            limits: self.limits.resolve(),
            config: serde_json::to_value(self.config)
                .unwrap_or_else(|_| serde_json::Value::Object(Default::default())),
            critical: self.critical,
            policy: PolicyEntry {
                allowed_hosts: self.allowed_hosts,
                storage: self.storage,
                env: self.env,
                redact: self.redact,
                base_dir: base.to_owned(),
                origin,
            },
        }
    }
}
