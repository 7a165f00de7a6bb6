//! The MCP face of the server: an rmcp `ServerHandler` over the tools, and its transports.

#[cfg(feature = "conformance-fixtures")]
pub mod fixtures;
pub mod http;
pub mod stdio;

use std::sync::Arc;

// Logging is deprecated in 2026-07-28 but 2025-11-25 clients still send logging/setLevel.
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

use crate::state::ServerState;
use crate::tools::{ProgressReporter, ToolContext};

pub const SERVER_NAME: &str = "Jupyter MCP Server";

const INSTRUCTIONS: &str = "Read, edit and run Jupyter notebooks and kernels. Code runs on the \
Jupyter side: execute_code runs code in a kernel (a default one is started on first use, or name \
one with kernel_id from list_kernels); list_files explores the server's files; \
connect_to_jupyter switches to another Jupyter Server. Long outputs are cut to keep your context \
small; the result says how to get the rest.";

/// The handler rmcp calls; cheap to clone (HTTP makes one per request).
#[derive(Clone)]
pub struct McpServer {
    state: Arc<ServerState>,
}

impl McpServer {
    pub fn new(state: Arc<ServerState>) -> Self {
        McpServer { state }
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
        let capabilities = capabilities.build();
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new(SERVER_NAME, env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.state.tools.iter().map(|t| t.spec().to_mcp()).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        return Ok(ListResourcesResult::with_all_items(fixtures::resources()));
        #[cfg(not(feature = "conformance-fixtures"))]
        Ok(ListResourcesResult::with_all_items(Vec::new()))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        return Ok(ListResourceTemplatesResult::with_all_items(
            fixtures::resource_templates(),
        ));
        #[cfg(not(feature = "conformance-fixtures"))]
        Ok(ListResourceTemplatesResult::with_all_items(Vec::new()))
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
        Err(McpError::resource_not_found(
            format!(
                "No resource at '{}'. Call resources/list to see what this server offers.",
                request.uri
            ),
            Some(serde_json::json!({ "uri": request.uri })),
        ))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, McpError> {
        #[cfg(feature = "conformance-fixtures")]
        return Ok(ListPromptsResult::with_all_items(fixtures::prompts()));
        #[cfg(not(feature = "conformance-fixtures"))]
        Ok(ListPromptsResult::with_all_items(Vec::new()))
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
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        tracing::debug!("client subscribed to {}", request.uri);
        Ok(())
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        tracing::debug!("client unsubscribed from {}", request.uri);
        Ok(())
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
            state: self.state.clone(),
            cancel: context.ct.clone(),
            progress,
        };
        let call =
            crate::dispatch::call_tool(&self.state, &request.name, request.arguments, tool_context);
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
