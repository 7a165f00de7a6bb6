//! The MCP face of the server: an rmcp `ServerHandler` over the tools, and its transports.

pub mod apps;
mod calls;
mod catalog;
mod changes;
mod cite;
pub mod compat;
pub mod control;
mod elicit;
#[cfg(feature = "conformance-fixtures")]
pub mod fixtures;
pub mod http;
pub mod hub;
pub mod logging;
pub mod resources;
pub mod session_owners;
mod skills;
pub mod stdio;
pub mod tasks;

use std::sync::Arc;

// Logging is deprecated in 2026-07-28 but 2025-11-25 clients still send logging/setLevel.
use calls::{declare_apps, tool_view};
use cite::{CITE_PROMPT, cite_prompt};
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ClientCapabilities,
    CreateTaskResult, GetPromptRequestParams, GetPromptResponse, GetSkillRequestParams,
    GetSkillResult, GetTaskParams, GetTaskResult, Implementation, InitializeResult,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListSkillsResult,
    ListToolsResult, LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities,
    ServerConfig, SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter,
    UnsubscribeRequestParams, UpdateTaskParams,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use self::logging::{CLIENT_LOG, ClientLog};
use self::tasks::TaskSupport;

use crate::config::HttpConfig;
use crate::dispatch::ToolRegistry;
use crate::tools::{ProgressReporter, ToolContext};
use server_core::catalog::Catalog;
use server_core::domain::Domain;
use server_core::domain::users::Caller;

pub const SERVER_NAME: &str = "Jupyter MCP Server";

/// The largest JSON-RPC request either transport accepts (16 MiB); larger ones are refused with
/// an error and never held whole in memory.
pub const MAX_REQUEST_BYTES: usize = 16 << 20;

/// The extension under which the capability block is advertised.
pub const CAPABILITIES_EXTENSION: &str = "io.jupyter-mcp/capabilities";

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
    /// The extensions loaded, added, reloaded and removed through the management routes.
    pub extensions: Arc<wasm_host::Extensions>,
    /// Every WebAssembly guest's policy, for the policy routes.
    pub policies: Arc<wasm_host::Policies>,
}

/// An empty catalog of extensions' resources and prompts, refusing the URI schemes and prompt
/// names the core serves.
pub fn core_catalog() -> Catalog {
    Catalog::new(
        &["notebook", "capabilities", "ui", "execution", "skill"],
        &[CITE_PROMPT],
        catalog::fits,
    )
}

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
    /// This session, as what is granted "for this session" is held to it.
    session: Arc<server_core::client_link::Session>,
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
            session: server_core::client_link::Session::new(),
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
            .enable_tasks()
            // One skill, how to work with notebooks here (SEP-2640), read through resources.
            .enable_skills();
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
            .with_instructions(crate::tools::guidance::INSTRUCTIONS)
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
        self.watch_lists(context);
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
            .filter(|t| view.as_ref().is_none_or(|v| v.admits(t.spec())))
            .map(|t| {
                let mut tool = t.spec().to_mcp();
                if rich && t.spec().shows_outputs {
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
        all.extend(catalog::entries(self.state.catalog.resources()));
        Ok(ListResourcesResult::with_all_items(all))
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListSkillsResult, McpError> {
        Ok(ListSkillsResult::with_all_items(vec![skills::skill()]))
    }

    async fn get_skill(
        &self,
        request: GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetSkillResult, McpError> {
        skills::get(&request.uri)
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
        all.extend(catalog::entries(self.state.catalog.templates()));
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
        if request.uri == crate::tools::guidance::SKILL_URI {
            return Ok(skills::read().into());
        }
        if let Some(extension) = self.state.catalog.resource_provider(&request.uri) {
            return catalog::read(extension.as_ref(), request.uri)
                .await
                .map(Into::into);
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
        all.extend(catalog::entries(self.state.catalog.prompts()));
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
            return catalog::prompt(extension.as_ref(), request.name, arguments)
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
        match self.tasks(&context).get_task(&request.task_id) {
            Ok(task) => Ok(GetTaskResult::new(task)),
            // Not one of this process's: the execution it ran may be recorded (a restart, or a
            // replica sharing the store).
            Err(unknown) => {
                let domain = self.domain(&context);
                match tasks::from_record(&self.state.tools, &domain, &request.task_id).await {
                    Some(task) => Ok(GetTaskResult::new(task)),
                    None => Err(unknown),
                }
            }
        }
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
        self.subscribe_to(request, &context);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.unsubscribe_from(&request);
        Ok(())
    }

    async fn listen(&self, context: rmcp::service::SubscriptionContext) -> Result<(), McpError> {
        self.listen_to(context).await
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
        let follows = tasks::client_follows(tasks::TaskRequest {
            declared: context
                .client_capabilities()
                .is_some_and(|c| c.supports_tasks()),
            modern: context
                .meta
                .protocol_version()
                .is_some_and(|v| !v.has_initialize()),
            augmented: context
                .meta
                .get(compat::TASK_AUGMENTED)
                .and_then(serde_json::Value::as_bool)
                == Some(true),
        });
        let support = self
            .state
            .tools
            .get(&request.name)
            .map_or(TaskSupport::Forbidden, |tool| tool.spec().tasks);
        match (support, follows) {
            (TaskSupport::Required, false) => Err(McpError::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            )),
            (TaskSupport::Optional | TaskSupport::Required, true) => {
                Ok(CallToolResponse::Task(self.start_task(request, context)))
            }
            _ => {
                let call = self.prepare_call(request, &context, context.ct.clone(), false);
                let confirmer = call.confirmer();
                let result = call.run().await?;
                // A stateless request's question goes back with the answer; the client calls
                // again with the person's (multi round-trip requests).
                Ok(match confirmer.input_required() {
                    Some(asked) => CallToolResponse::InputRequired(asked),
                    None => CallToolResponse::from(result),
                })
            }
        }
    }
}
