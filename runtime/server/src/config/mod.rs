//! Every setting of the server: its flag, its environment variable and its default, in one place.
//!
//! Environment names follow the Python server where a setting is specific to this program
//! (`JUPYTER_URL`, `JUPYTER_TOKEN`, `MCP_TOKEN`, `JUPYTER_MCP_EXECUTION_TIMEOUT`, …); the rest are
//! `JUPYTER_MCP_<FLAG_NAME>`, because generic names such as `HOST` or `PORT` are often set by shells.

mod cli;
mod extensions;
mod file;
mod sandbox;
mod values;

use std::path::PathBuf;
use std::time::Duration;

use url::Url;

use jupyter_client::auth::{Auth, Secret};
use jupyter_client::hub::HubEndpoints;

pub use cli::{
    Cli, Command, CompileArgs, ConnectArgs, DocumentBackend, ExtensionAddArgs, ExtensionCommand,
    ExtensionNameArgs, GrantArgs, KernelSandboxCommand, KernelspecCommand, KernelspecInstallArgs,
    PolicyArgs, PythonServerArgs, RemoteArgs, SandboxCommand, SandboxRevokeArgs, SecretCommand,
    SecretFileArgs, SecretNameArgs, StartArgs, StopArgs, Transport, humane_duration,
};
pub use file::ExtensionEntry;
use file::FileConfig;
pub use sandbox::{CredentialSetting, KernelSandboxSettings};
pub use server_core::extensions::{
    ExtensionConfig, ExtensionSources, GrantPromptSettings, GuestLimits, WasmConfig, is_oci, policy,
};
pub use server_core::settings::{
    ExecutionLimits, OutputLimits, SharedStoreSettings, StateSettings,
};
pub use values::{parse_bool, parse_duration};

/// Where the server finds Jupyter.
#[derive(Debug, Clone)]
pub enum JupyterSource {
    /// A server someone else runs; `code_sandbox` when named by `--code-sandbox-url` (kernels on
    /// a gateway or code sandbox, not beside the user's notebooks).
    Remote {
        url: Url,
        auth: Auth,
        code_sandbox: bool,
    },
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
    /// Which kernel is started before the first call (`--start-new-code-sandbox`).
    pub kernel_at_start: KernelAtStart,
    pub document_backend: DocumentBackend,
    /// Capability settings from the environment and the command line (checked at start).
    pub capabilities: server_core::capabilities::Settings,
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
    pub prewarm: jupyter_client::spares::SparePolicy,
    /// Largest file read_file reads or write_file writes.
    pub max_file_bytes: u64,
    /// Which tools are exposed (`--tools`, `--exclude-tools`).
    pub toolset: ToolSelection,
    /// How kernels are started (`--kernel-start-timeout`, `--kernel-env`, `kernel_env`).
    pub kernel_start: jupyter_client::rest::KernelStart,
    /// Which code needs a person's yes while `execution.confirm` is on (`[execution_confirm]`).
    pub confirm: server_core::confirm::Rules,
    /// Where execution records outlive a restart (`--state-dir`; `None`: memory only).
    pub state: Option<StateSettings>,
    /// The Redis several replicas share the records in (`--state-store`), in place of the file.
    pub state_store: Option<SharedStoreSettings>,
    /// What a sandboxed kernel may reach (`[kernel_sandbox]`), while `kernel.sandbox` is on.
    pub kernel_sandbox: KernelSandboxSettings,
}

/// `--state-dir` resolved: `none` turns the store off; unset, the user's state directory
/// (`$XDG_STATE_HOME`, else `~/.local/state`), or none when neither is known.
fn state_dir(given: Option<PathBuf>, env: &impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    if let Some(dir) = given {
        return (dir.as_os_str() != "none").then_some(dir);
    }
    server_core::user_dirs::base_in(env, "XDG_STATE_HOME", ".local/state")
        .map(|b| b.join("jupyter-mcp-server"))
}

/// `--state-store` resolved: a Redis URL without a password, the credentials read from the
/// environment.
fn state_store(
    given: Option<String>,
    retention: Duration,
    env: &impl Fn(&str) -> Option<String>,
) -> Result<Option<SharedStoreSettings>, ConfigError> {
    let Some(given) = given.filter(|g| !g.trim().is_empty()) else {
        return Ok(None);
    };
    let refuse = |why: &str| {
        ConfigError::StateStore(format!(
            "--state-store {why}; it takes redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB]"
        ))
    };
    let mut url = url::Url::parse(given.trim()).map_err(|_| refuse("is not a URL"))?;
    if !matches!(url.scheme(), "redis" | "rediss") {
        return Err(refuse(&format!("names a {}:// store", url.scheme())));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(refuse("names no host"));
    }
    if url.password().is_some() {
        return Err(ConfigError::StateStore(
            "--state-store must not carry a password: a command line is visible to other \
             users of the machine. Give the URL without it and put the password in JUPYTER_MCP_STATE_STORE_PASSWORD (the user in \
             JUPYTER_MCP_STATE_STORE_USERNAME)"
                .into(),
        ));
    }
    let username = env("JUPYTER_MCP_STATE_STORE_USERNAME")
        .filter(|u| !u.is_empty())
        .or_else(|| (!url.username().is_empty()).then(|| url.username().to_owned()));
    let _ = url.set_username("");
    let password = env("JUPYTER_MCP_STATE_STORE_PASSWORD")
        .filter(|p| !p.is_empty())
        .map(jupyter_client::auth::Secret::new);
    Ok(Some(SharedStoreSettings {
        url,
        username,
        password,
        retention,
    }))
}

/// `--kernel-env` and `kernel_env` entries (the file's first, so the command line wins):
/// `KEY=VALUE`, or a bare `KEY` read from this server's environment.
fn kernel_env(
    entries: impl IntoIterator<Item = String>,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Vec<(String, String)>, ConfigError> {
    let mut resolved: Vec<(String, String)> = Vec::new();
    for entry in entries {
        let (key, value) = match entry.split_once('=') {
            Some((key, value)) => (key.trim().to_owned(), value.to_owned()),
            None => {
                let key = entry.trim().to_owned();
                let value = env(&key).ok_or_else(|| {
                    ConfigError::KernelEnv(format!(
                        "--kernel-env {key} passes this server's {key} variable, which is not \
                         set: set it, or write {key}=VALUE"
                    ))
                })?;
                (key, value)
            }
        };
        let valid = !key.is_empty()
            && !key.starts_with(|c: char| c.is_ascii_digit())
            && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            // Not echoed whole: the value may be a secret.
            return Err(ConfigError::KernelEnv(format!(
                "--kernel-env needs KEY=VALUE or KEY, with KEY made of letters, digits and '_' \
                 (not starting with a digit); got the key {key:?}"
            )));
        }
        resolved.retain(|(k, _)| *k != key);
        resolved.push((key, value));
    }
    Ok(resolved)
}

/// The operator's choice of tools; names are checked against the real tools at start.
#[derive(Debug, Clone, Default)]
pub struct ToolSelection {
    /// Only these (empty: all).
    pub only: Vec<String>,
    pub exclude: Vec<String>,
}

/// Names of a comma-separated list, trimmed, empty entries dropped.
/// The warning passwords and tokens get when they were given as a flag: a command line is
/// visible to other local users (`ps`, /proc), the environment is not.
pub fn warn_if_on_command_line(
    flag: &str,
    variable: &str,
    value: Option<&str>,
    env: &impl Fn(&str) -> Option<String>,
) -> bool {
    let given = value.is_some_and(|value| !value.is_empty());
    let from_command_line = given && env(variable).as_deref() != value;
    if from_command_line {
        tracing::warn!(
            "{flag} on the command line is visible to other local users; set {variable} in the \
             environment instead"
        );
    }
    from_command_line
}

fn clean_names(names: Vec<String>) -> Vec<String> {
    names
        .into_iter()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect()
}

/// Which kernel the server starts before its first call, as `--start-new-code-sandbox` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KernelAtStart {
    /// Not given: `--document-id`'s notebook gets its kernel at start, nothing else does.
    DocumentOnly,
    /// Given (true): the default kernel too, when there is no `--document-id`.
    Default,
    /// Given as false: no kernel at all until a call needs one.
    None,
}

#[derive(Debug, Clone)]
pub struct HttpConfig {
    /// Every route is under this path (`/`, or a Hub service's `/services/NAME/`).
    pub prefix: String,
    pub host: String,
    pub port: u16,
    /// `--listen-fd`: a listening socket to serve instead of binding host and port.
    pub listen_fd: Option<i32>,
    pub mcp_token: Option<String>,
    pub insecure_noauth: bool,
    pub allowed_origins: Vec<String>,
    pub allowed_hosts: Vec<String>,
    /// `--oauth-issuer`: access tokens of this issuer authenticate `/mcp` and `/api/`.
    pub oauth: Option<OAuthSettings>,
    /// `--start-new-code-sandbox` was given: `/api/healthz` then reports any current notebook's
    /// kernel, as the Python server does.
    pub code_sandbox: bool,
}

/// The OAuth resource server's settings; the client secret only from the environment.
#[derive(Debug, Clone)]
pub struct OAuthSettings {
    pub issuer: Url,
    pub audience: Option<String>,
    pub client_id: Option<String>,
    pub client_secret: Option<Secret>,
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
    #[error("{0}")]
    KernelEnv(String),
    #[error("{0}")]
    StateStore(String),
    #[error(
        "--execution-timeout ({default}s) is larger than --max-execution-timeout ({max}s); raise the maximum or lower the default"
    )]
    TimeoutAboveMax { default: u64, max: u64 },
}

impl Config {
    /// The slice of these settings the core's operations read (no execution store yet: the
    /// server opens it and sets it).
    pub fn domain_settings(&self) -> server_core::domain::Settings {
        server_core::domain::Settings {
            documents: self.documents.clone(),
            document_backend: self.document_backend,
            execution: self.execution,
            output: self.output,
            max_file_bytes: self.max_file_bytes,
            prewarm: self.prewarm,
            kernel_start: self.kernel_start.clone(),
            confirm: self.confirm.clone(),
            store: None,
        }
    }

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
        // A managed Hub service (or the server in Hub mode) is told where to listen. Anywhere
        // else JUPYTERHUB_SERVICE_URL is some other server's address (in a single-user pod, the
        // notebook server's `0.0.0.0`), and every interface is never a default.
        let service_url = (hub.is_some() || env("JUPYTERHUB_SERVICE_NAME").is_some())
            .then(|| env("JUPYTERHUB_SERVICE_URL").and_then(|u| Url::parse(&u).ok()))
            .flatten();
        let from_service = service_url
            .as_ref()
            .and_then(|u| u.host_str().map(|h| h.trim_matches(['[', ']']).to_owned()))
            .filter(|h| {
                let everywhere = matches!(h.as_str(), "0.0.0.0" | "::");
                if everywhere {
                    tracing::warn!(
                        "JUPYTERHUB_SERVICE_URL names every interface ({h}); listening on \
                         127.0.0.1 instead. Pass --host {h} to listen on every interface"
                    );
                }
                !everywhere
            });
        let host = args
            .host
            .clone()
            .or(from_service)
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
        // A secret whose value is not the environment's came from the command line, which
        // other local users can read in /proc.
        let on_command_line = [
            ("--mcp-token", "MCP_TOKEN", args.mcp_token.as_deref()),
            (
                "--jupyter-token",
                "JUPYTER_TOKEN",
                args.jupyter_token.as_deref(),
            ),
            (
                "--document-token",
                "DOCUMENT_TOKEN",
                args.document_token.as_deref(),
            ),
            (
                "--code-sandbox-token",
                "CODE_SANDBOX_TOKEN",
                python.code_sandbox_token.as_deref(),
            ),
            (
                "--jupyter-password",
                "JUPYTER_PASSWORD",
                python.jupyter_password.as_ref().map(Secret::expose),
            ),
            (
                "--document-password",
                "DOCUMENT_PASSWORD",
                python.document_password.as_ref().map(Secret::expose),
            ),
            (
                "--code-sandbox-password",
                "CODE_SANDBOX_PASSWORD",
                python.code_sandbox_password.as_ref().map(Secret::expose),
            ),
        ];
        for (flag, variable, value) in on_command_line {
            warn_if_on_command_line(flag, variable, value, &env);
        }
        // As in the Python server: the code sandbox runs kernels; --jupyter-url then holds the
        // notebooks, unless --document-url names another server. Without credentials of its
        // own it gets the shared --jupyter-token / --jupyter-password, as the code sandbox does.
        let documents = match (
            &args.document_url,
            &python.code_sandbox_url,
            &args.jupyter_url,
        ) {
            (Some(url), _, _) => Some((
                url.clone(),
                match (args.document_token, python.document_password) {
                    (None, None) => Auth::from_parts(
                        args.jupyter_token.clone(),
                        python.jupyter_password.clone(),
                    ),
                    (token, password) => Auth::from_parts(token, password),
                },
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
                true,
            )),
            None => args
                .jupyter_url
                .map(|url| (url, args.jupyter_token, python.jupyter_password, false)),
        };
        let jupyter = match (hub, kernels) {
            (Some(hub), _) => JupyterSource::Hub(hub),
            (None, kernels) => match kernels {
                Some((url, token, password, code_sandbox)) => JupyterSource::Remote {
                    url,
                    auth: Auth::from_parts(token, password),
                    code_sandbox,
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
            kernel_at_start: match python.start_new_code_sandbox {
                Some(true) => KernelAtStart::Default,
                Some(false) => KernelAtStart::None,
                None => KernelAtStart::DocumentOnly,
            },
            document_backend: args.document_backend,
            capabilities: server_core::capabilities::Settings {
                config: file.capabilities,
                env: env("JUPYTER_MCP_CAPABILITIES"),
                cli: args.capabilities,
            },
            otel_file: args.otel_file,
            otel_endpoint: args.otel_endpoint,
            execution: ExecutionLimits {
                default_timeout: Duration::from_secs(args.execution_timeout),
                max_timeout: Duration::from_secs(args.max_execution_timeout),
                keepalive: Duration::from_secs(args.progress_interval),
                memory_budget: usize::try_from(args.execution_memory_mb << 20)
                    .unwrap_or(usize::MAX),
            },
            output: OutputLimits {
                max_chars: args.max_output_chars,
                allow_images,
                max_image_px: args.max_image_px,
                max_image_megapixels: args.max_image_megapixels,
                max_images: args.max_images,
                link_images: args.images == cli::Images::Link,
            },
            http: HttpConfig {
                prefix,
                host,
                port,
                listen_fd: args.listen_fd,
                mcp_token: args.mcp_token.filter(|t| !t.is_empty()),
                insecure_noauth: args.insecure_mcp_noauth,
                allowed_origins: args.allowed_origins,
                allowed_hosts: args.allowed_hosts,
                oauth: args.oauth_issuer.map(|issuer| OAuthSettings {
                    issuer,
                    audience: args.oauth_audience.filter(|a| !a.trim().is_empty()),
                    client_id: env("OAUTH_CLIENT_ID").filter(|v| !v.is_empty()),
                    client_secret: env("OAUTH_CLIENT_SECRET")
                        .filter(|v| !v.is_empty())
                        .map(Secret::new),
                }),
                code_sandbox: python.start_new_code_sandbox == Some(true),
            },
            wasm: WasmConfig {
                cache_dir: file.cache_dir,
                extensions,
                sources: ExtensionSources {
                    extensions_dir: args.extensions_dir,
                    ..file.sources
                },
                // No place for secrets (no HOME) is not a reason to refuse a start: a guest
                // asking for one is told where to put it.
                secrets: server_core::secrets::SecretStore::at(args.secrets.secrets_file).ok(),
                grant_prompts: file.grant_prompts,
            },
            max_file_bytes: args.max_file_bytes,
            toolset: ToolSelection {
                only: clean_names(args.tools),
                exclude: clean_names(args.exclude_tools),
            },
            prewarm: file.prewarm,
            confirm: file.confirm,
            kernel_sandbox: file.kernel_sandbox,
            state_store: state_store(args.state_store, args.execution_retention, &env)?,
            state: state_dir(args.state_dir, &env).map(|dir| StateSettings {
                dir,
                retention: args.execution_retention,
                max_bytes: args.state_max_mb << 20,
            }),
            kernel_start: jupyter_client::rest::KernelStart {
                timeout: Duration::from_secs(args.kernel_start_timeout),
                env: kernel_env(file.kernel_env.into_iter().chain(args.kernel_env), &env)?,
            },
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
        (
            "--start-new-code-sandbox",
            python.start_new_code_sandbox == Some(true),
        ),
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

#[cfg(test)]
mod tests;
