//! Every setting of the server: its flag, its environment variable and its default, in one place.
//!
//! Environment names follow the Python server where a setting is specific to this program
//! (`JUPYTER_URL`, `JUPYTER_TOKEN`, `MCP_TOKEN`, `JUPYTER_MCP_EXECUTION_TIMEOUT`, …); the rest are
//! `JUPYTER_MCP_<FLAG_NAME>`, because generic names such as `HOST` or `PORT` are often set by shells.

mod cli;
mod file;
pub mod policy;

use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use crate::jupyter::auth::Auth;
use crate::jupyter::hub::HubEndpoints;

pub use cli::{
    Cli, Command, CompileArgs, ConnectArgs, DocumentBackend, ExtensionCommand, PythonServerArgs,
    StartArgs, StopArgs, Transport, parse_bool,
};
use file::FileConfig;

/// Where the server finds Jupyter.
#[derive(Debug, Clone)]
pub enum JupyterSource {
    /// A server someone else runs.
    Remote { url: Url, auth: Auth },
    /// A server we start ourselves, rooted at this directory, logging at this level.
    Embedded {
        root_dir: PathBuf,
        log_level: String,
    },
    /// Hub mode: each user's own single-user server on this JupyterHub, with their token.
    Hub(HubEndpoints),
}

/// The resolved settings of a running server.
#[derive(Debug, Clone)]
pub struct Config {
    pub transport: Transport,
    pub jupyter: JupyterSource,
    /// A separate server for notebooks (`--document-url`), with its credentials.
    pub documents: Option<(Url, Auth)>,
    /// The notebook opened as 'default' at start (`--document-id`).
    pub default_notebook: Option<String>,
    /// Start the default kernel at start (`--start-new-code-sandbox`).
    pub start_default_kernel: bool,
    pub document_backend: DocumentBackend,
    /// Capability settings from the environment and the command line (checked at start).
    pub capabilities: crate::capabilities::Settings,
    /// Where the OpenTelemetry handler writes spans (off when `None`).
    pub otel_file: Option<PathBuf>,
    /// Where the OpenTelemetry handler sends spans over OTLP/HTTP (off when `None`).
    pub otel_endpoint: Option<Url>,
    pub execution: ExecutionLimits,
    pub output: OutputLimits,
    pub http: HttpConfig,
    /// The WebAssembly guests to load and where their compiled forms are cached.
    pub wasm: WasmConfig,
    /// Spare kernels while `kernel.prewarm` is on (`prewarm_max`, `prewarm_max_idle_seconds`).
    pub prewarm: crate::jupyter::spares::SparePolicy,
    /// Largest file read_file reads or write_file writes.
    pub max_file_bytes: u64,
    /// Which tools are exposed (`--tools`, `--exclude-tools`).
    pub toolset: ToolSelection,
}

/// The operator's choice of tools; names are checked against the real tools at start.
#[derive(Debug, Clone, Default)]
pub struct ToolSelection {
    /// Only these (empty: all).
    pub only: Vec<String>,
    pub exclude: Vec<String>,
}

/// Names of a comma-separated list, trimmed, empty entries dropped.
fn clean_names(names: Vec<String>) -> Vec<String> {
    names
        .into_iter()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Guests from `[[extension]]` entries, then `JUPYTER_MCP_EXTENSIONS`, then `--extension`.
#[derive(Debug, Clone, Default)]
pub struct WasmConfig {
    /// Compiled components are kept here (`cache_dir` in the config file; default
    /// `$XDG_CACHE_HOME/jupyter-mcp-server/wasm`, else `~/.cache/jupyter-mcp-server/wasm`).
    pub cache_dir: Option<PathBuf>,
    pub extensions: Vec<ExtensionConfig>,
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

#[derive(Debug, Clone, Copy)]
pub struct ExecutionLimits {
    pub default_timeout: Duration,
    pub max_timeout: Duration,
}

impl ExecutionLimits {
    /// The timeout a call gets: `0` means the configured default; anything is clamped to the maximum.
    pub fn resolve(&self, requested_secs: f64) -> Duration {
        if requested_secs.is_finite() && requested_secs > 0.0 {
            // Clamped before converting: 1e300 seconds is the maximum, not a panic.
            Duration::from_secs_f64(requested_secs.min(self.max_timeout.as_secs_f64()))
        } else {
            self.default_timeout.min(self.max_timeout)
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct OutputLimits {
    /// 0 disables cutting.
    pub max_chars: usize,
    pub allow_images: bool,
}

#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Every route is under this path (`/`, or a Hub service's `/services/NAME/`).
    pub prefix: String,
    pub host: String,
    pub port: u16,
    pub mcp_token: Option<String>,
    pub insecure_noauth: bool,
    pub allowed_origins: Vec<String>,
    pub allowed_hosts: Vec<String>,
}

/// A setting that cannot be used as given.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read the current directory to use as the Jupyter root: {0}")]
    CurrentDir(std::io::Error),
    #[error(
        "invalid value '{value}' for environment variable {name}: expected a boolean (true/false, yes/no, on/off, 1/0)"
    )]
    BadBoolEnv { name: &'static str, value: String },
    #[error("cannot read the config file {path}: {reason}")]
    ConfigFile { path: PathBuf, reason: String },
    #[error("{0}")]
    HubMode(String),
    #[error(
        "--execution-timeout ({default}s) is larger than --max-execution-timeout ({max}s); raise the maximum or lower the default"
    )]
    TimeoutAboveMax { default: u64, max: u64 },
}

impl Config {
    pub fn from_args(args: StartArgs) -> Result<Self, ConfigError> {
        Self::from_args_and_env(args, |name| std::env::var(name).ok())
    }

    /// Like [`Config::from_args`] with the environment given explicitly (for tests).
    pub fn from_args_and_env(
        args: StartArgs,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        if args.execution_timeout > args.max_execution_timeout {
            return Err(ConfigError::TimeoutAboveMax {
                default: args.execution_timeout,
                max: args.max_execution_timeout,
            });
        }
        let hub = hub_mode(&args)?;
        let transport = match (args.transport, &hub) {
            (Some(Transport::Stdio), Some(_)) => {
                return Err(ConfigError::HubMode(
                    "Hub mode (--jupyterhub-url) serves Streamable HTTP only: drop --transport \
                     stdio, or use --transport streamable-http"
                        .into(),
                ));
            }
            (Some(transport), _) => transport,
            (None, Some(_)) => Transport::StreamableHttp,
            (None, None) => Transport::Stdio,
        };
        // A managed Hub service is told where to listen.
        let service_url = env("JUPYTERHUB_SERVICE_URL").and_then(|u| Url::parse(&u).ok());
        let host = args
            .host
            .clone()
            .or_else(|| {
                service_url
                    .as_ref()
                    .and_then(|u| u.host_str().map(str::to_owned))
            })
            .unwrap_or_else(|| "127.0.0.1".into());
        let port = args
            .port
            .or_else(|| service_url.as_ref().and_then(Url::port_or_known_default))
            .unwrap_or(4040);
        let prefix = match args.jupyterhub_service_prefix.as_deref().map(str::trim) {
            None | Some("") => "/".to_owned(),
            Some(prefix) => format!("/{}/", prefix.trim_matches('/')).replace("//", "/"),
        };
        let python = args.python;
        // A value that is not in the environment came from the command line, which other local
        // users can read in /proc.
        for (flag, variable, given) in [
            (
                "--jupyter-password",
                "JUPYTER_PASSWORD",
                python.jupyter_password.is_some(),
            ),
            (
                "--document-password",
                "DOCUMENT_PASSWORD",
                python.document_password.is_some(),
            ),
            (
                "--code-sandbox-password",
                "CODE_SANDBOX_PASSWORD",
                python.code_sandbox_password.is_some(),
            ),
        ] {
            if given && env(variable).is_none() {
                tracing::warn!(
                    "{flag} on the command line is visible to other local users; set {variable} instead"
                );
            }
        }
        // As in the Python server: the code sandbox runs kernels; --jupyter-url then holds the
        // notebooks, unless --document-url names another server.
        let documents = match (
            &args.document_url,
            &python.code_sandbox_url,
            &args.jupyter_url,
        ) {
            (Some(url), _, _) => Some((
                url.clone(),
                Auth::from_parts(args.document_token, python.document_password),
            )),
            (None, Some(sandbox), Some(jupyter)) if sandbox != jupyter => Some((
                jupyter.clone(),
                Auth::from_parts(args.jupyter_token.clone(), python.jupyter_password.clone()),
            )),
            _ => None,
        };
        let kernels = match python.code_sandbox_url {
            Some(url) => Some((
                url,
                python.code_sandbox_token.or(args.jupyter_token),
                python.code_sandbox_password.or(python.jupyter_password),
            )),
            None => args
                .jupyter_url
                .map(|url| (url, args.jupyter_token, python.jupyter_password)),
        };
        let jupyter = match (hub, kernels) {
            (Some(hub), _) => JupyterSource::Hub(hub),
            (None, kernels) => match kernels {
                Some((url, token, password)) => JupyterSource::Remote {
                    url,
                    auth: Auth::from_parts(token, password),
                },
                None => JupyterSource::Embedded {
                    root_dir: match args.root_dir {
                        Some(dir) => dir,
                        None => std::env::current_dir().map_err(ConfigError::CurrentDir)?,
                    },
                    log_level: args.jupyter_log_level.to_ascii_uppercase(),
                },
            },
        };
        let file = match &args.config {
            Some(path) => FileConfig::read(path)?,
            None => FileConfig::default(),
        };
        let mut extensions = file.extensions;
        let from_env = env("JUPYTER_MCP_EXTENSIONS").unwrap_or_default();
        let paths = from_env
            .split(':')
            .filter(|p| !p.trim().is_empty())
            .map(|p| PathBuf::from(p.trim()))
            .chain(args.extensions);
        extensions.extend(paths.map(ExtensionConfig::with_defaults));
        let allow_images = match env("ALLOW_IMG_OUTPUT") {
            None => true,
            Some(value) => parse_bool(&value).map_err(|_| ConfigError::BadBoolEnv {
                name: "ALLOW_IMG_OUTPUT",
                value,
            })?,
        };
        Ok(Config {
            transport,
            jupyter,
            documents,
            default_notebook: python.document_id.filter(|p| !p.trim().is_empty()),
            start_default_kernel: python.start_new_code_sandbox,
            document_backend: args.document_backend,
            capabilities: crate::capabilities::Settings {
                config: file.capabilities,
                env: env("JUPYTER_MCP_CAPABILITIES"),
                cli: args.capabilities,
            },
            otel_file: args.otel_file,
            otel_endpoint: args.otel_endpoint,
            execution: ExecutionLimits {
                default_timeout: Duration::from_secs(args.execution_timeout),
                max_timeout: Duration::from_secs(args.max_execution_timeout),
            },
            output: OutputLimits {
                max_chars: args.max_output_chars,
                allow_images,
            },
            http: HttpConfig {
                prefix,
                host,
                port,
                mcp_token: args.mcp_token.filter(|t| !t.is_empty()),
                insecure_noauth: args.insecure_mcp_noauth,
                allowed_origins: args.allowed_origins,
                allowed_hosts: args.allowed_hosts,
            },
            wasm: WasmConfig {
                cache_dir: file.cache_dir,
                extensions,
            },
            max_file_bytes: args.max_file_bytes,
            toolset: ToolSelection {
                only: clean_names(args.tools),
                exclude: clean_names(args.exclude_tools),
            },
            prewarm: file.prewarm,
        })
    }
}

/// Hub mode's endpoints when `--jupyterhub-url` is given; flags that name one Jupyter Server or
/// act on it at start make no sense with many users, and are refused.
fn hub_mode(args: &StartArgs) -> Result<Option<HubEndpoints>, ConfigError> {
    let Some(url) = args.jupyterhub_url.clone() else {
        return Ok(None);
    };
    let python = &args.python;
    for (flag, given) in [
        ("--jupyter-url", args.jupyter_url.is_some()),
        ("--document-url", args.document_url.is_some()),
        ("--code-sandbox-url", python.code_sandbox_url.is_some()),
        ("--document-id", python.document_id.is_some()),
        ("--start-new-code-sandbox", python.start_new_code_sandbox),
    ] {
        if given {
            return Err(ConfigError::HubMode(format!(
                "{flag} cannot be used in Hub mode (--jupyterhub-url): each user works on their \
                 own server on the Hub; drop {flag}"
            )));
        }
    }
    let mut endpoints = HubEndpoints::new(url, args.jupyterhub_api_url.clone());
    endpoints.spawn_limit = std::time::Duration::from_secs(args.jupyterhub_spawn_timeout);
    Ok(Some(endpoints))
}

impl CompileArgs {
    /// The guests to compile and where their compiled forms go, as the server would see them.
    pub fn resolve(self) -> Result<WasmConfig, ConfigError> {
        let file = match &self.config {
            Some(path) => FileConfig::read(path)?,
            None => FileConfig::default(),
        };
        let extensions = if self.paths.is_empty() {
            file.extensions
        } else {
            self.paths
                .into_iter()
                .map(ExtensionConfig::with_defaults)
                .collect()
        };
        Ok(WasmConfig {
            cache_dir: file.cache_dir,
            extensions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn start_args(argv: &[&str]) -> StartArgs {
        let mut full = vec!["jupyter-mcp-server", "start"];
        full.extend_from_slice(argv);
        match Cli::try_parse_from(full).unwrap().command {
            Some(Command::Start(args)) => *args,
            other => panic!("expected start, got {other:?}"),
        }
    }

    #[test]
    fn booleans_follow_the_python_server() {
        for yes in ["1", "true", "T", "yes", "y", "ON"] {
            assert_eq!(parse_bool(yes), Ok(true), "{yes}");
        }
        for no in ["0", "false", "f", "No", "n", "off"] {
            assert_eq!(parse_bool(no), Ok(false), "{no}");
        }
        assert!(parse_bool("maybe").unwrap_err().contains("maybe"));
    }

    #[test]
    fn timeouts_resolve_and_clamp() {
        let limits = ExecutionLimits {
            default_timeout: Duration::from_secs(120),
            max_timeout: Duration::from_secs(3600),
        };
        assert_eq!(limits.resolve(0.0), Duration::from_secs(120));
        assert_eq!(limits.resolve(30.0), Duration::from_secs(30));
        assert_eq!(limits.resolve(99_999.0), Duration::from_secs(3600));
        assert_eq!(limits.resolve(-5.0), Duration::from_secs(120));
    }

    #[test]
    fn defaults_and_embedded_jupyter() {
        let config = Config::from_args_and_env(start_args(&[]), |_| None).unwrap();
        assert_eq!(config.transport, Transport::Stdio);
        assert!(matches!(config.jupyter, JupyterSource::Embedded { .. }));
        assert_eq!(config.execution.default_timeout, Duration::from_secs(120));
        assert_eq!(config.execution.max_timeout, Duration::from_secs(3600));
        assert_eq!(config.output.max_chars, 50_000);
        assert!(config.output.allow_images);
        assert_eq!(config.http.port, 4040);
    }

    #[test]
    fn image_output_can_be_switched_off() {
        let config = Config::from_args_and_env(start_args(&[]), |n| {
            (n == "ALLOW_IMG_OUTPUT").then(|| "false".into())
        })
        .unwrap();
        assert!(!config.output.allow_images);
        let err =
            Config::from_args_and_env(start_args(&[]), |_| Some("perhaps".into())).unwrap_err();
        assert!(err.to_string().contains("ALLOW_IMG_OUTPUT"));
    }

    #[test]
    fn hub_mode_serves_http_under_the_service_environment() {
        let env = |name: &str| {
            (name == "JUPYTERHUB_SERVICE_URL").then(|| "http://127.0.0.1:10101".to_owned())
        };
        let config = Config::from_args_and_env(
            start_args(&[
                "--jupyterhub-url",
                "http://127.0.0.1:8000",
                "--jupyterhub-service-prefix",
                "/services/mcp",
            ]),
            env,
        )
        .unwrap();
        assert_eq!(config.transport, Transport::StreamableHttp);
        assert_eq!(
            (config.http.host.as_str(), config.http.port),
            ("127.0.0.1", 10101)
        );
        assert_eq!(config.http.prefix, "/services/mcp/");
        let JupyterSource::Hub(hub) = config.jupyter else {
            panic!("Hub mode expected");
        };
        assert_eq!(hub.api.as_str(), "http://127.0.0.1:8000/hub/api/");
        // Our own flags win over the service's address.
        let config = Config::from_args_and_env(
            start_args(&["--jupyterhub-url", "http://h:8000", "--port", "5000"]),
            env,
        )
        .unwrap();
        assert_eq!(config.http.port, 5000);
        assert_eq!(config.http.prefix, "/");
    }

    #[test]
    fn hub_mode_refuses_single_server_flags() {
        for extra in [
            &["--transport", "stdio"][..],
            &["--jupyter-url", "http://127.0.0.1:8888"],
            &["--document-id", "a.ipynb"],
            &["--start-new-code-sandbox"],
        ] {
            let mut argv = vec!["--jupyterhub-url", "http://127.0.0.1:8000"];
            argv.extend_from_slice(extra);
            let error = Config::from_args_and_env(start_args(&argv), |_| None).unwrap_err();
            assert!(error.to_string().contains("Hub mode"), "{error}");
        }
    }

    #[test]
    fn bad_values_are_refused() {
        assert!(Cli::try_parse_from(["x", "start", "--transport", "carrier-pigeon"]).is_err());
        assert!(Cli::try_parse_from(["x", "start", "--jupyter-url", "ftp://h"]).is_err());
        assert!(Cli::try_parse_from(["x", "start", "--execution-timeout", "0"]).is_err());
        assert!(Cli::try_parse_from(["x", "start", "--no-such-flag"]).is_err());
        let err = Config::from_args_and_env(
            start_args(&[
                "--execution-timeout",
                "100",
                "--max-execution-timeout",
                "10",
            ]),
            |_| None,
        )
        .unwrap_err();
        assert!(err.to_string().contains("--max-execution-timeout"));
    }

    #[test]
    fn config_file_capabilities() {
        let dir =
            std::env::temp_dir().join(format!("jmcp-config-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let good = dir.join("good.toml");
        std::fs::write(&good, "[capabilities]\n\"kernel.auto-restart\" = true\n").unwrap();
        let config =
            Config::from_args_and_env(start_args(&["--config", good.to_str().unwrap()]), |_| None)
                .unwrap();
        assert_eq!(
            config.capabilities.config,
            vec![("kernel.auto-restart".to_owned(), true)]
        );
        std::fs::write(
            &good,
            "cache_dir = \"cache\"\n[[extension]]\npath = \"policy.wasm\"\ngrants = [\"read-cells\"]\n\
             limits = { memory_mb = 32, wall_ms_per_call = 500 }\nconfig = { deny = [\"rm -rf\"] }\n\
             critical = false\n",
        )
        .unwrap();
        let config = Config::from_args_and_env(
            start_args(&["--config", good.to_str().unwrap(), "--extension", "b.wasm"]),
            |n| (n == "JUPYTER_MCP_EXTENSIONS").then(|| "a1.wasm:a2.wasm".into()),
        )
        .unwrap();
        assert_eq!(config.wasm.cache_dir, Some(dir.join("cache")));
        let paths: Vec<_> = config
            .wasm
            .extensions
            .iter()
            .map(|e| e.path.clone())
            .collect();
        assert_eq!(
            paths,
            [
                dir.join("policy.wasm"),
                "a1.wasm".into(),
                "a2.wasm".into(),
                "b.wasm".into()
            ]
        );
        let policy = &config.wasm.extensions[0];
        assert_eq!(policy.grants, ["read-cells"]);
        assert_eq!(policy.limits.memory_mb, 32);
        assert_eq!(policy.limits.cpu_ms_per_call, 1000);
        assert_eq!(policy.limits.wall_ms_per_call, Some(500));
        assert_eq!(policy.critical, Some(false));
        assert_eq!(config.wasm.extensions[1].critical, None);
        assert_eq!(policy.config, serde_json::json!({"deny": ["rm -rf"]}));
        std::fs::write(&good, "[[extension]]\ngrants = []\n").unwrap();
        let err =
            Config::from_args_and_env(start_args(&["--config", good.to_str().unwrap()]), |_| None)
                .unwrap_err();
        assert!(err.to_string().contains("missing field `path`"), "{err}");
        std::fs::write(
            &good,
            "[[extension]]\npath = \"a.wasm\"\nlimits = { memory_mb = 0 }\n",
        )
        .unwrap();
        let err =
            Config::from_args_and_env(start_args(&["--config", good.to_str().unwrap()]), |_| None)
                .unwrap_err();
        assert!(err.to_string().contains("nonzero"), "{err}");
        let bad = dir.join("bad.toml");
        std::fs::write(&bad, "[capabilities]\nx = \"yes\"\n").unwrap();
        let err =
            Config::from_args_and_env(start_args(&["--config", bad.to_str().unwrap()]), |_| None)
                .unwrap_err();
        assert!(err.to_string().contains("true or false"), "{err}");
        std::fs::write(&bad, "cache_dirr = \"/tmp\"\n").unwrap();
        let err =
            Config::from_args_and_env(start_args(&["--config", bad.to_str().unwrap()]), |_| None)
                .unwrap_err();
        assert!(
            err.to_string().contains("unknown field `cache_dirr`"),
            "{err}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn python_server_flags_map_to_ours() {
        let config = Config::from_args_and_env(
            start_args(&[
                "--code-sandbox-url",
                "http://127.0.0.1:9001",
                "--jupyter-url",
                "http://127.0.0.1:9002",
                "--document-id",
                "work/a.ipynb",
                "--start-new-code-sandbox",
            ]),
            |_| None,
        )
        .unwrap();
        match &config.jupyter {
            JupyterSource::Remote { url, .. } => assert_eq!(url.port(), Some(9001)),
            other => panic!("{other:?}"),
        }
        assert_eq!(config.documents.as_ref().unwrap().0.port(), Some(9002));
        assert_eq!(config.default_notebook.as_deref(), Some("work/a.ipynb"));
        assert!(config.start_default_kernel);
        let plain = Config::from_args_and_env(
            start_args(&["--jupyter-url", "http://127.0.0.1:9002"]),
            |_| None,
        )
        .unwrap();
        assert!(plain.documents.is_none() && !plain.start_default_kernel);
        let args = start_args(&["--start-new-code-sandbox", "false"]);
        assert!(!args.python.start_new_code_sandbox);
    }

    #[test]
    fn start_flags_work_without_the_subcommand() {
        let cli = Cli::try_parse_from(["x", "--jupyter-url", "http://127.0.0.1:8888"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(
            cli.start.jupyter_url.unwrap().as_str(),
            "http://127.0.0.1:8888/"
        );
    }
}
