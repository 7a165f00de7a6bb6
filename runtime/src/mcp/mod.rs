//! The MCP face of the server: an rmcp `ServerHandler` over the tools, and its transports.

pub mod control;
#[cfg(feature = "conformance-fixtures")]
pub mod fixtures;
pub mod http;
pub mod resources;
pub mod stdio;

use std::sync::Arc;

// Logging is deprecated in 2026-07-28 but 2025-11-25 clients still send logging/setLevel.
use rmcp::model::JsonObject;
#[allow(deprecated)]
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, GetPromptRequestParams, GetPromptResponse,
    Implementation, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    SetLevelRequestParams, SubscribeRequestParams, SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use tokio::sync::mpsc;

use crate::config::HttpConfig;
use crate::dispatch::ToolRegistry;
use crate::domain::Domain;
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
    pub domain: Arc<Domain>,
    pub tools: ToolRegistry,
    pub http: HttpConfig,
}

/// The handler rmcp calls; cheap to clone (HTTP makes one per request).
#[derive(Clone)]
pub struct McpServer {
    state: Arc<ServerState>,
    /// Legacy `resources/subscribe` watchers of this session, by URI.
    subscriptions:
        Arc<std::sync::Mutex<std::collections::HashMap<String, tokio::task::AbortHandle>>>,
}

impl McpServer {
    pub fn new(state: Arc<ServerState>) -> Self {
        McpServer {
            state,
            subscriptions: Arc::default(),
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

/// Waits for changes to the notebook a URI names; `None` when the change stream ends.
async fn next_change_for(
    changes: &mut tokio::sync::broadcast::Receiver<String>,
    uris: &[String],
) -> Option<Vec<String>> {
    loop {
        match changes.recv().await {
            Ok(name) => {
                let hit: Vec<String> = uris
                    .iter()
                    .filter(|u| resources::concerns(u, &name))
                    .cloned()
                    .collect();
                if !hit.is_empty() {
                    return Some(hit);
                }
            }
            // Missed some changes: tell every subscriber to re-read.
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return Some(uris.to_vec()),
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
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
            .enable_tools();
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
        capabilities.extensions = Some([(CAPABILITIES_EXTENSION.to_owned(), block)].into());
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        // The dispatcher's rule, so what is listed is exactly what may be called.
        let view = tool_view(&_context);
        let tools = self
            .state
            .tools
            .visible(&self.state.domain.capabilities)
            .filter(|t| view.as_ref().is_none_or(|v| v.allows(&t.spec().name)))
            .map(|t| t.spec().to_mcp())
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        #[allow(unused_mut)]
        let mut all = resources::list(&self.state.domain);
        all.insert(0, resources::capabilities_resource());
        #[cfg(feature = "conformance-fixtures")]
        all.extend(fixtures::resources());
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
        Ok(ListResourceTemplatesResult::with_all_items(all))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        if let Some(result) = fixtures::read_resource(&request.uri) {
            return Ok(result.into());
        }
        if request.uri == resources::CAPABILITIES_URI {
            return Ok(resources::read_capabilities(&self.state.domain).into());
        }
        resources::read(&self.state.domain, &request.uri)
            .await
            .map(Into::into)
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
        Ok(ListPromptsResult::with_all_items(all))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        if let Some(result) = fixtures::get_prompt(&request.name, request.arguments.as_ref()) {
            return Ok(result.into());
        }
        if request.name == "jupyter_cite" {
            return self.cite(request.arguments.as_ref()).await.map(Into::into);
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
        tracing::debug!("client asked for log level {:?}", request.level);
        Ok(())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        let uri = request.uri.clone();
        let mut changes = self.state.domain.notebooks.watch_changes();
        let peer = context.peer.clone();
        let watched = vec![uri.clone()];
        let watcher = tokio::spawn(async move {
            while next_change_for(&mut changes, &watched).await.is_some() {
                let param = rmcp::model::ResourceUpdatedNotificationParam::new(watched[0].clone());
                if peer.notify_resource_updated(param).await.is_err() {
                    break;
                }
            }
        });
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
        let mut changes = self.state.domain.notebooks.watch_changes();
        loop {
            tokio::select! {
                _ = context.cancelled() => return Ok(()),
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
        if let Some(answer) = fixtures::intercept_call(&request.name, &context).await {
            return answer;
        }
        // Progress goes out from this task (rmcp routes notifications by task-local request
        // context), so the tool queues it and this loop sends it while the tool runs.
        let (progress_tx, mut progress_rx) = mpsc::unbounded_channel::<ProgressNotificationParam>();
        let progress: Option<ProgressReporter> = context.meta.get_progress_token().map(|token| {
            let reporter: ProgressReporter = Arc::new(move |progress, total, message| {
                let mut param = ProgressNotificationParam::new(token.clone(), progress);
                param.total = total;
                param.message = Some(message);
                let _ = progress_tx.send(param);
            });
            reporter
        });
        let tool_context = ToolContext {
            domain: self.state.domain.clone(),
            cancel: context.ct.clone(),
            progress,
        };
        let view = tool_view(&context);
        let call = crate::dispatch::call_tool(
            &self.state.tools,
            view.as_ref(),
            &request.name,
            request.arguments,
            tool_context,
            context.meta.get_traceparent().map(str::to_owned),
        );
        tokio::pin!(call);
        let peer = context.peer.clone();
        let mut last_progress = f64::NEG_INFINITY;
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                Some(param) = progress_rx.recv() => {
                    send_progress(&peer, param, &mut last_progress).await;
                }
            }
        };
        // Progress reported just before the end still goes out ahead of the result.
        while let Ok(param) = progress_rx.try_recv() {
            send_progress(&peer, param, &mut last_progress).await;
        }
        result.map(CallToolResponse::from)
    }
}

/// The narrower view of the tools this request's client asked for (`/mcp?only=`), if any.
fn tool_view(context: &RequestContext<RoleServer>) -> Option<crate::dispatch::ToolView> {
    context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<crate::dispatch::ToolView>())
        .cloned()
}

/// Sends a progress notification; a report that would not increase progress is dropped.
async fn send_progress(
    peer: &rmcp::Peer<RoleServer>,
    param: ProgressNotificationParam,
    last: &mut f64,
) {
    if param.progress > *last {
        *last = param.progress;
        if let Err(e) = peer.notify_progress(param).await {
            tracing::debug!("could not send progress: {e}");
        }
    }
}

fn cite_prompt() -> rmcp::model::Prompt {
    serde_json::from_value(serde_json::json!({
        "name": "jupyter_cite",
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
        arguments: Option<&JsonObject>,
    ) -> Result<rmcp::model::GetPromptResult, McpError> {
        let argument = |key: &str| {
            arguments
                .and_then(|a| a.get(key))
                .and_then(serde_json::Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let in_use = self
            .state
            .domain
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
