//! A tool call's way through MCP: prepared with what it sends its client on the way (progress
//! when asked for, log lines at the level asked for), run inline or as a task, and answered.

#![allow(deprecated)] // LoggingLevel: deprecated in 2026-07-28, still served to 2025-11-25 clients.

use super::*;
use crate::tools::wire::Shape;

/// A tool call ready to run, with what it sends its client on the way: progress (when asked
/// for) and log lines (at the level asked for).
#[allow(deprecated)]
pub(super) struct PreparedCall {
    state: Arc<ServerState>,
    request: CallToolRequestParams,
    tool_context: ToolContext,
    traceparent: Option<String>,
    peer: rmcp::Peer<RoleServer>,
    progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
    log_level: Option<LoggingLevel>,
    /// The narrower view of the tools this client asked for (`/mcp?only=`).
    view: Option<crate::dispatch::ToolView>,
    /// The client renders MCP Apps: output tools keep their MIME bundles for the viewer.
    rich_outputs: bool,
    /// The progress token the client gave, if it asked for progress notifications.
    token: Option<rmcp::model::ProgressToken>,
    /// The task running the call, whose status message follows the progress.
    task: Option<rmcp::task_manager::TaskContext>,
    /// Hub mode: whose call this is (their server is made ready before the tool runs).
    caller: Option<Caller>,
    /// Who asks the person when the call needs their yes (`execution.confirm`, hooks).
    confirmer: Arc<super::elicit::PeerConfirmer>,
    /// The client as guests talk back to it (questions, sampling, progress).
    client: Arc<dyn server_core::client_link::ClientLink>,
}

impl McpServer {
    pub(super) fn prepare_call(
        &self,
        mut request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        cancel: CancellationToken,
        as_task: bool,
    ) -> PreparedCall {
        // Progress goes out from the request's own task (rmcp routes notifications by task-local
        // request context), so the tool queues it and `PreparedCall::run` sends it. A task also
        // shows it as its status message, so a client polling tasks/get sees it without a token.
        let (progress_tx, progress) = mpsc::unbounded_channel::<ProgressNotificationParam>();
        let token = context.meta.get_progress_token();
        let reporter: Option<ProgressReporter> = (token.is_some() || as_task).then(|| {
            let token = token.clone().unwrap_or(rmcp::model::ProgressToken(
                rmcp::model::NumberOrString::Number(0),
            ));
            let reporter: ProgressReporter = Arc::new(move |progress, total, message| {
                let mut param = ProgressNotificationParam::new(token.clone(), progress);
                param.total = total;
                param.message = Some(message);
                let _ = progress_tx.send(param);
            });
            reporter
        });
        let client = Arc::new(super::elicit::PeerClient::for_request(
            context,
            reporter.clone(),
            self.session.clone(),
        ));
        let session_level = *self.log_level.lock().expect("log level lock");
        // A retry of a call whose question went back to the client carries the answers.
        let request_answers = request.input_responses.take();
        PreparedCall {
            state: self.state.clone(),
            traceparent: context.meta.get_traceparent().map(str::to_owned),
            tool_context: ToolContext {
                domain: self.domain(context),
                cancel,
                progress: reporter,
                task_id: None,
            },
            request,
            peer: context.peer.clone(),
            progress,
            view: tool_view(context),
            log_level: logging::effective_level(context.meta.log_level(), session_level),
            rich_outputs: apps::supported_by(context.client_capabilities().as_ref()),
            token,
            task: None,
            caller: caller(context),
            confirmer: Arc::new(super::elicit::PeerConfirmer::for_request(
                context,
                request_answers,
                !as_task,
            )),
            client,
        }
    }

    /// Runs a call as a task: returns its handle at once; the call goes on in the background.
    /// `tasks/cancel` cancels it as a cancelled request would (an execution interrupts its
    /// kernel) and the task ends `cancelled`.
    pub(super) fn start_task(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CreateTaskResult {
        let cancel = CancellationToken::new();
        #[cfg(feature = "conformance-fixtures")]
        let fixture_failure = fixtures::task_protocol_error(&request.name);
        let mut call = self.prepare_call(request, &context, cancel.clone(), true);
        let ttl_ms = u64::try_from(tasks::ttl(&self.state.domain.settings.execution).as_millis())
            .unwrap_or(u64::MAX);
        let tasks = self.tasks(&context);
        let options = TaskOptions::new()
            .with_ttl_ms(ttl_ms)
            .with_poll_interval_ms(500);
        let task = tasks.spawn(options, move |task| {
            call.task = Some(task.clone());
            call.tool_context.task_id = Some(task.task_id().to_owned());
            Box::pin(async move {
                #[cfg(feature = "conformance-fixtures")]
                if let Some(error) = fixture_failure {
                    return Err(TaskExit::Error(error));
                }
                let run = call.run();
                tokio::pin!(run);
                let result = tokio::select! {
                    result = &mut run => result,
                    _ = task.cancelled() => {
                        cancel.cancel();
                        // Let the call wind down (an execution interrupts its kernel).
                        let _ = run.await;
                        return Err(TaskExit::Cancelled);
                    }
                };
                result.map_err(TaskExit::Error)
            })
        });
        CreateTaskResult::new(task)
    }
}

impl PreparedCall {
    /// Who asks the person in this call: after it ran, what it deferred to the client's retry.
    pub(super) fn confirmer(&self) -> Arc<super::elicit::PeerConfirmer> {
        self.confirmer.clone()
    }

    /// Runs the call through dispatch, sending its progress and log lines as they come.
    #[allow(deprecated)]
    pub(super) async fn run(mut self) -> Result<CallToolResult, McpError> {
        let (log_tx, mut log_rx) = mpsc::unbounded_channel::<LoggingMessageNotificationParam>();
        let hub = self.state.hub.as_ref().zip(self.caller.as_ref());
        let tool_context = self.tool_context;
        let arguments = self.request.arguments.take();
        let (state, view, name) = (&self.state, self.view.as_ref(), &self.request.name);
        let traceparent = self.traceparent;
        let confirmer: Arc<dyn server_core::confirm::Confirmer> = self.confirmer;
        let client = self.client;
        let call = async move {
            let mut tool_context = tool_context;
            // Hub mode: the caller's own server, started first when it is not running (an
            // unknown tool starts nothing: dispatch refuses it). The Hub path's futures are
            // boxed so they do not enlarge every single-user call's future.
            if let Some((hub, caller)) = hub.filter(|_| state.tools.get(name).is_some()) {
                let progress = tool_context.progress.clone();
                match Box::pin(hub.users.ready_domain(caller, progress.as_deref())).await {
                    Ok(domain) => tool_context.domain = domain,
                    Err(e) => {
                        return Ok(CallToolResult::error(vec![
                            rmcp::model::ContentBlock::text(format!(
                                "Error executing tool {name}: {}",
                                crate::tools::steps::worded(&e)
                            )),
                        ]));
                    }
                }
            }
            let cancel = tool_context.cancel.clone();
            let dispatched = crate::dispatch::call_tool(
                &state.tools,
                view,
                name,
                arguments,
                tool_context,
                traceparent,
            );
            // Boxed: the call's future is large, and in a debug build each wrapper's frames
            // would otherwise stack it again (a worker thread's stack overflowed).
            let dispatched = server_core::confirm::asking(confirmer, Box::pin(dispatched));
            let dispatched = server_core::client_link::linked(client, dispatched);
            match hub {
                Some((hub, caller)) => Box::pin(watched(hub, caller, dispatched, cancel)).await,
                None => dispatched.await,
            }
        };
        let call = async move {
            match self.log_level {
                Some(level) => {
                    let sink = ClientLog {
                        level,
                        queue: log_tx,
                    };
                    CLIENT_LOG.scope(sink, call).await
                }
                None => {
                    drop(log_tx);
                    call.await
                }
            }
        };
        tokio::pin!(call);
        let peer = self.peer;
        let mut last_progress = f64::NEG_INFINITY;
        // A client that asked for progress never waits longer than `--progress-interval` without
        // a word, whatever the tool reports itself (clients give up on silent calls).
        let started = tokio::time::Instant::now();
        let keepalive = self.state.domain.settings.execution.keepalive;
        let silence = tokio::time::sleep(keepalive);
        tokio::pin!(silence);
        let result = loop {
            tokio::select! {
                result = &mut call => break result,
                Some(param) = self.progress.recv() => {
                    deliver(&peer, self.task.as_ref(), self.token.is_some(), param, &mut last_progress).await;
                    silence.as_mut().reset(tokio::time::Instant::now() + keepalive);
                }
                Some(line) = log_rx.recv() => send_log(&peer, line).await,
                _ = &mut silence, if self.token.is_some() => {
                    if let Some(token) = &self.token {
                        let param = still_working(&self.request.name, started, last_progress, token);
                        send_progress(&peer, param, &mut last_progress).await;
                    }
                    silence.as_mut().reset(tokio::time::Instant::now() + keepalive);
                }
            }
        };
        // What was reported just before the end still goes out ahead of the result.
        while let Ok(line) = log_rx.try_recv() {
            send_log(&peer, line).await;
        }
        while let Ok(param) = self.progress.try_recv() {
            deliver(
                &peer,
                self.task.as_ref(),
                self.token.is_some(),
                param,
                &mut last_progress,
            )
            .await;
        }
        let mut result = result?;
        let shape = self.state.tools.get(&self.request.name).map(|tool| {
            let spec = tool.spec();
            (spec.shape, spec.shows_outputs)
        });
        match shape {
            Some((Shape::Outputs(kind), _)) => {
                apps::shape_result(&mut result, self.rich_outputs, Some(kind))
            }
            Some((_, true)) => apps::shape_result(&mut result, self.rich_outputs, None),
            _ => {}
        }
        Ok(result)
    }
}

/// A Hub user's call: a server stopped under it ends it, and a failure because the server went
/// away says so plainly.
async fn watched(
    hub: &hub::HubFront,
    caller: &Caller,
    dispatched: impl std::future::Future<Output = Result<CallToolResult, McpError>>,
    cancel: CancellationToken,
) -> Result<CallToolResult, McpError> {
    tokio::pin!(dispatched);
    let result = tokio::select! {
        result = &mut dispatched => result,
        why = hub.users.watch_server(caller) => {
            cancel.cancel();
            // Let the call wind down (hooks see its end), briefly: its server is gone.
            let _ = tokio::time::timeout(std::time::Duration::from_secs(10), dispatched).await;
            return Ok(CallToolResult::error(vec![rmcp::model::ContentBlock::text(crate::tools::steps::said(&why))]));
        }
    };
    match result {
        Ok(mut result) if result.is_error == Some(true) => {
            if let Some(why) = hub.users.explain_failure(caller).await {
                result.content.insert(
                    0,
                    rmcp::model::ContentBlock::text(crate::tools::steps::said(&why)),
                );
            }
            Ok(result)
        }
        other => other,
    }
}

/// Declares the MCP Apps extension (for a client that declared it).
pub(super) fn declare_apps(capabilities: &mut ServerCapabilities) {
    capabilities
        .extensions
        .get_or_insert_with(Default::default)
        .insert(apps::EXTENSION.to_owned(), apps::declaration());
}

/// Progress goes to the client (when it asked) and into the task's status message.
async fn deliver(
    peer: &rmcp::Peer<RoleServer>,
    task: Option<&rmcp::task_manager::TaskContext>,
    to_peer: bool,
    param: ProgressNotificationParam,
    last: &mut f64,
) {
    if let (Some(task), Some(message)) = (task, &param.message) {
        task.set_status_message(message.clone());
    }
    if to_peer {
        send_progress(peer, param, last).await;
    }
}

#[allow(deprecated)]
async fn send_log(peer: &rmcp::Peer<RoleServer>, line: LoggingMessageNotificationParam) {
    // Not logged on failure: that line would be a log line about sending log lines.
    let _ = peer.notify_logging_message(line).await;
}

/// The narrower view of the tools this request's client asked for (`/mcp?only=`), if any.
pub(super) fn tool_view(context: &RequestContext<RoleServer>) -> Option<crate::dispatch::ToolView> {
    context
        .extensions
        .get::<::http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<crate::dispatch::ToolView>())
        .cloned()
}

/// The progress that says a call is still at work: its seconds so far (the measure the execution
/// tools report in), kept above what was sent last, as progress must only grow.
fn still_working(
    tool: &str,
    started: tokio::time::Instant,
    last: f64,
    token: &rmcp::model::ProgressToken,
) -> ProgressNotificationParam {
    let elapsed = started.elapsed().as_secs_f64();
    let mut param = ProgressNotificationParam::new(token.clone(), elapsed.max(last + 0.001));
    param.message = Some(format!("Still working on {tool}: {elapsed:.0}s so far"));
    param
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
