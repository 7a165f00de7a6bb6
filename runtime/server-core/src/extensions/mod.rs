//! The extensions the operator names, as settings the server's config fills and the wasm host
//! reads: `[[extension]]` entries and `--extension` paths, their limits and policies, and where
//! else components come from (registries, a watched folder) and whom they must be signed by.

pub mod policy;

use std::path::PathBuf;

/// Guests from `[[extension]]` entries, then `JUPYTER_MCP_EXTENSIONS`, then `--extension`.
#[derive(Debug, Clone, Default)]
pub struct WasmConfig {
    /// Compiled components are kept here (`cache_dir` in the config file; default
    /// `$XDG_CACHE_HOME/jupyter-mcp-server/wasm`, else `~/.cache/jupyter-mcp-server/wasm`).
    pub cache_dir: Option<PathBuf>,
    pub extensions: Vec<ExtensionConfig>,
    /// Where components come from besides the entries: registries, signatures, a watched folder.
    pub sources: ExtensionSources,
    /// The operator's secrets (`secret set`), which guests granted `secret:NAME` may read;
    /// `None` when there is no place for them (no HOME and no `--secrets-file`).
    pub secrets: Option<crate::secrets::SecretStore>,
    /// `[grant_prompts]`: what `extensions.grant-prompts` may ask the person for.
    pub grant_prompts: GrantPromptSettings,
}

/// `[grant_prompts]` as written: `never` (grants never asked for; checked when the server
/// starts) and `allow_always` (the person may grant for good, written to the config file).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantPromptSettings {
    pub never: Vec<String>,
    pub allow_always: bool,
}

/// Components from registries and a watched folder, and whose signatures they must carry.
#[derive(Debug, Clone, Default)]
pub struct ExtensionSources {
    /// `--extensions-dir`: components added, replaced or removed there are loaded, reloaded or
    /// unloaded while the server runs.
    pub extensions_dir: Option<PathBuf>,
    /// Where a tag's digest is written down (beside the config file; else in the cache dir).
    pub lock_file: Option<PathBuf>,
    /// Registries reached over plain HTTP though not on a loopback address.
    pub insecure_registries: Vec<String>,
    /// Public keys whose cosign signatures are trusted.
    pub trusted_keys: Vec<PathBuf>,
    /// Refuse components without a signature by one of `trusted_keys`.
    pub require_signatures: bool,
}

/// Whether an extension path is an OCI reference (`oci://REGISTRY/REPO:TAG|@DIGEST`).
pub fn is_oci(path: &std::path::Path) -> bool {
    path.to_str().is_some_and(|p| p.starts_with("oci://"))
}

/// One guest: an `[[extension]]` entry, or a bare path with the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtensionConfig {
    pub path: PathBuf,
    /// Host functions this guest may call (e.g. `read-cells`); every other one is refused.
    pub grants: Vec<String>,
    pub limits: GuestLimits,
    /// The `config` table, handed to the guest as this JSON object.
    pub config: serde_json::Value,
    /// `critical = true|false`: whether a failure of this hook handler fails the call it guards.
    /// The operator's word wins over the guest's `propagate-errors`; unset, the guest's applies.
    pub critical: Option<bool>,
    /// Hosts, directories and environment variables granted, and what spans never show.
    pub policy: policy::PolicyEntry,
}

impl ExtensionConfig {
    pub fn with_defaults(path: PathBuf) -> Self {
        ExtensionConfig {
            path,
            grants: Vec::new(),
            limits: GuestLimits::default(),
            config: serde_json::Value::Object(Default::default()),
            critical: None,
            policy: policy::PolicyEntry::empty(),
        }
    }
}

/// The `limits` table of an `[[extension]]` entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GuestLimits {
    /// Linear memory the guest may grow to, in MiB (default 128: room for the CPython guests).
    pub memory_mb: u64,
    /// CPU time one call may use, in ms, not counting time spent waiting on host functions
    /// (default 1000).
    pub cpu_ms_per_call: u64,
    /// Failed calls in a row (trap, timeout, out of memory) before the guest is switched off
    /// (default 5).
    pub max_consecutive_failures: u32,
    /// Wall-clock time one call may take, in ms, waits in WASI and in host functions included.
    /// Unset, each kind of call has its own default (a hook event 2 s, a tool call 120 s, the
    /// calls made while loading 10 s); set, it bounds every call.
    pub wall_ms_per_call: Option<u64>,
    /// The largest body of one outgoing HTTP request, in bytes (default 16 MiB).
    pub http_request_bytes: u64,
    /// The largest body of one HTTP response, in bytes (default 64 MiB).
    pub http_response_bytes: u64,
    /// The longest one HTTP exchange may take, connection to last byte, in ms (default 30 000).
    pub http_ms_per_request: u64,
}

impl Default for GuestLimits {
    fn default() -> Self {
        GuestLimits {
            memory_mb: 128,
            cpu_ms_per_call: 1000,
            max_consecutive_failures: 5,
            wall_ms_per_call: None,
            http_request_bytes: 16 << 20,
            http_response_bytes: 64 << 20,
            http_ms_per_request: 30_000,
        }
    }
}
