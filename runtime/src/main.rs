//! The `jupyter-mcp-server` binary: parses the command line and hands over to the library.

use anyhow::Context;
use clap::Parser;
use jupyter_mcp_server::config::{Cli, Command, Config, ExtensionCommand, GrantArgs, RemoteArgs};
use jupyter_mcp_server::mcp::control::{extension_entry, remote_control};
use reqwest::Method;

fn main() -> anyhow::Result<()> {
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
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "jupyter_mcp_server=info,warn".into()),
        );
    let client = jupyter_mcp_server::mcp::logging::ClientLogLayer
        .with_filter(jupyter_mcp_server::mcp::logging::ClientLogLayer::filter());
    tracing_subscriber::registry()
        .with(stderr)
        .with(client)
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    match cli.command.unwrap_or(Command::Start(Box::new(cli.start))) {
        Command::Start(args) => {
            let config = Config::from_args(*args)?;
            let outcome = runtime.block_on(jupyter_mcp_server::run(config));
            // A blocking stdin read may still be pending; do not wait for it.
            runtime.shutdown_background();
            outcome?;
        }
        Command::Connect(args) => {
            let body = serde_json::json!({
                "jupyter_url": args.jupyter_url.as_str(),
                "jupyter_token": args.jupyter_token,
            });
            let path = "api/connect";
            control(
                &runtime,
                &args.remote,
                Method::PUT,
                path,
                Some(body),
                "connect",
            )?;
        }
        Command::Extension(ExtensionCommand::Compile(args)) => {
            let compiled = jupyter_mcp_server::compile_extensions(args)
                .map_err(anyhow::Error::msg)
                .context("extension compile failed")?;
            for line in compiled {
                eprintln!("{line}");
            }
        }
        Command::Extension(ExtensionCommand::Add(args)) => {
            let body = extension_entry(&args.path, &args.config_entries)
                .map_err(anyhow::Error::msg)
                .context("extension add failed")?;
            let path = "api/extensions";
            control(
                &runtime,
                &args.remote,
                Method::POST,
                path,
                Some(body),
                "extension add",
            )?;
        }
        Command::Extension(ExtensionCommand::Remove(args)) => {
            let path = format!("api/extensions/{}", args.name);
            control(
                &runtime,
                &args.remote,
                Method::DELETE,
                &path,
                None,
                "extension remove",
            )?;
        }
        Command::Extension(ExtensionCommand::Reload(args)) => {
            let path = format!("api/extensions/{}/reload", args.name);
            control(
                &runtime,
                &args.remote,
                Method::POST,
                &path,
                None,
                "extension reload",
            )?;
        }
        Command::Extension(ExtensionCommand::List(remote)) => {
            control(
                &runtime,
                &remote,
                Method::GET,
                "api/extensions",
                None,
                "extension list",
            )?;
        }
        Command::Grant(args) => change_policy(&runtime, args, "grant")?,
        Command::Revoke(args) => change_policy(&runtime, args, "revoke")?,
        Command::Policy(args) => {
            let path = format!("api/extensions/{}/policy", args.extension);
            control(&runtime, &args.server, Method::GET, &path, None, "policy")?;
        }
        Command::Stop(args) => {
            control(&runtime, &args, Method::DELETE, "api/stop", None, "stop")?;
        }
    }
    Ok(())
}

/// `grant` / `revoke`: one change of an extension's policy on a running server.
fn change_policy(
    runtime: &tokio::runtime::Runtime,
    args: GrantArgs,
    verb: &str,
) -> anyhow::Result<()> {
    let path = format!("api/extensions/{}/policy/{verb}", args.extension);
    let body = serde_json::json!({ "grant": args.grant });
    control(runtime, &args.server, Method::POST, &path, Some(body), verb)
}

/// One management request to a running server. Its answer (JSON) goes to stdout, so scripts can
/// read it; logs and failures go to stderr.
fn control(
    runtime: &tokio::runtime::Runtime,
    remote: &RemoteArgs,
    method: Method,
    path: &str,
    body: Option<serde_json::Value>,
    what: &str,
) -> anyhow::Result<()> {
    let call = remote_control(
        &remote.server_url,
        remote.mcp_token.as_deref(),
        method,
        path,
        body,
    );
    let answer = runtime
        .block_on(call)
        .map_err(anyhow::Error::msg)
        .with_context(|| format!("{what} failed"))?;
    println!("{answer}");
    Ok(())
}
