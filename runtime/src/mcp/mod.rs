//! The MCP face of the server: an rmcp `ServerHandler` over the tools, and its transports.

pub mod apps;
mod calls;
mod changes;
pub mod compat;
pub mod control;
#[cfg(feature = "conformance-fixtures")]
pub mod fixtures;
pub mod http;
pub mod hub;
pub mod logging;
pub mod resources;
pub mod stdio;
pub mod tasks;

use std::sync::Arc;

// Logging is deprecated in 2026-07-28 but 2025-11-25 clients still send logging/setLevel.
use calls::{declare_apps, tool_view};
use changes::{TOOLS_WATCHER, next_change_for, settled_change};
use rmcp::model::JsonObject;
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    CreateTaskResult, GetPromptRequestParams, GetPromptResponse, GetTaskParams, GetTaskResult,
    Implementation, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SetLevelRequestParams,
    SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::logging::{CLIENT_LOG, ClientLog};
use self::tasks::TaskSupport;

use crate::catalog::Catalog;
use crate::config::HttpConfig;
use crate::dispatch::ToolRegistry;
use crate::domain::Domain;
use crate::domain::users::Caller;
use crate::tools::{ProgressReporter, ToolContext};

pub const SERVER_NAME: &str = "Jupyter MCP Server";

/// The largest JSON-RPC request either transport accepts (16 MiB); larger ones are refused with
/// an error and never held whole in memory.
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

/// The extension under which the capability block is advertised.
pub const CAPABILITIES_EXTENSION: &str = "io.jupyter-mcp/capabilities";

const INSTRUCTIONS: &str = "Read, edit and run Jupyter notebooks and kernels. Code runs on the \
Jupyter side: execute_code runs code in a kernel (a default one is started on first use, or name \
one with kernel_id from list_kernels); list_files explores the server's files; \
connect_to_jupyter switches to another Jupyter Server. Long outputs are cut to keep your context \
small; the result says how to get the rest.";

/// What the transports serve: the domain, the tools, and the HTTP transport's settings.
pub struct ServerState {
    /// The domain every call uses; in Hub mode only the capabilities and settings are read
    /// from it, each user's calls getting their own domain (`hub`).
    pub domain: Arc<Domain>,
    pub tools: Arc<ToolRegistry>,
    /// Extensions' resources, resource templates and prompts.
    pub catalog: Arc<Catalog>,
    pub http: HttpConfig,
    /// Hub mode: every user of a JupyterHub, each with their own domain.
    pub hub: Option<hub::HubFront>,
}

/// An empty catalog of extensions' resources and prompts, refusing the URI schemes and prompt
/// names the core serves.
pub fn core_catalog() -> Catalog {
    Catalog::new(&["notebook", "capabilities", "ui"], &[CITE_PROMPT])
}

/// The core's one prompt.
const CITE_PROMPT: &str = "jupyter_cite";

/// The handler rmcp calls; cheap to clone (HTTP makes one per session, or per request when
/// stateless).
#[derive(Clone)]
#[allow(deprecated)] // LoggingLevel: deprecated in 2026-07-28, still served to 2025-11-25 clients.
pub struct McpServer {
    state: Arc<ServerState>,
    /// Legacy `resources/subscribe` watchers of this session, by URI.
    subscriptions:
        Arc<std::sync::Mutex<std::collections::HashMap<String, tokio::task::AbortHandle>>>,
    /// The level this session asked for with `logging/setLevel`; none: no log notifications.
    log_level: Arc<std::sync::Mutex<Option<LoggingLevel>>>,
    /// Tool calls running as tasks; shared by every session and request of the server.
    tasks: TaskManager,
}

impl McpServer {
    pub fn new(state: Arc<ServerState>) -> Self {
        Self::with_tasks(state, TaskManager::new())
    }

    /// A handler sharing its tasks with others (HTTP: one manager for every session).
    pub fn with_tasks(state: Arc<ServerState>, tasks: TaskManager) -> Self {
        McpServer {
            state,
            subscriptions: Arc::default(),
            log_level: Arc::default(),
            tasks,
        }
    }
}

/// The caller `mcp::http` authenticated with the Hub for this request (Hub mode only).
fn caller(context: &RequestContext<RoleServer>) -> Option<Caller> {
    context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .cloned()
}

impl McpServer {
    /// The domain a request works on: the caller's own in Hub mode, else the server's.
    fn domain(&self, context: &RequestContext<RoleServer>) -> Arc<Domain> {
        match (&self.state.hub, caller(context)) {
            (Some(hub), Some(caller)) => hub.users.domain_of(&caller),
            _ => self.state.domain.clone(),
        }
    }

    /// The task manager a request's tasks live in: the caller's own in Hub mode.
    fn tasks(&self, context: &RequestContext<RoleServer>) -> TaskManager {
        match (&self.state.hub, caller(context)) {
            (Some(hub), Some(caller)) => hub.tasks_of(&caller),
            _ => self.tasks.clone(),
        }
    }
}

impl Drop for McpServer {
    fn drop(&mut self) {
        // The last handle of a session stops its watchers.
        if Arc::strong_count(&self.subscriptions) == 1 {
            for (_, watcher) in self
                .subscriptions
                .lock()
                .expect("subscriptions lock")
                .drain()
            {
                watcher.abort();
            }
        }
    }
}

impl ServerHandler for McpServer {
    #[allow(deprecated)]
    fn get_info(&self) -> ServerConfig {
        // Resources and prompts are declared as the Python server declares them; notebooks fill
        // them in. Logging is accepted for 2025-11-25 clients (logs themselves go to stderr).
        let capabilities = ServerCapabilities::builder()
            .enable_logging()
            .enable_prompts()
            .enable_resources()
            .enable_resources_subscribe()
            .enable_tools()
            // Extension tools, resources and prompts join when their guest is ready (compiled
            // after the handshake).
            .enable_tool_list_changed()
            .enable_resources_list_changed()
            .enable_prompts_list_changed()
            .enable_tasks();
        #[cfg(feature = "conformance-fixtures")]
        let capabilities = {
            let mut c = capabilities;
            c.completions = Some(Default::default());
            c
        };
        let mut capabilities = capabilities.build();
        // The capability block, as in server/discover and the capabilities:// resource.
        let block = match self.state.domain.capabilities.block() {
            serde_json::Value::Object(block) => block,
            _ => unreachable!("the block is an object"),
        };
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(CAPABILITIES_EXTENSION.to_owned(), block);
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn initialize(
        &self,
        request: rmcp::model::InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, McpError> {
        context.peer.set_peer_info(request.clone());
        let mut result = self.negotiate_initialize(&request)?;
        if apps::supported_by(Some(&request.capabilities)) {
            declare_apps(&mut result.capabilities);
        }
        Ok(result)
    }

    async fn discover(
        &self,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::DiscoverResult, McpError> {
        let mut info = self.get_info();
        if apps::supported_by(context.meta.client_capabilities().as_ref()) {
            declare_apps(&mut info.capabilities);
        }
        Ok(rmcp::model::DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    async fn on_initialized(&self, context: rmcp::service::NotificationContext<RoleServer>) {
        // A session of the 2025-11-25 era hears of every change of the tools, resources and
        // prompts (an extension ready after the handshake); the 2026-07-28 era asks for them in
        // `listen`.
        let mut tools = self.state.tools.changes();
        let mut resources = self.state.catalog.resource_changes();
        let mut prompts = self.state.catalog.prompt_changes();
        let peer = context.peer;
        let watcher = tokio::spawn(async move {
            loop {
                let sent = tokio::select! {
                    changed = settled_change(&mut tools) => {
                        changed && peer.notify_tool_list_changed().await.is_ok()
                    }
                    changed = settled_change(&mut resources) => {
                        changed && peer.notify_resource_list_changed().await.is_ok()
                    }
                    changed = settled_change(&mut prompts) => {
                        changed && peer.notify_prompt_list_changed().await.is_ok()
                    }
                };
                if !sent {
                    break;
                }
            }
        });
        if let Some(old) = self
            .subscriptions
            .lock()
            .expect("subscriptions lock")
            .insert(TOOLS_WATCHER.to_owned(), watcher.abort_handle())
        {
            old.abort();
        }
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let rich = apps::supported_by(context.client_capabilities().as_ref());
        // The dispatcher's rule, so what is listed is exactly what may be called.
        let view = tool_view(&context);
        let tools = self
            .state
            .tools
            .visible(&self.state.domain.capabilities)
            .into_iter()
            .filter(|t| view.as_ref().is_none_or(|v| v.allows(&t.spec().name)))
            .map(|t| {
                let mut tool = t.spec().to_mcp();
                if rich && apps::shows_outputs(&t.spec().name) {
                    apps::link_tool(&mut tool);
                }
                tool
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        #[allow(unused_mut)]
        let mut all = resources::list(&self.domain(&context));
        all.insert(0, resources::capabilities_resource());
        if apps::supported_by(context.client_capabilities().as_ref()) {
            all.insert(1, apps::viewer_resource());
        }
        #[cfg(feature = "conformance-fixtures")]
        all.extend(fixtures::resources());
        all.extend(self.state.catalog.resources());
        Ok(ListResourcesResult::with_all_items(all))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        #[allow(unused_mut)]
        let mut all = resources::templates();
        #[cfg(feature = "conformance-fixtures")]
        all.extend(fixtures::resource_templates());
        all.extend(self.state.catalog.templates());
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        let domain = self.domain(&context);
        #[cfg(feature = "conformance-fixtures")]
        if let Some(result) = fixtures::read_resource(&request.uri) {
            return Ok(result.into());
        }
        if request.uri == resources::CAPABILITIES_URI {
            return Ok(resources::read_capabilities(&domain).into());
        }
        if request.uri == apps::VIEWER_URI {
            return Ok(apps::read_viewer().into());
        }
        if let Some(extension) = self.state.catalog.resource_provider(&request.uri) {
            return extension.read(request.uri).await.map(Into::into);
        }
        resources::read(&domain, &request.uri).await.map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        #[allow(unused_mut)]
        let mut all = vec![cite_prompt()];
        #[cfg(feature = "conformance-fixtures")]
        all.extend(fixtures::prompts());
        all.extend(self.state.catalog.prompts());
        Ok(ListPromptsResult::with_all_items(all))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        if let Some(result) = fixtures::get_prompt(&request.name, request.arguments.as_ref()) {
            return Ok(result.into());
        }
        if request.name == CITE_PROMPT {
            return self
                .cite(&self.domain(&context), request.arguments.as_ref())
                .await
                .map(Into::into);
        }
        if let Some(extension) = self.state.catalog.prompt_provider(&request.name) {
            let arguments = request.arguments.unwrap_or_default();
            return extension
                .prompt(request.name, arguments)
                .await
                .map(Into::into);
        }
        Err(McpError::invalid_params(
            format!(
                "Unknown prompt '{}'. Call prompts/list to see this server's prompts.",
                request.name
            ),
            None,
        ))
    }

    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        *self.log_level.lock().expect("log level lock") = Some(request.level);
        Ok(())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(
            self.tasks(&context).get_task(&request.task_id)?,
        ))
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        // No task of ours asks for input; answers are acknowledged and ignored, as the
        // extension says of answers nobody waits for.
        self.tasks(&context)
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks(&context).cancel_task(&request.task_id)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri.clone();
        let peer = context.peer.clone();
        let watcher = if uri == resources::CAPABILITIES_URI {
            // Changes when an extension still loading at start declares its capabilities.
            let mut changes = self.state.domain.capabilities.changes();
            tokio::spawn(async move {
                while settled_change(&mut changes).await {
                    let param = rmcp::model::ResourceUpdatedNotificationParam::new(
                        resources::CAPABILITIES_URI,
                    );
                    if peer.notify_resource_updated(param).await.is_err() {
                        break;
                    }
                }
            })
        } else {
            let mut changes = self.domain(&context).notebooks.watch_changes();
            let watched = vec![uri.clone()];
            tokio::spawn(async move {
                while next_change_for(&mut changes, &watched).await.is_some() {
                    let param =
                        rmcp::model::ResourceUpdatedNotificationParam::new(watched[0].clone());
                    if peer.notify_resource_updated(param).await.is_err() {
                        break;
                    }
                }
            })
        };
        if let Some(old) = self
            .subscriptions
            .lock()
            .expect("subscriptions lock")
            .insert(uri, watcher.abort_handle())
        {
            old.abort();
        }
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        if let Some(watcher) = self
            .subscriptions
            .lock()
            .expect("subscriptions lock")
            .remove(&request.uri)
        {
            watcher.abort();
        }
        Ok(())
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        let uris = context
            .accepted()
            .resource_subscriptions
            .clone()
            .unwrap_or_default();
        let tools_wanted = context.accepted().tools_list_changed == Some(true);
        let resources_wanted = context.accepted().resources_list_changed == Some(true);
        let prompts_wanted = context.accepted().prompts_list_changed == Some(true);
        let mut resources = self.state.catalog.resource_changes();
        let mut prompts = self.state.catalog.prompt_changes();
        let capabilities_wanted = uris.iter().any(|u| u == resources::CAPABILITIES_URI);
        let mut tools = self.state.tools.changes();
        let mut capabilities = self.state.domain.capabilities.changes();
        let mut changes = self
            .domain(context.request_context())
            .notebooks
            .watch_changes();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
                changed = settled_change(&mut tools), if tools_wanted => {
                    if !changed || context.sink().notify_tool_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
                changed = settled_change(&mut resources), if resources_wanted => {
                    if !changed || context.sink().notify_resource_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
                changed = settled_change(&mut prompts), if prompts_wanted => {
                    if !changed || context.sink().notify_prompt_list_changed().await.is_err() {
                        return Ok(());
                    }
                }
                changed = settled_change(&mut capabilities), if capabilities_wanted => {
                    if !changed
                        || context
                            .sink()
                            .notify_resource_updated(resources::CAPABILITIES_URI)
                            .await
                            .is_err()
                    {
                        return Ok(());
                    }
                }
                hit = next_change_for(&mut changes, &uris), if !uris.is_empty() => {
                    let Some(hit) = hit else { return Ok(()) };
                    for uri in hit {
                        if context.sink().notify_resource_updated(uri).await.is_err() {
                            return Ok(());
                        }
                    }
                }
            }
        }
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    #[cfg(feature = "conformance-fixtures")]
    async fn complete(
        &self,
        _request: rmcp::model::CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::CompleteResult, McpError> {
        Ok(fixtures::complete())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        if let Some(answer) =
            fixtures::intercept_call(&request.name, &self.state.tools, &self.state.catalog)
        {
            return answer;
        }
        let tasks_declared = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        match (tasks::task_support(&request.name), tasks_declared) {
            (TaskSupport::Required, false) => Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            )),
            (TaskSupport::Optional | TaskSupport::Required, true) => {
                Ok(CallToolResponse::Task(self.start_task(request, context)))
            }
            _ => {
                let call = self.prepare_call(request, &context, context.ct.clone(), false);
                call.run().await.map(CallToolResponse::from)
            }
        }
    }
}

fn cite_prompt() -> rmcp::model::Prompt {
    serde_json::from_value(serde_json::json!({
        "name": CITE_PROMPT,
        "description": "Cite cells of a notebook in use (as they are now, unsaved edits included) \
            ahead of your instruction.",
        "arguments": [
            {"name": "prompt", "description": "User prompt for the cited cells", "required": true},
            {"name": "cell_indices", "description": "Cell indices to cite (0-based), e.g. '0,1,2', '0-2', '0-2,4' or '3-' (to the end)", "required": true},
            {"name": "notebook_name", "description": "Notebook to cite from (default: the current notebook)", "required": false}
        ]
    }))
    .expect("prompt JSON matches the rmcp model")
}

impl McpServer {
    async fn cite(
        &self,
        domain: &Domain,
        arguments: Option<&JsonObject>,
    ) -> Result<rmcp::model::GetPromptResult, McpError> {
        let argument = |key: &str| {
            arguments
                .and_then(|a| a.get(key))
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let in_use = domain
            .notebooks
            .resolve(
                Some(&argument("notebook_name"))
                    .filter(|n| !n.is_empty())
                    .map(String::as_str),
            )
            .map_err(|e| McpError::invalid_params(e.to_string(), None))?;
        let notebook = in_use
            .document
            .read()
            .await
            .map_err(|e| McpError::internal_error(e.to_string(), None))?;
        let indices = resources::parse_cell_ranges(&argument("cell_indices"), notebook.cells.len())
            .map_err(|e| McpError::invalid_params(e, None))?;
        let text = resources::cite_text(&in_use.name, &notebook, &indices, &argument("prompt"));
        Ok(serde_json::from_value(serde_json::json!({
            "resultType": "complete",
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}]
        }))
        .expect("prompt JSON matches the rmcp model"))
    }
}
