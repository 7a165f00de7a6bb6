//! jupyter-mcp-server: an MCP server that lets AI agents read, edit and run Jupyter notebooks.
//!
//! The composition root: config, the MCP faces (stdio, Streamable HTTP, resources, prompts),
//! dispatch and the tools' declarations and presenters, over the core (`server_core`), the
//! Jupyter client (`jupyter_client`) and the wasm host (`wasm_host`).
//! Requests flow one way: transport → [`mcp`] → [`dispatch`] → [`tools`] → core → Jupyter.
//! See ARCHITECTURE.md for the map.

mod compose;
pub mod config;
pub mod dispatch;
pub mod logs;
pub mod mcp;
mod sandbox;
pub use sandbox::install_kernelspec;
pub mod startup;
pub mod tools;

use std::sync::Arc;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use config::{Config, JupyterSource, Transport};
use jupyter_client::Jupyter;
use jupyter_client::launcher::LaunchError;
use mcp::ServerState;
use server_core::domain::{self, Domain};
use server_core::{capabilities, hooks};

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Capability(#[from] capabilities::CapabilityError),
    #[error(transparent)]
    Launch(#[from] LaunchError),
    #[error(transparent)]
    Otel(#[from] hooks::otel::OtelFileError),
    #[error("the MCP transport failed: {0}")]
    Transport(String),
    #[error(transparent)]
    Http(#[from] mcp::http::HttpError),
    #[error(transparent)]
    Toolset(#[from] dispatch::UnknownToolNames),
    #[error("{0}")]
    GuestSettings(String),
    /// `--state-store` was asked for and cannot be used: serving without it would answer
    /// from this replica's memory alone.
    #[error("{0}")]
    StateStore(domain::executions::store::StoreError),
    #[error(
        "the extension {0} is granted notebook host functions, which Hub mode (--jupyterhub-url) \
         does not offer yet: a guest's host functions would not know whose notebooks to use; \
         drop its grants or serve it without Hub mode"
    )]
    HubGrants(String),
    #[error(transparent)]
    Trust(#[from] wasm_host::TrustError),
    #[error(
        "the extension {0} is granted a read-write directory, which Hub mode (--jupyterhub-url) \
         refuses: every user's calls would share it, so one user could leave data for another; \
         grant it with access = \"read\" or serve it without Hub mode"
    )]
    HubSharedStorage(String),
    /// `kernel.sandbox` is on where it cannot hold.
    #[error("{0}")]
    KernelSandbox(String),
}

/// `extension compile`: fills the compile cache ahead of time. Returns a line per guest
/// compiled, or the guests refused (each with its reason).
pub fn compile_extensions(args: config::CompileArgs) -> Result<Vec<String>, String> {
    let wasm = args.resolve().map_err(|e| e.to_string())?;
    if wasm.extensions.is_empty() {
        return Err(
            "no component to compile: give their paths, or --config with [[extension]] \
                    entries"
                .into(),
        );
    }
    {
        // `oci://` entries are pulled (and their signatures checked) as a start would.
        let mut wasm = wasm;
        let trust = wasm_host::Trust::load(&wasm.sources).map_err(|e| e.to_string())?;
        let pulling = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot start the async runtime: {e}"))?;
        pulling.block_on(pull_components(&mut wasm, &trust));
        let (mut compiled, mut refused) = (Vec::new(), Vec::new());
        for outcome in wasm_host::compile_all(&wasm)? {
            match outcome {
                Ok(line) => compiled.push(line),
                Err(e) => refused.push(e.to_string()),
            }
        }
        if refused.is_empty() {
            Ok(compiled)
        } else {
            Err(compiled
                .into_iter()
                .chain(refused)
                .collect::<Vec<_>>()
                .join("\n"))
        }
    }
}

/// Runs the server until its transport ends or it is told to stop, then stops what it started
/// (its kernels and, if it started one, the Jupyter Server).
pub async fn run(config: Config) -> Result<(), RunError> {
    // Settings that refuse to serve are refused before anything (guests, Jupyter) is started.
    let store = domain::executions::upkeep::open(config.state.clone(), config.state_store.as_ref())
        .map_err(RunError::StateStore)?;
    let hub = match &config.jupyter {
        JupyterSource::Hub(endpoints) => Some(endpoints.clone()),
        _ => None,
    };
    compose::refuse_unservable(&config, hub.is_some())?;
    let mut config = config;
    let mut guests = compose::Guests::prepare(&mut config, hub.is_some()).await?;
    let capabilities = guests.capabilities(&config)?;
    let hooks = compose::hooks(&config, &mut guests)?;
    // Held to the end: the sandboxed kernelspec is removed when it drops.
    let mut sandboxed = sandbox::prepare(&config, &capabilities)?;
    let own_specs = sandboxed.as_ref().and_then(|s| s.specs.as_ref());
    let (embedded, rest) = compose::reach_jupyter(&config, hub.is_some(), own_specs).await?;
    let (tools, catalog) = compose::tool_table(&config, &guests, &capabilities, hub.is_some())?;
    let mut settings = config.domain_settings();
    settings.store = store
        .clone()
        .map(domain::executions::records::Scope::server);
    let hub = hub.map(|endpoints| compose::hub_front(endpoints, &settings, &capabilities, &hooks));
    let mut jupyter = Jupyter::new(rest, hooks.clone());
    if sandboxed.as_ref().is_some_and(|s| s.specs.is_none()) {
        jupyter = jupyter.sandboxed_only(sandbox::INSTALL_COMMAND.into());
    }
    let domain = match (&hub, &embedded) {
        (Some(_), _) => Domain::detached(settings, jupyter, capabilities, hooks.clone()),
        // Ours answers in seconds; we serve meanwhile, and calls that need it wait.
        (None, Some(_)) => {
            let domain = Domain::detached(settings, jupyter, capabilities, hooks.clone());
            domain.jupyter_starting();
            domain
        }
        (None, None) => Domain::new(settings, jupyter, capabilities, hooks.clone()),
    };
    if let Some(sandboxed) = sandboxed.as_mut() {
        sandboxed.follow_egress(&domain, &hooks);
        sandboxed.follow_config(&domain);
    }
    let (guests, extensions, state) = guests.start(&config, domain.clone(), tools, catalog, hub);
    let stop = CancellationToken::new();
    let bringing_up = match embedded {
        Some(embedded) => Some(tokio::spawn(compose::bring_up(
            embedded,
            state.clone(),
            config.clone(),
            store.clone(),
            stop.child_token(),
        ))),
        None => {
            compose::on_jupyter(&state, &config, store.clone()).await;
            None
        }
    };
    let served = serve(state.clone(), config.transport, stop.clone());
    let (outcome, interrupted) = tokio::select! {
        outcome = served => (outcome, false),
        signal = shutdown_signal() => {
            tracing::info!("received {signal}; shutting down");
            (Ok(()), true)
        }
        failed = guests_loaded(&guests) => (Err(failed), true),
    };
    if interrupted {
        // Guests first: a call parked in one ends now, and the cleanup below fires no event
        // into them.
        guests.stop();
        extensions.stop();
    }
    // A Jupyter still coming up is not waited for.
    stop.cancel();
    let embedded = match bringing_up {
        Some(task) => task.await.ok().flatten(),
        None => None,
    };
    compose::stop_all(&state, domain, store.as_ref(), embedded).await;
    drop(sandboxed);
    // Last, so the spans of the stops above are written too.
    hooks.shutdown();
    outcome
}

/// Pulls the components the entries name by `oci://` reference (a tag at the digest the lock
/// file holds, when it holds one) and points the entries at their cached files. One that cannot
/// be pulled, or whose signature does not verify, is logged and left out; the others go on.
/// Returns each pulled file with its reference, digest and signer.
async fn pull_components(
    wasm_config: &mut config::WasmConfig,
    trust: &wasm_host::Trust,
) -> Vec<(std::path::PathBuf, wasm_host::PulledAtStart)> {
    if !wasm_config
        .extensions
        .iter()
        .any(|e| config::is_oci(&e.path))
    {
        return Vec::new();
    }
    let registries =
        wasm_host::Registries::new(&wasm_config.sources, wasm_config.cache_dir.clone());
    let mut pulled = Vec::new();
    let mut kept = Vec::new();
    for mut entry in std::mem::take(&mut wasm_config.extensions) {
        if config::is_oci(&entry.path) {
            let reference = entry.path.display().to_string();
            match registries.pull(&reference, trust, false).await {
                Ok(component) => {
                    entry.path = component.path.clone();
                    pulled.push((
                        component.path,
                        wasm_host::PulledAtStart {
                            reference,
                            digest: component.digest,
                            signed_by: component.signed_by,
                        },
                    ));
                }
                Err(e) => {
                    tracing::error!("{e}; the server goes on without it");
                    continue;
                }
            }
        }
        kept.push(entry);
    }
    wasm_config.extensions = kept;
    pulled
}

/// Resolves only when the guests have all loaded and the operator's settings name something
/// none of them declared: the server must not go on as if the setting had taken effect.
async fn guests_loaded(guests: &wasm_host::Loading) -> RunError {
    if let Err(e) = guests.finished().await {
        tracing::error!("{e}");
        return RunError::GuestSettings(e.to_string());
    }
    std::future::pending().await
}

async fn serve(
    state: Arc<ServerState>,
    transport: Transport,
    stop: CancellationToken,
) -> Result<(), RunError> {
    match transport {
        Transport::Stdio => {
            let (input, output) = mcp::stdio::standard_streams();
            let stdio = mcp::stdio::transport(input, output);
            // The one line a person starting us by hand looks for: everything is up.
            tracing::info!("serving MCP on stdio");
            let service = mcp::McpServer::new(state)
                .serve(stdio.transport)
                .await
                .map_err(|e| RunError::Transport(e.to_string()))?;
            let served = service
                .waiting()
                .await
                .map_err(|e| RunError::Transport(e.to_string()));
            tracing::info!("stdin closed; shutting down");
            // rmcp's replies are out once it is done; our own answers follow before we go.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(5), stdio.answers_written)
                .await;
            served.map(drop)
        }
        Transport::StreamableHttp => Ok(mcp::http::serve(state, stop).await?),
    }
}

/// Resolves on SIGTERM or Ctrl-C, naming which.
async fn shutdown_signal() -> &'static str {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return "Ctrl-C";
        }
    };
    tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = tokio::signal::ctrl_c() => "Ctrl-C",
    }
}
