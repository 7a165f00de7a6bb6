//! The command line: subcommands and every flag of `start` with its environment variable and
//! default (clap derive). `Config::from_args` turns the parsed flags into the resolved settings.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};
use url::Url;

use jupyter_client::auth::Secret;

use super::values::{
    document_backends, parse_bool, parse_duration, parse_http_url, parse_secret,
    positive_megapixels,
};
pub use server_core::settings::{DocumentBackend, humane_duration};

/// Command line of the `jupyter-mcp-server` binary.
#[derive(Debug, Parser)]
#[command(
    name = "jupyter-mcp-server",
    version,
    about = "MCP server that lets AI agents read, edit and run Jupyter notebooks",
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,
    /// `start`'s flags are accepted without the subcommand too, as the Python server does.
    #[command(flatten)]
    pub start: StartArgs,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start the MCP server (the default).
    Start(Box<StartArgs>),
    /// Ask a running Streamable HTTP server to use another Jupyter Server.
    Connect(ConnectArgs),
    /// Ask a running Streamable HTTP server to shut down.
    Stop(StopArgs),
    /// Grant an extension a host function, host, directory or environment variable while the
    /// server runs (written to the config file; effective from the extension's next call).
    Grant(GrantArgs),
    /// Take a grant back from an extension while the server runs (written to the config file).
    Revoke(GrantArgs),
    /// Show an extension's policy on a running server.
    Policy(PolicyArgs),
    /// The hosts people allowed sandboxed kernels on a running server (`kernel.egress-prompts`).
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Work with WebAssembly extensions without starting the server.
    #[command(subcommand)]
    Extension(ExtensionCommand),
    /// Keep secrets for extensions (granted to one as `secret:NAME`) in a file only this user
    /// can read; a running server sees a change at the extension's next call.
    #[command(subcommand)]
    Secret(SecretCommand),
    /// Kernelspecs for a Jupyter you run yourself.
    #[command(subcommand)]
    Kernelspec(KernelspecCommand),
    /// The launcher sandboxed kernelspecs run, and the check a start with `kernel.sandbox` makes
    /// (run by the server and by Jupyter, not by hand).
    #[command(subcommand, hide = true)]
    KernelSandbox(KernelSandboxCommand),
}

#[derive(Debug, Subcommand)]
pub enum KernelSandboxCommand {
    /// Start a kernel confined: `run --policy P --connection-file F -- KERNEL ARGV...`.
    Run {
        #[arg(long, value_name = "PATH")]
        policy: PathBuf,
        #[arg(long, value_name = "PATH")]
        connection_file: PathBuf,
        /// The kernel's command line.
        #[arg(last = true, required = true)]
        kernel: Vec<std::ffi::OsString>,
    },
    /// Try the confinement on this machine; exit 0 when it holds, else say what is missing.
    Check {
        #[arg(long, value_name = "PATH")]
        policy: PathBuf,
    },
}

#[derive(Debug, Subcommand)]
pub enum KernelspecCommand {
    /// Write a kernelspec that runs a Python kernel in the kernel sandbox (what `kernel.sandbox`
    /// gives the server's own kernels), so a person in JupyterLab and the agent share one
    /// confined kernel. A server with `kernel.sandbox` on and `--jupyter-url` starts its kernels
    /// from it.
    Install(KernelspecInstallArgs),
}

#[derive(Debug, Clone, Args)]
pub struct KernelspecInstallArgs {
    /// The kernelspec's name.
    #[arg(long, default_value = "python3-sandboxed")]
    pub name: String,
    /// The name JupyterLab shows.
    #[arg(long, default_value = "Python 3 (sandboxed)")]
    pub display_name: String,
    /// Install for this user only (Jupyter's user data directory). Without it or --prefix: the
    /// environment of the kernel's Python, where that environment's Jupyter looks.
    #[arg(long, conflicts_with = "prefix")]
    pub user: bool,
    /// Install under DIR/share/jupyter/kernels.
    #[arg(long, value_name = "DIR")]
    pub prefix: Option<PathBuf>,
    /// The directory the kernels may write in (the Jupyter Server's root; default: the current
    /// directory).
    #[arg(long, value_name = "DIR")]
    pub root_dir: Option<PathBuf>,
    /// The server's config file, whose `[kernel_sandbox]` (hosts, write, deny_read) the
    /// kernelspec's policy takes.
    #[arg(long, env = "JUPYTER_MCP_CONFIG", value_name = "PATH")]
    pub config: Option<PathBuf>,
    /// The Python that runs the kernel (with ipykernel); default: the one beside `jupyter` on
    /// PATH.
    #[arg(long, value_name = "PATH")]
    pub python: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum SecretCommand {
    /// Set (or replace) a secret. Its value is read from standard input, never the command
    /// line: `printf %s "$TOKEN" | jupyter-mcp-server secret set NAME`, or typed at the prompt.
    Set(SecretNameArgs),
    /// List the secrets' names (never their values).
    List(SecretFileArgs),
    /// Remove a secret.
    Rm(SecretNameArgs),
}

/// Where the secrets are kept.
#[derive(Debug, Clone, Default, Args)]
pub struct SecretFileArgs {
    /// The secrets file (default `$XDG_CONFIG_HOME/jupyter-mcp-server/secrets.json`, else
    /// `~/.config/jupyter-mcp-server/secrets.json`); created 0600 in a 0700 folder.
    #[arg(long, env = "JUPYTER_MCP_SECRETS_FILE", value_name = "PATH")]
    pub secrets_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Args)]
pub struct SecretNameArgs {
    /// The secret's name (letters, digits, '_', '-', '.'), as in the grant `secret:NAME`.
    pub name: String,
    #[command(flatten)]
    pub file: SecretFileArgs,
}

#[derive(Debug, Subcommand)]
pub enum ExtensionCommand {
    /// Compile components into the compile cache ahead of time (for deploys), so the server's
    /// first start loads them at once instead of compiling them.
    Compile(CompileArgs),
    /// Load a component into a running Streamable HTTP server.
    Add(ExtensionAddArgs),
    /// Unload an extension from a running server (calls in flight finish first).
    Remove(ExtensionNameArgs),
    /// Load an extension's component anew (its file, or its OCI tag resolved again) in a
    /// running server; new calls go to the new instance, calls in flight finish on the old one.
    Reload(ExtensionNameArgs),
    /// List the extensions a running server has loaded.
    List(RemoteArgs),
}

/// How to reach a running server's management routes.
#[derive(Debug, Clone, Args)]
pub struct RemoteArgs {
    /// URL of the running MCP server, e.g. http://127.0.0.1:4040.
    #[arg(long, env = "JUPYTER_MCP_SERVER_URL", default_value = "http://127.0.0.1:4040", value_parser = parse_http_url)]
    pub server_url: Url,
    /// Bearer token of the MCP server.
    #[arg(long, env = "MCP_TOKEN", hide_env_values = true)]
    pub mcp_token: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ExtensionAddArgs {
    /// The component: a .wasm file (on the server's machine) or oci://REGISTRY/REPO:TAG
    /// (or @sha256:DIGEST).
    #[arg(value_name = "PATH|oci://…")]
    pub path: String,
    /// A line of its [[extension]] entry, in TOML; repeatable, e.g.
    /// --config-entry 'grants = ["read-cells"]' --config-entry 'config = { greeting = "hi" }'.
    #[arg(long = "config-entry", value_name = "TOML")]
    pub config_entries: Vec<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Clone, Args)]
pub struct ExtensionNameArgs {
    /// The extension's name (as `extension list` shows it).
    pub name: String,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

#[derive(Debug, Clone, Args)]
pub struct CompileArgs {
    /// The components (.wasm) to compile; without any, the [[extension]] entries of --config.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// The server's config file: its cache_dir is filled (else the default cache directory).
    #[arg(long, env = "JUPYTER_MCP_CONFIG")]
    pub config: Option<PathBuf>,
}

/// How results carry images (`--images`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Images {
    Inline,
    Link,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Transport {
    Stdio,
    StreamableHttp,
}

#[derive(Debug, Clone, Args)]
pub struct StartArgs {
    /// How MCP clients reach the server [default: stdio; streamable-http in Hub mode].
    #[arg(long, value_enum, env = "JUPYTER_MCP_TRANSPORT")]
    pub transport: Option<Transport>,

    /// Hub mode: serve every user of this JupyterHub (its public URL, e.g.
    /// http://hub.example.org/), each authenticated by their own Hub API token and routed to
    /// their own single-user server. Streamable HTTP only; --mcp-token is not needed.
    #[arg(long, env = "JUPYTERHUB_URL", value_parser = parse_http_url)]
    pub jupyterhub_url: Option<Url>,

    /// The Hub's REST API when it is not under --jupyterhub-url (a managed service gets it
    /// from the Hub).
    #[arg(long, env = "JUPYTERHUB_API_URL", value_parser = parse_http_url)]
    pub jupyterhub_api_url: Option<Url>,

    /// Hub mode: how long a user's server may take to start before the call that started it
    /// fails (the Hub may still finish starting it; the next call finds it).
    #[arg(
        long,
        env = "JUPYTERHUB_SPAWN_TIMEOUT",
        value_name = "SECONDS",
        default_value_t = 300,
        value_parser = clap::value_parser!(u64).range(1..=86_400)
    )]
    pub jupyterhub_spawn_timeout: u64,

    /// Path prefix every route is served under (a managed Hub service gets its
    /// /services/NAME/ from the Hub), so MCP is at PREFIX/mcp.
    #[arg(long, env = "JUPYTERHUB_SERVICE_PREFIX", value_name = "PREFIX")]
    pub jupyterhub_service_prefix: Option<String>,

    /// URL of the Jupyter Server to use. Without it the server starts its own on loopback.
    #[arg(long, env = "JUPYTER_URL", value_parser = parse_http_url)]
    pub jupyter_url: Option<Url>,

    /// Token of the Jupyter Server given by --jupyter-url.
    #[arg(long, env = "JUPYTER_TOKEN", hide_env_values = true)]
    pub jupyter_token: Option<String>,

    /// Jupyter Server holding the notebooks, when it is not the one running the kernels.
    #[arg(long, env = "DOCUMENT_URL", value_parser = parse_http_url)]
    pub document_url: Option<Url>,

    /// Token of the --document-url server.
    #[arg(long, env = "DOCUMENT_TOKEN", hide_env_values = true)]
    pub document_token: Option<String>,

    /// How notebooks are edited: through the contents API (file), a collaboration room (live),
    /// or live when the server offers collaboration (auto).
    #[arg(
        long,
        value_parser = document_backends(),
        env = "JUPYTER_MCP_DOCUMENT_BACKEND",
        default_value = "auto"
    )]
    pub document_backend: DocumentBackend,

    /// Write OpenTelemetry spans of tool calls, executions and kernel lifecycle to this JSONL file.
    #[arg(long, env = "JUPYTER_MCP_OTEL_FILE")]
    pub otel_file: Option<PathBuf>,

    /// Send spans to this OTLP/HTTP collector (e.g. http://127.0.0.1:4318). Never implied: spans
    /// carry code.
    #[arg(long, env = "JUPYTER_MCP_OTEL_ENDPOINT", value_parser = parse_http_url)]
    pub otel_endpoint: Option<Url>,

    /// A TOML config file: `[capabilities]` (`name = true|false`), `cache_dir` and
    /// `[[extension]]` entries (see README).
    #[arg(long, env = "JUPYTER_MCP_CONFIG")]
    pub config: Option<PathBuf>,

    /// Where extensions' secrets are read from (`jupyter-mcp-server secret set`).
    #[command(flatten)]
    pub secrets: SecretFileArgs,

    /// Load this WebAssembly component (hook handler or extension): a .wasm file or
    /// oci://REGISTRY/REPO:TAG (or @sha256:DIGEST); repeatable. Also JUPYTER_MCP_EXTENSIONS
    /// (paths separated by ':') and [[extension]] in --config.
    #[arg(long = "extension", value_name = "PATH")]
    pub extensions: Vec<PathBuf>,

    /// Watch this directory: a component (.wasm) added, replaced or removed there is loaded,
    /// reloaded or unloaded while the server runs.
    #[arg(long, env = "JUPYTER_MCP_EXTENSIONS_DIR", value_name = "DIR")]
    pub extensions_dir: Option<PathBuf>,

    /// Turn a capability on (NAME) or off (NAME=off); repeatable. See capabilities://.
    #[arg(long = "capability", value_name = "NAME[=VALUE]")]
    pub capabilities: Vec<String>,

    /// Root directory of the embedded Jupyter Server (default: the current directory).
    #[arg(long, env = "JUPYTER_MCP_ROOT_DIR")]
    pub root_dir: Option<PathBuf>,

    /// What the embedded Jupyter Server logs to our stderr (DEBUG, INFO, WARN, ERROR, CRITICAL).
    /// WARN keeps its routine chatter out of the way; INFO shows every request it serves.
    #[arg(long, env = "JUPYTER_MCP_JUPYTER_LOG_LEVEL", default_value = "WARN", value_parser = ["DEBUG", "INFO", "WARN", "ERROR", "CRITICAL"], ignore_case = true)]
    pub jupyter_log_level: String,

    /// Seconds an execution may run when a call asks for the default (timeout 0).
    #[arg(long, env = "JUPYTER_MCP_EXECUTION_TIMEOUT", default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub execution_timeout: u64,

    /// Seconds a kernel may take to start and first answer (a gateway scheduling a pod and
    /// pulling its image takes tens of seconds); past it the call fails saying so.
    #[arg(long, env = "JUPYTER_MCP_KERNEL_START_TIMEOUT", value_name = "SECONDS", default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub kernel_start_timeout: u64,

    /// Environment for the kernels this server starts, sent with each start request (how a
    /// gateway is told KERNEL_USERNAME, KERNEL_NAMESPACE, KERNEL_IMAGE…); repeatable, also
    /// `kernel_env` in --config. KEY=VALUE sets a value; a bare KEY passes this server's own
    /// KEY variable, so secrets stay off the command line.
    #[arg(long = "kernel-env", value_name = "KEY[=VALUE]")]
    pub kernel_env: Vec<String>,

    /// The longest a call may stay silent towards a client that asked for progress: past it the
    /// server says it is still working (clients give up on silent calls after a few minutes).
    #[arg(long, env = "JUPYTER_MCP_PROGRESS_INTERVAL", value_name = "SECONDS", default_value_t = 30, value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub progress_interval: u64,

    /// Upper bound, in seconds, for any execution timeout a call asks for.
    #[arg(long, env = "JUPYTER_MCP_MAX_EXECUTION_TIMEOUT", default_value_t = 3600, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_execution_timeout: u64,

    /// Characters of output text a tool result may carry before it is cut (0 = never cut).
    #[arg(long, env = "JUPYTER_MCP_MAX_OUTPUT_CHARS", default_value_t = 50_000)]
    pub max_output_chars: usize,

    /// While output.compact is on, images are scaled so their longer side is at most this many
    /// pixels.
    #[arg(long, env = "JUPYTER_MCP_MAX_IMAGE_PX", default_value_t = 1568, value_parser = clap::value_parser!(u32).range(16..))]
    pub max_image_px: u32,

    /// While output.compact is on, images are scaled to at most this many megapixels.
    #[arg(long, env = "JUPYTER_MCP_MAX_IMAGE_MEGAPIXELS", default_value_t = 1.15, value_parser = positive_megapixels)]
    pub max_image_megapixels: f64,

    /// While output.compact is on, at most this many images per result; a line names the rest.
    #[arg(long, env = "JUPYTER_MCP_MAX_IMAGES", default_value_t = 4)]
    pub max_images: usize,

    /// How results carry images: inline (base64 image content) or link (a resource_link to a
    /// resource serving the image, read with resources/read when the model needs it).
    #[arg(long, value_enum, env = "JUPYTER_MCP_IMAGES", default_value = "inline")]
    pub images: Images,

    /// Largest file, in bytes, that read_file reads or write_file writes.
    #[arg(long, env = "JUPYTER_MCP_MAX_FILE_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub max_file_bytes: u64,

    /// Where execution records outlive a restart: a private (0700) directory holding
    /// executions.redb; `none` keeps them in memory only [default:
    /// $XDG_STATE_HOME/jupyter-mcp-server, else ~/.local/state/jupyter-mcp-server].
    #[arg(long, env = "JUPYTER_MCP_STATE_DIR", value_name = "DIR|none")]
    pub state_dir: Option<PathBuf>,

    /// Keep execution records in Redis, shared by every replica given the same store:
    /// redis://HOST:PORT[/DB], or rediss:// for TLS. No password here (a command line is
    /// visible to other users): it is read from JUPYTER_MCP_STATE_STORE_PASSWORD (and the user
    /// from JUPYTER_MCP_STATE_STORE_USERNAME).
    #[arg(long, env = "JUPYTER_MCP_STATE_STORE", value_name = "URL")]
    pub state_store: Option<String>,

    /// How long an ended execution stays answerable (get_execution, list_executions,
    /// idempotency keys): a number with s, m, h or d (24h, 90m, 3600s).
    #[arg(long, env = "JUPYTER_MCP_EXECUTION_RETENTION", value_name = "DURATION", default_value = "24h", value_parser = parse_duration)]
    pub execution_retention: std::time::Duration,

    /// The most the execution store may hold, in MiB; past it the oldest ended records go first.
    #[arg(long, env = "JUPYTER_MCP_STATE_MAX_MB", value_name = "MIB", default_value_t = 256, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub state_max_mb: u64,

    /// The most output, in MiB, that ended execution records hold in memory together; past
    /// it the oldest runs' outputs leave memory (read back from the execution store when there
    /// is one, else replaced by a note saying where the whole output is).
    #[arg(long, env = "JUPYTER_MCP_EXECUTION_MEMORY_MB", value_name = "MIB", default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=1_048_576))]
    pub execution_memory_mb: u64,

    /// Expose only these tools (names, or the toolset `notebooks` for every core tool);
    /// extension tools count. An unknown name stops the server.
    #[arg(
        long = "tools",
        env = "JUPYTER_MCP_TOOLS",
        value_delimiter = ',',
        value_name = "NAME,..."
    )]
    pub tools: Vec<String>,

    /// Hide these tools (names or toolsets), after --tools.
    #[arg(
        long = "exclude-tools",
        env = "JUPYTER_MCP_EXCLUDE_TOOLS",
        value_delimiter = ',',
        value_name = "NAME,..."
    )]
    pub exclude_tools: Vec<String>,

    /// Address the Streamable HTTP transport binds to [default: 127.0.0.1, or the host of
    /// JUPYTERHUB_SERVICE_URL when the Hub runs us as a service].
    #[arg(long, env = "JUPYTER_MCP_HOST")]
    pub host: Option<String>,

    /// Port of the Streamable HTTP transport [default: 4040, or the port of
    /// JUPYTERHUB_SERVICE_URL when the Hub runs us as a service].
    #[arg(long, env = "JUPYTER_MCP_PORT")]
    pub port: Option<u16>,

    /// A listening TCP socket (file descriptor) handed over by the parent, served instead of
    /// binding --host/--port, so no other local user can take the port in between (the
    /// Jupyter extension starts its child so).
    #[arg(long, env = "JUPYTER_MCP_LISTEN_FD", value_name = "FD", hide = true)]
    pub listen_fd: Option<i32>,

    /// Bearer token MCP clients must present over Streamable HTTP.
    #[arg(long, env = "MCP_TOKEN", hide_env_values = true)]
    pub mcp_token: Option<String>,

    /// Serve Streamable HTTP without any authentication (only for trusted networks).
    #[arg(long, env = "INSECURE_MCP_NOAUTH", num_args = 0..=1, default_missing_value = "true",
          default_value = "false", value_parser = parse_bool)]
    pub insecure_mcp_noauth: bool,

    /// OAuth 2.1 authorization server whose access tokens authenticate Streamable HTTP (instead
    /// of --mcp-token); its client credentials for token introspection, when it needs them,
    /// come from OAUTH_CLIENT_ID and OAUTH_CLIENT_SECRET.
    #[arg(long, env = "JUPYTER_MCP_OAUTH_ISSUER", value_name = "URL")]
    pub oauth_issuer: Option<Url>,

    /// The resource tokens must be issued for (their `aud`) [default: this server's own /mcp
    /// URL].
    #[arg(long, env = "JUPYTER_MCP_OAUTH_AUDIENCE", value_name = "URL")]
    pub oauth_audience: Option<String>,

    /// An Origin allowed to call /mcp (repeatable), e.g. https://lab.example.org.
    #[arg(
        long = "allowed-origin",
        env = "JUPYTER_MCP_ALLOWED_ORIGINS",
        value_delimiter = ','
    )]
    pub allowed_origins: Vec<String>,

    /// A Host header value allowed on /mcp besides the loopback names (repeatable).
    #[arg(
        long = "allowed-host",
        env = "JUPYTER_MCP_ALLOWED_HOSTS",
        value_delimiter = ','
    )]
    pub allowed_hosts: Vec<String>,

    #[command(flatten)]
    pub python: PythonServerArgs,
}

/// Flags of the Python server, so configs written for it keep working.
#[derive(Debug, Clone, Args)]
pub struct PythonServerArgs {
    /// Password of the --jupyter-url server, for a Jupyter Server with password login (prefer
    /// the environment variable: a command line is visible to other local users).
    #[arg(long, env = "JUPYTER_PASSWORD", hide_env_values = true, value_parser = parse_secret)]
    pub jupyter_password: Option<Secret>,

    /// Password of the --document-url server.
    #[arg(long, env = "DOCUMENT_PASSWORD", hide_env_values = true, value_parser = parse_secret)]
    pub document_password: Option<Secret>,

    /// A notebook (path on the Jupyter Server) to open as 'default' at start, as use_notebook
    /// would in connect mode; nothing is created.
    #[arg(long, env = "DOCUMENT_ID", value_name = "PATH")]
    pub document_id: Option<String>,

    /// Start the default kernel at start instead of on first use. Given as false, not even
    /// --document-id's notebook gets a kernel until a call needs one (unset: only that one
    /// does, at start).
    #[arg(long, env = "START_NEW_CODE_SANDBOX", num_args = 0..=1, default_missing_value = "true",
          value_parser = parse_bool)]
    pub start_new_code_sandbox: Option<bool>,

    /// The server running kernels (the Python server's name): same as --jupyter-url, which then
    /// holds the notebooks if both are given.
    #[arg(long, env = "CODE_SANDBOX_URL", value_parser = parse_http_url)]
    pub code_sandbox_url: Option<Url>,

    /// Token of the --code-sandbox-url server.
    #[arg(long, env = "CODE_SANDBOX_TOKEN", hide_env_values = true)]
    pub code_sandbox_token: Option<String>,

    /// Password of the --code-sandbox-url server.
    #[arg(long, env = "CODE_SANDBOX_PASSWORD", hide_env_values = true, value_parser = parse_secret)]
    pub code_sandbox_password: Option<Secret>,
}

#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// Jupyter Server the MCP server should use from now on.
    #[arg(long, env = "JUPYTER_URL", value_parser = parse_http_url)]
    pub jupyter_url: Url,
    /// Token of that Jupyter Server.
    #[arg(long, env = "JUPYTER_TOKEN", hide_env_values = true)]
    pub jupyter_token: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
}

/// `stop` needs only where the server is.
pub type StopArgs = RemoteArgs;

#[derive(Debug, Clone, Args)]
pub struct GrantArgs {
    /// The extension's name (its identity; a hook-only guest's file name).
    pub extension: String,
    /// What to grant or revoke: a host function (`read-cells`, `read-cells:nb1`),
    /// `host:api.example.org`, `storage:data:read` / `storage:data:read-write`, `env:NAME`.
    pub grant: String,
    #[command(flatten)]
    pub server: RemoteArgs,
}

#[derive(Debug, Clone, Subcommand)]
pub enum SandboxCommand {
    /// List the hosts people allowed, each with the kernel, notebook and how long it holds.
    Hosts(RemoteArgs),
    /// Take back what people allowed for HOST (`host` or `host:port`); an "always" answer is
    /// taken out of the config's hosts too.
    Revoke(SandboxRevokeArgs),
}

#[derive(Debug, Clone, Args)]
pub struct SandboxRevokeArgs {
    pub host: String,
    #[command(flatten)]
    pub server: RemoteArgs,
}

#[derive(Debug, Clone, Args)]
pub struct PolicyArgs {
    /// The extension's name (its identity; a hook-only guest's file name).
    pub extension: String,
    #[command(flatten)]
    pub server: RemoteArgs,
}
