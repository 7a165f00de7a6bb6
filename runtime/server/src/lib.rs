//! jupyter-mcp-server: an MCP server that lets AI agents read, edit and run Jupyter notebooks.
//!
//! The composition root: config, the MCP faces (stdio, Streamable HTTP, resources, prompts),
//! dispatch and the tools' declarations and presenters, over the core (`server_core`), the
//! Jupyter client (`jupyter_client`) and the wasm host (`wasm_host`).
//! Requests flow one way: transport → [`mcp`] → [`dispatch`] → [`tools`] → core → Jupyter.
//! See ARCHITECTURE.md for the map.

pub mod config;
pub mod dispatch;
pub mod logs;
pub mod mcp;
pub mod startup;
pub mod tools;

use std::sync::Arc;

use rmcp::ServiceExt;
use tokio_util::sync::CancellationToken;

use config::{Config, JupyterSource, Transport};
use dispatch::ToolRegistry;
use jupyter_client::Jupyter;
use jupyter_client::launcher::{EmbeddedJupyter, LaunchError};
use jupyter_client::rest::JupyterRest;
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
    if matches!(config.transport, Transport::StreamableHttp) {
        mcp::http::check_auth(&config.http, hub.is_some())?;
    }
    // Hub mode refuses host functions (they would not know whose notebooks to use); talking
    // to the call's own client and the operator's secrets cross no user.
    let crosses_users = |grant: &String| {
        !matches!(grant.as_str(), "elicit" | "sample") && !grant.starts_with("secret:")
    };
    if hub.is_some()
        && let Some(guest) = config
            .wasm
            .extensions
            .iter()
            .find(|e| e.grants.iter().any(crosses_users))
    {
        return Err(RunError::HubGrants(guest.path.display().to_string()));
    }
    if hub.is_some()
        && let Some(guest) = config.wasm.extensions.iter().find(|e| {
            e.policy
                .storage
                .iter()
                .any(|s| s.access == config::policy::Access::ReadWrite)
        })
    {
        return Err(RunError::HubSharedStorage(guest.path.display().to_string()));
    }
    // Guests are read and checked now (milliseconds), compiled once the server serves; what
    // they declared at an earlier start is known at once.
    let link = Arc::new(wasm_host::HostLink::default());
    if let Some(store) = config.wasm.secrets.clone() {
        link.provide_secrets(Arc::new(store));
    }
    link.provide_prompt_rules(
        wasm_host::PromptRules::new(
            config.wasm.grant_prompts.never.clone(),
            config.wasm.grant_prompts.allow_always,
            hub.is_some(),
        )
        .map_err(RunError::GuestSettings)?,
    );
    // Unreadable trusted keys stop us: nothing may load unchecked.
    let trust = wasm_host::Trust::load(&config.wasm.sources)?;
    // Components from registries are pulled (or found in the cache by digest) first.
    let mut config = config;
    let pulled = pull_components(&mut config.wasm, &trust).await;
    let mut loader = {
        let verified: Vec<_> = pulled.iter().map(|p| p.0.clone()).collect();
        wasm_host::Loader::prepare(&config.wasm, link.clone(), &trust, &verified)
    };
    let (declarations, all_declared) = (loader.declarations(), loader.complete());
    // Checked before anything starts: a misspelt capability stops the server (once every guest
    // has declared, when some are still compiling).
    let capabilities = Arc::new(if all_declared {
        capabilities::Capabilities::build(&declarations, &config.capabilities)?
    } else {
        capabilities::Capabilities::build_pending(&declarations, &config.capabilities)
    });
    let hooks = Arc::new(hooks::Hooks::default());
    if config.otel_file.is_some() || config.otel_endpoint.is_some() {
        let handler = hooks::otel::OtelHandler::new(
            config.otel_file.as_deref(),
            config.otel_endpoint.clone(),
        )?;
        hooks.register(Arc::new(handler));
        if let Some(path) = &config.otel_file {
            tracing::info!("writing OpenTelemetry spans to {}", path.display());
        }
        if let Some(endpoint) = &config.otel_endpoint {
            tracing::info!("sending OpenTelemetry spans to {endpoint}");
        }
    }
    // After the built-in handlers, in the order the operator listed the guests.
    loader.register_hooks(&hooks);
    let embedded = match &config.jupyter {
        JupyterSource::Embedded {
            root_dir,
            log_level,
        } => Some(EmbeddedJupyter::start(root_dir, log_level).await?),
        JupyterSource::Remote { .. } | JupyterSource::Hub(_) => None,
    };
    let rest = match (&config.jupyter, &embedded) {
        (_, Some(e)) => JupyterRest::new(e.url().clone(), Some(e.token().to_owned())),
        (JupyterSource::Remote { url, auth }, None) => {
            JupyterRest::with_auth(url.clone(), auth.clone())
        }
        // Never used for anyone's traffic (each user's domain has its own), so no credentials.
        (JupyterSource::Hub(endpoints), None) => JupyterRest::new(endpoints.public.clone(), None),
        (JupyterSource::Embedded { .. }, None) => unreachable!("embedded Jupyter started above"),
    };
    if hub.is_none()
        && let Err(e) = rest.status().await
    {
        tracing::warn!("{e}; tools will fail until it answers (or call connect_to_jupyter)");
    }
    // `auto` on our own Jupyter without collaboration is the file backend, told by its
    // environment: probing the missing route would put a 404 warning in its log.
    if embedded
        .as_ref()
        .and_then(EmbeddedJupyter::has_collaboration)
        == Some(false)
        && config.document_backend == config::DocumentBackend::Auto
        && config.documents.is_none()
    {
        config.document_backend = config::DocumentBackend::File;
    }
    let transport = config.transport;
    let mut tools = ToolRegistry::builtin();
    #[cfg(feature = "conformance-fixtures")]
    for tool in mcp::fixtures::tools() {
        tools.insert(tool);
    }
    // After the core tools, so an extension can never shadow one.
    // Extensions' resources and prompts, beside the core ones (whose names they cannot take).
    let catalog = Arc::new(mcp::core_catalog());
    loader.register_known(&tools, &catalog, &capabilities);
    // After every tool is known, extension tools included; an unknown name stops us (once every
    // guest has declared, when some are still compiling).
    // In Hub mode each user's server is the Hub's choice, never switched by a call.
    let mut exclude = config.toolset.exclude.clone();
    if hub.is_some() {
        exclude.push(tools::connect::NAME.to_owned());
    }
    if all_declared {
        tools.select(&config.toolset.only, &exclude)?;
    } else {
        tools.select_pending(&config.toolset.only, &exclude);
    }
    let tools = Arc::new(tools);
    let mut settings = config.domain_settings();
    settings.store = store
        .clone()
        .map(domain::executions::records::Scope::server);
    let hub = hub.map(|endpoints| {
        tracing::info!(
            "Hub mode: serving every user of the JupyterHub at {}",
            jupyter_client::rest::redacted(&endpoints.public)
        );
        mcp::hub::HubFront::new(domain::users::Users::new(
            jupyter_client::hub::HubClient::new(endpoints),
            settings.clone(),
            capabilities.clone(),
            hooks.clone(),
        ))
    });
    let jupyter = Jupyter::new(rest, hooks.clone());
    let domain = match hub {
        Some(_) => Domain::detached(settings, jupyter, capabilities, hooks.clone()),
        None => Domain::new(settings, jupyter, capabilities, hooks.clone()),
    };
    // From here on the guests' notebook host functions can reach the notebooks in use.
    link.connect(&domain);
    let extensions = {
        let extensions = wasm_host::Extensions::new(
            config.wasm.clone(),
            link.clone(),
            loader.host(),
            tools.clone(),
            catalog.clone(),
            domain.clone(),
        );
        extensions.note_pulled(pulled);
        extensions
    };
    let state = Arc::new(ServerState {
        domain: domain.clone(),
        tools,
        catalog,
        http: config.http.clone(),
        hub,
        extensions: extensions.clone(),
        policies: Some(link.policies.clone()),
    });

    let guests = loader.start(
        state.tools.clone(),
        state.catalog.clone(),
        domain.clone(),
        extensions.clone(),
    );
    if let Some(dir) = config.wasm.sources.extensions_dir.clone() {
        wasm_host::watch_folder(dir, extensions.clone());
    }
    if let Some(store) = store.clone() {
        // Before anything else connects to a kernel: the Jupyter Server drops a closed socket's
        // kept messages once another session connects.
        match &state.hub {
            None => {
                domain.resume_executions().await;
                if store.shared() {
                    let domain = domain.clone();
                    domain::executions::upkeep::watch_left_runs(move || vec![domain.clone()]);
                }
            }
            // Each user's records are followed in that user's domain, made when the user first
            // calls this replica (as a client does once its replica is gone).
            Some(hub) if store.shared() => {
                let users = hub.users.clone();
                domain::executions::upkeep::watch_left_runs(move || users.all());
            }
            Some(_) => {}
        }
        domain::executions::upkeep::keep(store);
    }
    startup::prepare(&state, &config).await;
    let stop = CancellationToken::new();
    let served = serve(state.clone(), transport, stop.clone());
    let outcome = tokio::select! {
        outcome = served => outcome,
        signal = shutdown_signal() => {
            tracing::info!("received {signal}; shutting down");
            // Guests first: a call parked in one ends now, and the cleanup below fires no
            // event into them.
            {
                guests.stop();
                extensions.stop();
            }
            stop.cancel();
            Ok(())
        }
        failed = guests_loaded(
            &guests,
        ) => {
            {
                guests.stop();
                extensions.stop();
            }
            stop.cancel();
            Err(failed)
        }
    };
    let users = state
        .hub
        .as_ref()
        .map(|h| h.users.all())
        .unwrap_or_default();
    for domain in std::iter::once(domain).chain(users) {
        domain.release_all().await;
    }
    // The runs the stops above ended, on the disk before we go.
    if let Some(store) = &store
        && let Err(e) = store.sync()
    {
        tracing::warn!("could not flush the execution store at exit: {e}");
    }
    if let Some(embedded) = embedded {
        embedded.stop().await;
    }
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
