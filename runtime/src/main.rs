//! The `jupyter-mcp-server` binary: parses the command line and hands over to the library.

use anyhow::Context;
use clap::Parser;
use jupyter_mcp_server::config::{Cli, Command, Config};

fn main() -> anyhow::Result<()> {
    // Logs go to stderr: on the stdio transport stdout belongs to MCP alone.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "jupyter_mcp_server=info,warn".into()),
        )
        .init();
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("could not start the async runtime")?;
    match cli.command.unwrap_or(Command::Start(cli.start)) {
        Command::Start(args) => {
            let config = Config::from_args(args)?;
            let outcome = runtime.block_on(jupyter_mcp_server::run(config));
            // A blocking stdin read may still be pending; do not wait for it.
            runtime.shutdown_background();
            outcome?;
        }
        Command::Connect(_) | Command::Stop(_) => {
            anyhow::bail!(
                "`connect` and `stop` talk to a Streamable HTTP server, which this build does not serve yet"
            )
        }
    }
    Ok(())
}
