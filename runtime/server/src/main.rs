//! The `jupyter-mcp-server` binary: parses the command line and hands over to the library.

use anyhow::Context;
use clap::Parser;
use jupyter_mcp_server::config::{
    Cli, Command, Config, ExtensionCommand, GrantArgs, KernelSandboxCommand, KernelspecCommand,
    RemoteArgs, SandboxCommand, SecretCommand, warn_if_on_command_line,
};
use jupyter_mcp_server::mcp::control::{extension_entry, remote_control};
use reqwest::Method;

/// A failure is printed as its reason and what to do (the error's own words, its causes after
/// it), never as a backtrace: RUST_BACKTRACE is for panics, not for a refused start.
fn main() -> std::process::ExitCode {
    release_big_blocks();
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("jupyter-mcp-server: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Big outputs (a run printing megabytes) are allocated and freed whole. With glibc's default
/// a freed big block raises the size under which blocks come from the heap, where freed
/// megabytes stay with the process and repeated big runs ratchet its memory up; a fixed
/// threshold keeps big blocks mapped on their own, so freeing one gives it back.
#[allow(unsafe_code)]
fn release_big_blocks() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter, before any other thread exists.
    unsafe {
        nix::libc::mallopt(nix::libc::M_MMAP_THRESHOLD, 512 << 10);
    }
}

fn run() -> anyhow::Result<()> {
    // Logs go to stderr (on the stdio transport stdout belongs to MCP alone), filtered by
    // RUST_LOG; this crate's lines raised while serving a client's request also go to that
    // client, at the level it asked for (a filter of their own).
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let stderr = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(
            std::env::var("RUST_LOG")
                .ok()
                .and_then(|filter| {
                    tracing_subscriber::EnvFilter::try_new(jupyter_mcp_server::logs::widen(&filter))
                        .ok()
                })
                .unwrap_or_else(|| {
                    jupyter_mcp_server::logs::widen("jupyter_mcp_server=info,warn").into()
                }),
        );
    let client = jupyter_mcp_server::mcp::logging::ClientLogLayer
        .with_filter(jupyter_mcp_server::mcp::logging::ClientLogLayer::filter());
    tracing_subscriber::registry()
        .with(stderr)
        .with(client)
        .init();
    let cli = Cli::parse();
    // The sandbox's launcher forks, which is sound only before any runtime thread exists.
    if let Some(Command::KernelSandbox(command)) = &cli.command {
        return match command {
            KernelSandboxCommand::Run {
                policy,
                connection_file,
                kernel,
            } => std::process::exit(kernel_sandbox::launch::run(policy, connection_file, kernel)),
            KernelSandboxCommand::Check { policy } => {
                let memory_cap = kernel_sandbox::check::check(policy)?;
                println!("{memory_cap}");
                Ok(())
            }
        };
    }
    if let Some(Command::Kernelspec(KernelspecCommand::Install(args))) = &cli.command {
        let said = jupyter_mcp_server::install_kernelspec(args)
            .map_err(anyhow::Error::msg)
            .context("kernelspec install failed")?;
        eprintln!("{said}");
        return Ok(());
    }
    // Tool calls are deep futures (transport, dispatch, hooks, confirmation, the domain, the
    // kernel); a debug build's frames are many times a release build's, so workers get room.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .thread_stack_size(8 * 1024 * 1024)
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    let call = match cli.command.unwrap_or(Command::Start(Box::new(cli.start))) {
        Command::Start(args) => {
            let config = Config::from_args(*args)?;
            let outcome = runtime.block_on(jupyter_mcp_server::run(config));
            // A blocking stdin read may still be pending; do not wait for it.
            runtime.shutdown_background();
            return Ok(outcome?);
        }
        Command::Extension(ExtensionCommand::Compile(args)) => {
            let compiled = jupyter_mcp_server::compile_extensions(args)
                .map_err(anyhow::Error::msg)
                .context("extension compile failed")?;
            for line in compiled {
                eprintln!("{line}");
            }
            return Ok(());
        }
        Command::Connect(args) => {
            warn_if_on_command_line(
                "--jupyter-token",
                "JUPYTER_TOKEN",
                args.jupyter_token.as_deref(),
                &|name| std::env::var(name).ok(),
            );
            let body = serde_json::json!({
                "jupyter_url": args.jupyter_url.as_str(),
                "jupyter_token": args.jupyter_token,
            });
            Control::new("connect", args.remote, Method::PUT, "api/connect").with_body(body)
        }
        Command::Extension(ExtensionCommand::Add(args)) => {
            let body = extension_entry(&args.path, &args.config_entries)
                .map_err(anyhow::Error::msg)
                .context("extension add failed")?;
            Control::new("extension add", args.remote, Method::POST, "api/extensions")
                .with_body(body)
        }
        Command::Extension(ExtensionCommand::Remove(args)) => {
            let path = format!("api/extensions/{}", args.name);
            Control::new("extension remove", args.remote, Method::DELETE, path)
        }
        Command::Extension(ExtensionCommand::Reload(args)) => {
            let path = format!("api/extensions/{}/reload", args.name);
            Control::new("extension reload", args.remote, Method::POST, path)
        }
        Command::Extension(ExtensionCommand::List(remote)) => {
            Control::new("extension list", remote, Method::GET, "api/extensions")
        }
        Command::Grant(args) => change_policy(args, "grant"),
        Command::Revoke(args) => change_policy(args, "revoke"),
        Command::Policy(args) => {
            let path = format!("api/extensions/{}/policy", args.extension);
            Control::new("policy", args.server, Method::GET, path)
        }
        Command::Sandbox(SandboxCommand::Hosts(remote)) => {
            Control::new("sandbox hosts", remote, Method::GET, "api/sandbox/hosts")
        }
        Command::Sandbox(SandboxCommand::Revoke(args)) => {
            let body = serde_json::json!({ "host": args.host });
            Control::new(
                "sandbox revoke",
                args.server,
                Method::POST,
                "api/sandbox/revoke",
            )
            .with_body(body)
        }
        Command::Stop(remote) => Control::new("stop", remote, Method::DELETE, "api/stop"),
        Command::Secret(command) => return secret(command),
        Command::KernelSandbox(_) | Command::Kernelspec(_) => {
            unreachable!("handled before the runtime starts")
        }
    };
    call.send(&runtime)
}

/// `secret set|list|rm`: the local secrets file, no server involved. Output names secrets,
/// never their values.
fn secret(command: SecretCommand) -> anyhow::Result<()> {
    use server_core::secrets::{SecretStore, read_value};
    use std::io::IsTerminal as _;
    match command {
        SecretCommand::Set(args) => {
            let store = SecretStore::at(args.file.secrets_file)?;
            server_core::secrets::check_name(&args.name)?;
            let stdin = std::io::stdin();
            let on_terminal = stdin.is_terminal();
            let value = read_value(&mut stdin.lock(), on_terminal)
                .with_context(|| format!("secret set {} failed", args.name))?;
            store
                .set(&args.name, &value)
                .with_context(|| format!("secret set {} failed", args.name))?;
            eprintln!(
                "secret {} set in {}; grant it to an extension as secret:{}",
                args.name,
                store.path().display(),
                args.name
            );
        }
        SecretCommand::List(file) => {
            let store = SecretStore::at(file.secrets_file)?;
            for name in store.names().context("secret list failed")? {
                println!("{name}");
            }
        }
        SecretCommand::Rm(args) => {
            let store = SecretStore::at(args.file.secrets_file)?;
            store
                .remove(&args.name)
                .with_context(|| format!("secret rm {} failed", args.name))?;
            eprintln!(
                "secret {} removed from {}",
                args.name,
                store.path().display()
            );
        }
    }
    Ok(())
}

/// `grant` / `revoke`: one change of an extension's policy on a running server.
fn change_policy(args: GrantArgs, verb: &'static str) -> Control {
    let path = format!("api/extensions/{}/policy/{verb}", args.extension);
    let body = serde_json::json!({ "grant": args.grant });
    Control::new(verb, args.server, Method::POST, path).with_body(body)
}

/// One management request to a running server, as a subcommand asks it.
struct Control {
    /// The subcommand, named when the request fails.
    what: &'static str,
    remote: RemoteArgs,
    method: Method,
    path: String,
    body: Option<serde_json::Value>,
}

impl Control {
    fn new(
        what: &'static str,
        remote: RemoteArgs,
        method: Method,
        path: impl Into<String>,
    ) -> Self {
        Control {
            what,
            remote,
            method,
            path: path.into(),
            body: None,
        }
    }

    fn with_body(self, body: serde_json::Value) -> Self {
        Control {
            body: Some(body),
            ..self
        }
    }

    /// Sends it. Its answer (JSON) goes to stdout, so scripts can read it; logs and failures go
    /// to stderr.
    fn send(self, runtime: &tokio::runtime::Runtime) -> anyhow::Result<()> {
        warn_if_on_command_line(
            "--mcp-token",
            "MCP_TOKEN",
            self.remote.mcp_token.as_deref(),
            &|name| std::env::var(name).ok(),
        );
        let call = remote_control(
            &self.remote.server_url,
            self.remote.mcp_token.as_deref(),
            self.method,
            &self.path,
            self.body,
        );
        let answer = runtime
            .block_on(call)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("{} failed", self.what))?;
        println!("{answer}");
        Ok(())
    }
}
