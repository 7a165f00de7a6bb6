//! The phases of `run`, in the order it calls them: settings refused before anything starts,
//! the guests read and checked, the capabilities and hooks, Jupyter reached, the tool table, the
//! wasm host linked to the domain, runs a previous process left followed again, and at the end
//! everything we started stopped. The wasm host is linked here and nowhere else.

use std::sync::Arc;

use jupyter_client::hub::HubClient;
use jupyter_client::launcher::EmbeddedJupyter;
use jupyter_client::rest::JupyterRest;
use server_core::capabilities::Capabilities;
use server_core::catalog::Catalog;
use server_core::domain::executions::records::Records;
use server_core::domain::{self, Domain};
use server_core::hooks::{self, Hooks};
use tokio_util::sync::CancellationToken;

use crate::config::{self, Config, JupyterSource, Transport};
use crate::dispatch::ToolRegistry;
use crate::mcp::{self, ServerState};
use crate::{RunError, pull_components, tools};

/// Refuses settings this server cannot serve: HTTP without the authentication it needs, and in
/// Hub mode guests whose grants would cross users.
pub fn refuse_unservable(config: &Config, in_hub: bool) -> Result<(), RunError> {
    if matches!(config.transport, Transport::StreamableHttp) {
        mcp::http::check_auth(&config.http, in_hub)?;
    }
    if !in_hub {
        return Ok(());
    }
    // Hub mode refuses host functions (they would not know whose notebooks to use); talking
    // to the call's own client and the operator's secrets cross no user.
    let crosses_users = |grant: &String| {
        !matches!(grant.as_str(), "elicit" | "sample") && !grant.starts_with("secret:")
    };
    let extensions = &config.wasm.extensions;
    if let Some(guest) = extensions
        .iter()
        .find(|e| e.grants.iter().any(crosses_users))
    {
        return Err(RunError::HubGrants(guest.path.display().to_string()));
    }
    let shares_storage = |e: &&config::ExtensionConfig| {
        e.policy
            .storage
            .iter()
            .any(|s| s.access == config::policy::Access::ReadWrite)
    };
    if let Some(guest) = extensions.iter().find(shares_storage) {
        return Err(RunError::HubSharedStorage(guest.path.display().to_string()));
    }
    Ok(())
}

/// The operator's guests, read and checked (milliseconds) before the server serves; they are
/// compiled once it serves. What they declared at an earlier start is known at once.
pub struct Guests {
    link: Arc<wasm_host::HostLink>,
    loader: wasm_host::Loader,
    pulled: Vec<(std::path::PathBuf, wasm_host::PulledAtStart)>,
}

impl Guests {
    pub async fn prepare(config: &mut Config, in_hub: bool) -> Result<Guests, RunError> {
        let link = Arc::new(wasm_host::HostLink::default());
        if let Some(store) = config.wasm.secrets.clone() {
            link.provide_secrets(Arc::new(store));
        }
        link.provide_prompt_rules(
            wasm_host::PromptRules::new(
                config.wasm.grant_prompts.never.clone(),
                config.wasm.grant_prompts.allow_always,
                in_hub,
            )
            .map_err(RunError::GuestSettings)?,
        );
        // Unreadable trusted keys stop us: nothing may load unchecked.
        let trust = wasm_host::Trust::load(&config.wasm.sources)?;
        // Components from registries are pulled (or found in the cache by digest) first.
        let pulled = pull_components(&mut config.wasm, &trust).await;
        let verified: Vec<_> = pulled.iter().map(|p| p.0.clone()).collect();
        let loader = wasm_host::Loader::prepare(&config.wasm, link.clone(), &trust, &verified);
        Ok(Guests {
            link,
            loader,
            pulled,
        })
    }

    /// The capabilities: a misspelt one stops the server, once every guest has declared (some
    /// may still be compiling).
    pub fn capabilities(&self, config: &Config) -> Result<Arc<Capabilities>, RunError> {
        let declarations = self.loader.declarations();
        Ok(Arc::new(if self.loader.complete() {
            Capabilities::build(&declarations, &config.capabilities)?
        } else {
            Capabilities::build_pending(&declarations, &config.capabilities)
        }))
    }

    /// Links the guests to the domain and the server's tables, and starts loading them.
    pub fn start(
        self,
        config: &Config,
        domain: Arc<Domain>,
        tools: Arc<ToolRegistry>,
        catalog: Arc<Catalog>,
        hub: Option<mcp::hub::HubFront>,
    ) -> (
        wasm_host::Loading,
        Arc<wasm_host::Extensions>,
        Arc<ServerState>,
    ) {
        // From here on the guests' notebook host functions can reach the notebooks in use.
        self.link.connect(&domain);
        let extensions = wasm_host::Extensions::new(
            config.wasm.clone(),
            self.link.clone(),
            self.loader.host(),
            tools.clone(),
            catalog.clone(),
            domain.clone(),
        );
        extensions.note_pulled(self.pulled);
        let state = Arc::new(ServerState {
            domain: domain.clone(),
            tools,
            catalog,
            http: config.http.clone(),
            hub,
            extensions: extensions.clone(),
            policies: self.link.policies.clone(),
        });
        let loading = self.loader.start(
            state.tools.clone(),
            state.catalog.clone(),
            domain,
            extensions.clone(),
        );
        if let Some(dir) = config.wasm.sources.extensions_dir.clone() {
            wasm_host::watch_folder(dir, extensions.clone());
        }
        (loading, extensions, state)
    }
}

/// The hooks bus: the OpenTelemetry writer when asked for, then the guests' handlers in the
/// order the operator listed them.
pub fn hooks(config: &Config, guests: &mut Guests) -> Result<Arc<Hooks>, RunError> {
    let hooks = Arc::new(Hooks::default());
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
    guests.loader.register_hooks(&hooks);
    Ok(hooks)
}

/// The Jupyter Server in use: ours, started now (it answers later: see `bring_up`), or the
/// operator's, asked once whether it answers.
pub async fn reach_jupyter(
    config: &Config,
    in_hub: bool,
    own_specs: Option<&jupyter_client::launcher::OwnKernelSpecs>,
) -> Result<(Option<EmbeddedJupyter>, JupyterRest), RunError> {
    let embedded = match &config.jupyter {
        JupyterSource::Embedded {
            root_dir,
            log_level,
        } => Some(EmbeddedJupyter::spawn(root_dir, log_level, own_specs)?),
        JupyterSource::Remote { .. } | JupyterSource::Hub(_) => None,
    };
    let rest = match (&config.jupyter, &embedded) {
        (_, Some(e)) => JupyterRest::new(e.url().clone(), Some(e.token().to_owned())),
        (JupyterSource::Remote { url, auth, .. }, None) => {
            JupyterRest::with_auth(url.clone(), auth.clone())
        }
        // Never used for anyone's traffic (each user's domain has its own), so no credentials.
        (JupyterSource::Hub(endpoints), None) => JupyterRest::new(endpoints.public.clone(), None),
        (JupyterSource::Embedded { .. }, None) => unreachable!("embedded Jupyter started above"),
    };
    if embedded.is_none()
        && !in_hub
        && let Err(e) = rest.status().await
    {
        tracing::warn!("{e}; tools will fail until it answers (or call connect_to_jupyter)");
    }
    Ok((embedded, rest))
}

/// What follows once the Jupyter Server answers: runs left by an earlier server followed, and
/// `--document-id` / `--start-new-code-sandbox` carried out. On the operator's server this runs
/// before we serve; on ours, in `bring_up`.
pub async fn on_jupyter(
    state: &Arc<ServerState>,
    config: &Config,
    store: Option<Arc<dyn Records>>,
) {
    if let Some(store) = store {
        follow_left_runs(state, &state.domain, store).await;
    }
    crate::startup::prepare(state, config).await;
}

/// Waits for the embedded Jupyter Server while the MCP server already serves, then tells the
/// domain (calls waiting for it go on, or learn why it failed) and does `on_jupyter`. Returns
/// the server to stop at exit; `None` when it never came up (it is stopped then).
pub async fn bring_up(
    mut embedded: EmbeddedJupyter,
    state: Arc<ServerState>,
    config: Config,
    store: Option<Arc<dyn Records>>,
    stopping: CancellationToken,
) -> Option<EmbeddedJupyter> {
    let ready = tokio::select! {
        ready = embedded.wait_until_ready() => Some(ready),
        _ = stopping.cancelled() => None,
    };
    let Some(ready) = ready else {
        return Some(embedded);
    };
    match ready {
        Ok(()) => {
            state.domain.jupyter_is_up(embedded.has_collaboration());
            on_jupyter(&state, &config, store).await;
            Some(embedded)
        }
        Err(e) => {
            tracing::error!("{e}");
            state.domain.jupyter_failed(e.to_string());
            embedded.stop().await;
            None
        }
    }
}

/// The tool table and the catalog: the core tools, then the extensions' (which can never shadow
/// one), narrowed by the operator's toolsets. An unknown name there stops us once every guest
/// has declared.
pub fn tool_table(
    config: &Config,
    guests: &Guests,
    capabilities: &Arc<Capabilities>,
    in_hub: bool,
) -> Result<(Arc<ToolRegistry>, Arc<Catalog>), RunError> {
    let mut tools = ToolRegistry::builtin();
    #[cfg(feature = "conformance-fixtures")]
    for tool in mcp::fixtures::tools() {
        tools.insert(tool);
    }
    // Extensions' resources and prompts sit beside the core ones, whose names they cannot take.
    let catalog = Arc::new(mcp::core_catalog());
    guests.loader.register_known(&tools, &catalog, capabilities);
    // In Hub mode each user's server is the Hub's choice, never switched by a call.
    let mut exclude = config.toolset.exclude.clone();
    if in_hub {
        exclude.push(tools::connect::NAME.to_owned());
    }
    if guests.loader.complete() {
        tools.select(&config.toolset.only, &exclude)?;
    } else {
        tools.select_pending(&config.toolset.only, &exclude);
    }
    Ok((Arc::new(tools), catalog))
}

/// Hub mode's front: every user of the JupyterHub gets a domain of their own.
pub fn hub_front(
    endpoints: jupyter_client::hub::HubEndpoints,
    settings: &domain::Settings,
    capabilities: &Arc<Capabilities>,
    hooks: &Arc<Hooks>,
) -> mcp::hub::HubFront {
    tracing::info!(
        "Hub mode: serving every user of the JupyterHub at {}",
        jupyter_client::rest::redacted(&endpoints.public)
    );
    mcp::hub::HubFront::new(domain::users::Users::new(
        HubClient::new(endpoints),
        settings.clone(),
        capabilities.clone(),
        hooks.clone(),
    ))
}

/// Runs a previous process (or, with a shared store, a stopped replica) left running are
/// followed again, before anything else connects to a kernel: the Jupyter Server drops a closed
/// socket's kept messages once another session connects.
pub async fn follow_left_runs(state: &ServerState, domain: &Arc<Domain>, store: Arc<dyn Records>) {
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

/// Stops what we started: every domain's notebooks and kernels, the store flushed, then the
/// embedded Jupyter.
pub async fn stop_all(
    state: &ServerState,
    domain: Arc<Domain>,
    store: Option<&Arc<dyn Records>>,
    embedded: Option<EmbeddedJupyter>,
) {
    let users = state
        .hub
        .as_ref()
        .map(|h| h.users.all())
        .unwrap_or_default();
    for domain in std::iter::once(domain).chain(users) {
        domain.release_all().await;
    }
    // The runs the stops above ended, on the disk before we go.
    if let Some(store) = store
        && let Err(e) = store.sync()
    {
        tracing::warn!("could not flush the execution store at exit: {e}");
    }
    if let Some(embedded) = embedded {
        embedded.stop().await;
    }
}
