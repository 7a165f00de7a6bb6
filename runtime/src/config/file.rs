//! The config file (`--config`, TOML): `[capabilities]`, `cache_dir`, `prewarm_max`,
//! `prewarm_max_idle_seconds` and `[[extension]]` entries. Read with serde, refusing keys this
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
    pub prewarm: crate::jupyter::spares::SparePolicy,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileTables {
    #[serde(default)]
    capabilities: toml::Table,
    cache_dir: Option<PathBuf>,
    #[serde(default, rename = "extension")]
    extensions: Vec<ExtensionEntry>,
    /// Spare kernels per kernelspec while `kernel.prewarm` is on.
    prewarm_max: Option<u8>,
    /// Seconds a spare may stay idle before it is restarted.
    prewarm_max_idle_seconds: Option<NonZeroU64>,
}

/// One `[[extension]]` table.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ExtensionEntry {
    /// The .wasm file to load.
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
            memory_mb: self.memory_mb.map_or(defaults.memory_mb, NonZeroU64::get),
            cpu_ms_per_call: self
                .cpu_ms_per_call
                .map_or(defaults.cpu_ms_per_call, NonZeroU64::get),
            max_consecutive_failures: self
                .max_consecutive_failures
                .map_or(defaults.max_consecutive_failures, NonZeroU32::get),
            wall_ms_per_call: self.wall_ms_per_call.map(NonZeroU64::get),
            http_request_bytes: self
                .http_request_bytes
                .map_or(defaults.http_request_bytes, NonZeroU64::get),
            http_response_bytes: self
                .http_response_bytes
                .map_or(defaults.http_response_bytes, NonZeroU64::get),
            http_ms_per_request: self
                .http_ms_per_request
                .map_or(defaults.http_ms_per_request, NonZeroU64::get),
        }
    }
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
            .map(|(index, entry)| ExtensionConfig {
                path: base.join(entry.path),
                grants: entry.grants,
                limits: entry.limits.resolve(),
                config: serde_json::to_value(entry.config)
                    .unwrap_or_else(|_| serde_json::Value::Object(Default::default())),
                critical: entry.critical,
                policy: PolicyEntry {
                    allowed_hosts: entry.allowed_hosts,
                    storage: entry.storage,
                    env: entry.env,
                    redact: entry.redact,
                    base_dir: base.to_owned(),
                    origin: Some(EntryOrigin {
                        file: path.to_owned(),
                        index,
                    }),
                },
            })
            .collect();
        let mut prewarm = crate::jupyter::spares::SparePolicy::default();
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
        Ok(FileConfig {
            capabilities,
            cache_dir: tables.cache_dir.map(|dir| base.join(dir)),
            extensions,
            prewarm,
        })
    }
}
