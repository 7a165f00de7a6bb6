//! The `jupyter-mcp-server` binary: parses the command line and hands over to the library.

use anyhow::Context;
use clap::Parser;
use jupyter_mcp_server::config::{Cli, Command, Config, ExtensionCommand, RemoteArgs};
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
            let call = remote_control(
                &args.server_url,
                args.mcp_token.as_deref(),
                Method::PUT,
                "api/connect",
                Some(body),
            );
            let answer = runtime
                .block_on(call)
                .map_err(anyhow::Error::msg)
                .context("connect failed")?;
            eprintln!("{answer}");
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
            manage(
                &runtime,
                &args.remote,
                Method::POST,
                "api/extensions",
                Some(body),
            )
            .context("extension add failed")?;
        }
        Command::Extension(ExtensionCommand::Remove(args)) => {
            let path = format!("api/extensions/{}", args.name);
            manage(&runtime, &args.remote, Method::DELETE, &path, None)
                .context("extension remove failed")?;
        }
        Command::Extension(ExtensionCommand::Reload(args)) => {
            let path = format!("api/extensions/{}/reload", args.name);
            manage(&runtime, &args.remote, Method::POST, &path, None)
                .context("extension reload failed")?;
        }
        Command::Extension(ExtensionCommand::List(remote)) => {
            manage(&runtime, &remote, Method::GET, "api/extensions", None)
                .context("extension list failed")?;
        }
        Command::Stop(args) => {
            let call = remote_control(
                &args.server_url,
                args.mcp_token.as_deref(),
                Method::DELETE,
                "api/stop",
                None,
            );
            let answer = runtime
                .block_on(call)
                .map_err(anyhow::Error::msg)
                .context("stop failed")?;
            eprintln!("{answer}");
        }
    }
    Ok(())
}

/// Sends one extension management request and prints the server's answer (JSON) on stdout.
fn manage(
    runtime: &tokio::runtime::Runtime,
    remote: &RemoteArgs,
    method: Method,
    path: &str,
    body: Option<serde_json::Value>,
) -> anyhow::Result<()> {
    let call = remote_control(
        &remote.server_url,
        remote.mcp_token.as_deref(),
        method,
        path,
        body,
    );
    let answer = runtime.block_on(call).map_err(anyhow::Error::msg)?;
    println!("{answer}");
    Ok(())
}
