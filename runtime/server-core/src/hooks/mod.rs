//! Hooks: events before and after every tool call and kernel execution, and on kernel lifecycle,
//! delivered to registered handlers (native ones such as the OpenTelemetry writer, later wasm
//! guests) without touching the code that fires them.
//!
//! Events are fired in exactly two places: `dispatch` (tool events) and the kernel layer
//! (execute and lifecycle events). Handlers run in registration order. A *critical* handler
//! (`propagate_errors`) can fail the call it observes; an optional one's error is logged and
//! suppressed. Each handler gets its own context map per before/after pair.
//!
//! A critical handler may also answer a `before_*` event with [`Decision::Confirm`]: the call
//! goes on only once the person behind it says yes (asked through the confirm service, as
//! `execution.confirm` asks); any other answer refuses the call as the handler would have.

mod kernels;
pub mod otel;
mod uses;

pub use uses::GuestUse;

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

use notebook_format::outputs::Output;
use serde_json::{Map, Value, json};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HookKind {
    BeforeToolCall,
    AfterToolCall,
    BeforeExecute,
    AfterExecute,
    KernelLifecycle,
}

impl HookKind {
    pub fn as_str(self) -> &'static str {
        match self {
            HookKind::BeforeToolCall => "before_tool_call",
            HookKind::AfterToolCall => "after_tool_call",
            HookKind::BeforeExecute => "before_execute",
            HookKind::AfterExecute => "after_execute",
            HookKind::KernelLifecycle => "kernel_lifecycle",
        }
    }
}

/// An event and its data, typed; [`HookEvent::to_json`] gives it as the Python server passes it
/// to handlers (its kwargs).
#[derive(Debug, Clone, PartialEq)]
pub enum HookEvent {
    BeforeToolCall {
        tool_name: String,
        /// The call's arguments, a JSON object.
        arguments: Value,
    },
    AfterToolCall {
        tool_name: String,
        arguments: Value,
        /// The result's text, when the tool succeeded.
        result: Option<String>,
        error: Option<String>,
    },
    BeforeExecute {
        kernel_id: String,
        code: String,
    },
    AfterExecute {
        kernel_id: String,
        outputs: Vec<Output>,
        error: Option<String>,
    },
    KernelLifecycle {
        /// `started`, `restarted`, `stopped`, `lost`, ...
        event_type: String,
        kernel_id: String,
        kernel_name: String,
    },
}

impl HookEvent {
    pub fn before_tool_call(tool_name: &str, arguments: &Value) -> Self {
        HookEvent::BeforeToolCall {
            tool_name: tool_name.to_owned(),
            arguments: arguments.clone(),
        }
    }

    pub fn after_tool_call(
        tool_name: &str,
        arguments: &Value,
        result: Option<String>,
        error: Option<String>,
    ) -> Self {
        HookEvent::AfterToolCall {
            tool_name: tool_name.to_owned(),
            arguments: arguments.clone(),
            result,
            error,
        }
    }

    pub fn before_execute(kernel_id: &str, code: &str) -> Self {
        HookEvent::BeforeExecute {
            kernel_id: kernel_id.to_owned(),
            code: code.to_owned(),
        }
    }

    pub fn after_execute(kernel_id: &str, outputs: &[Output], error: Option<String>) -> Self {
        HookEvent::AfterExecute {
            kernel_id: kernel_id.to_owned(),
            outputs: outputs.to_vec(),
            error,
        }
    }

    pub fn kernel_lifecycle(event_type: &str, kernel_id: &str, kernel_name: &str) -> Self {
        HookEvent::KernelLifecycle {
            event_type: event_type.to_owned(),
            kernel_id: kernel_id.to_owned(),
            kernel_name: kernel_name.to_owned(),
        }
    }

    pub fn kind(&self) -> HookKind {
        match self {
            HookEvent::BeforeToolCall { .. } => HookKind::BeforeToolCall,
            HookEvent::AfterToolCall { .. } => HookKind::AfterToolCall,
            HookEvent::BeforeExecute { .. } => HookKind::BeforeExecute,
            HookEvent::AfterExecute { .. } => HookKind::AfterExecute,
            HookEvent::KernelLifecycle { .. } => HookKind::KernelLifecycle,
        }
    }

    /// The event's data with the keys the Python server passes its handlers: the one place this
    /// JSON is made.
    pub fn to_json(&self) -> Map<String, Value> {
        let data = match self {
            HookEvent::BeforeToolCall {
                tool_name,
                arguments,
            } => json!({"tool_name": tool_name, "arguments": arguments}),
            HookEvent::AfterToolCall {
                tool_name,
                arguments,
                result,
                error,
            } => {
                json!({"tool_name": tool_name, "arguments": arguments, "result": result, "error": error})
            }
            HookEvent::BeforeExecute { kernel_id, code } => {
                json!({"kernel_id": kernel_id, "code": code})
            }
            HookEvent::AfterExecute {
                kernel_id,
                outputs,
                error,
            } => json!({"kernel_id": kernel_id, "outputs": outputs, "error": error}),
            HookEvent::KernelLifecycle {
                event_type,
                kernel_id,
                kernel_name,
            } => {
                json!({"event_type": event_type, "kernel_id": kernel_id, "kernel_name": kernel_name})
            }
        };
        match data {
            Value::Object(map) => map,
            _ => unreachable!("event data is an object"),
        }
    }
}

/// Something that happened inside a running execution that no hook event announces (the kernel
/// sandbox's egress decisions). Handlers may note it on that execution, as the OpenTelemetry
/// writer does with a span event; guests are not told (no WIT event carries it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutionNote {
    /// e.g. `egress.refused`, `egress.allowed`.
    pub name: &'static str,
    pub attributes: Vec<(&'static str, String)>,
}

pub type HookFuture<'a> = Pin<Box<dyn Future<Output = Result<(), String>> + Send + 'a>>;

/// What a handler decides about the call a `before_*` event announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Proceed,
    /// Go on only if the person says yes; the reason is shown to them.
    Confirm(String),
}

pub type DecisionFuture<'a> = Pin<Box<dyn Future<Output = Result<Decision, String>> + Send + 'a>>;

/// A `before_*` event as a handler deciding about its call sees it, with the handler's own
/// context for the pair.
pub struct Announced<'a> {
    pub event: &'a HookEvent,
    pub context: &'a mut Map<String, Value>,
}

pub trait HookHandler: Send + Sync {
    /// Shown in logs and in the error of a call this handler refused.
    fn name(&self) -> &str;
    /// Whether this handler's errors fail the call (critical) or are only logged (optional).
    fn propagate_errors(&self) -> bool;
    /// Handles one event; `context` is this handler's own map, shared by a before/after pair.
    fn on_event<'a>(
        &'a self,
        event: &'a HookEvent,
        context: &'a mut Map<String, Value>,
    ) -> HookFuture<'a>;
    /// Handles a `before_*` event and decides about the call it announces. The default is
    /// `on_event`, then [`Decision::Proceed`]; a handler that guards calls overrides it to ask
    /// for the person's yes. Only a critical handler's `Confirm` is followed (an optional one
    /// observes, and never holds a call); it is logged and ignored otherwise.
    fn decide<'a>(&'a self, before: Announced<'a>) -> DecisionFuture<'a> {
        Box::pin(async move {
            self.on_event(before.event, before.context)
                .await
                .map(|()| Decision::Proceed)
        })
    }
    /// Notes `note` on the execution running on `kernel_id`, if the handler follows one.
    fn on_execution_note(&self, _kernel_id: &str, _note: &ExecutionNote) {}
    /// Called once when the server stops (e.g. to flush).
    fn shutdown(&self) {}
}

/// A critical handler refused or failed: the call it guards fails with this message.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("refused by hook handler '{handler}': {message}")]
pub struct HookError {
    pub handler: String,
    pub message: String,
}

pub type HandlerId = u64;

/// The contexts of one before/after pair, one map per handler.
#[derive(Debug, Default)]
pub struct Pair {
    contexts: Vec<(HandlerId, Map<String, Value>)>,
}

tokio::task_local! {
    /// What the events of one tool call share: the caller's trace context and a place for
    /// handlers to leave call-wide values (the OTel writer keeps its tool span there).
    pub static CALL_SCOPE: Arc<CallScope>;
}

#[derive(Debug, Default)]
pub struct CallScope {
    /// W3C `traceparent` from the request's `_meta`, if the client sent one.
    pub traceparent: Option<String>,
    /// The tool called (for words that say what a guest was doing when it asked).
    pub tool: Option<String>,
    pub shared: Mutex<Map<String, Value>>,
    /// What extensions used during the call (host functions, HTTP, storage), each becoming a
    /// child span of the tool call.
    pub uses: Mutex<Vec<GuestUse>>,
}

impl CallScope {
    pub fn current() -> Option<Arc<CallScope>> {
        CALL_SCOPE.try_with(Arc::clone).ok()
    }
}

#[derive(Default)]
pub struct Hooks {
    handlers: RwLock<Vec<(HandlerId, Arc<dyn HookHandler>)>>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks")
            .field(
                "handlers",
                &self.handlers.read().map(|h| h.len()).unwrap_or(0),
            )
            .finish()
    }
}

impl Hooks {
    pub fn register(&self, handler: Arc<dyn HookHandler>) -> HandlerId {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        self.handlers
            .write()
            .expect("handlers lock")
            .push((id, handler));
        id
    }

    pub fn unregister(&self, id: HandlerId) -> bool {
        let mut handlers = self.handlers.write().expect("handlers lock");
        let before = handlers.len();
        handlers.retain(|(h, _)| *h != id);
        handlers.len() != before
    }

    /// Puts `handler` where the handler `id` is, keeping its place in the order (a reloaded
    /// guest); `false` when there is no such handler.
    pub fn replace(&self, id: HandlerId, handler: Arc<dyn HookHandler>) -> bool {
        let mut handlers = self.handlers.write().expect("handlers lock");
        match handlers.iter_mut().find(|(h, _)| *h == id) {
            Some(slot) => {
                slot.1 = handler;
                true
            }
            None => false,
        }
    }

    /// Tells every handler of `note`, which happened in the execution running on `kernel_id`.
    pub fn execution_note(&self, kernel_id: &str, note: &ExecutionNote) {
        for (_, handler) in self.snapshot() {
            handler.on_execution_note(kernel_id, note);
        }
    }

    pub fn is_empty(&self) -> bool {
        self.handlers.read().expect("handlers lock").is_empty()
    }

    fn snapshot(&self) -> Vec<(HandlerId, Arc<dyn HookHandler>)> {
        self.handlers.read().expect("handlers lock").clone()
    }

    async fn deliver(
        handler: &dyn HookHandler,
        event: &HookEvent,
        context: &mut Map<String, Value>,
    ) -> Result<(), HookError> {
        match handler.on_event(event, context).await {
            Ok(()) => Ok(()),
            Err(message) => Self::failed(handler, event, message),
        }
    }

    /// A handler's failure: the call's refusal when the handler is critical, else a debug line.
    fn failed(
        handler: &dyn HookHandler,
        event: &HookEvent,
        message: String,
    ) -> Result<(), HookError> {
        if handler.propagate_errors() {
            return Err(HookError {
                handler: handler.name().to_owned(),
                message,
            });
        }
        tracing::debug!(
            handler = handler.name(),
            event = event.kind().as_str(),
            "hook handler failed: {message}"
        );
        Ok(())
    }

    /// Delivers a `before_*` event: a critical handler's refusal fails the call, and its
    /// `Confirm` holds it until the person answers.
    async fn decide(
        handler: &dyn HookHandler,
        event: &HookEvent,
        context: &mut Map<String, Value>,
    ) -> Result<(), HookError> {
        let refused = |message| HookError {
            handler: handler.name().to_owned(),
            message,
        };
        match handler.decide(Announced { event, context }).await {
            Ok(Decision::Proceed) => Ok(()),
            Ok(Decision::Confirm(reason)) if handler.propagate_errors() => {
                let answer = crate::confirm::ask(&question(handler.name(), &reason, event)).await;
                let nothing = match event {
                    HookEvent::BeforeToolCall { tool_name, .. } => {
                        format!("The tool '{tool_name}' was not called")
                    }
                    HookEvent::BeforeExecute { kernel_id, .. } => {
                        format!("Nothing ran in kernel {kernel_id}")
                    }
                    _ => "Nothing was done".to_owned(),
                };
                let asked_by = format!("hook handler '{}'", handler.name());
                match crate::confirm::refusal(
                    &answer,
                    &nothing,
                    &asked_by,
                    "ask the operator to change that handler",
                ) {
                    None => Ok(()),
                    Some(message) => Err(refused(message)),
                }
            }
            Ok(Decision::Confirm(reason)) => {
                tracing::debug!(
                    handler = handler.name(),
                    "an optional hook handler asked for confirmation ({reason}); only critical \
                     handlers can hold a call, so it goes on"
                );
                Ok(())
            }
            Err(message) => Self::failed(handler, event, message),
        }
    }

    /// Fires a `before_*` event. On a critical refusal the pair is still returned (with the
    /// contexts of the handlers that ran), so the `after_*` event can carry the refusal.
    pub async fn before(&self, event: &HookEvent) -> (Pair, Result<(), HookError>) {
        let mut pair = Pair::default();
        for (id, handler) in self.snapshot() {
            let mut context = Map::new();
            let outcome = Self::decide(handler.as_ref(), event, &mut context).await;
            pair.contexts.push((id, context));
            if let Err(e) = outcome {
                return (pair, Err(e));
            }
        }
        (pair, Ok(()))
    }

    /// Fires an `after_*` event to every handler, each with its context from the pair; the first
    /// critical failure is returned (the others still run).
    pub async fn after(&self, mut pair: Pair, event: &HookEvent) -> Result<(), HookError> {
        let mut first_error = None;
        for (id, handler) in self.snapshot() {
            let mut context = pair
                .contexts
                .iter_mut()
                .find(|(h, _)| *h == id)
                .map(|(_, c)| std::mem::take(c))
                .unwrap_or_default();
            if let Err(e) = Self::deliver(handler.as_ref(), event, &mut context).await {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    /// Runs `work` between a `before_*` and an `after_*` event: the one sequence every observed
    /// operation follows. A critical refusal of the before event skips `work` (its after event
    /// still fires, carrying the refusal); a critical refusal of the after event fails a `work`
    /// that succeeded. (Callers whose events are costly to build check `is_empty` first.)
    pub async fn around<T, E, F>(
        &self,
        before: &HookEvent,
        work: F,
        after: impl FnOnce(&Result<T, E>) -> HookEvent,
    ) -> Result<T, E>
    where
        F: Future<Output = Result<T, E>>,
        E: From<HookError>,
    {
        let (pair, refused) = self.before(before).await;
        let outcome = match refused {
            Err(refusal) => Err(E::from(refusal)),
            Ok(()) => work.await,
        };
        let event = after(&outcome);
        match self.after(pair, &event).await {
            Err(refusal) if outcome.is_ok() => Err(E::from(refusal)),
            _ => outcome,
        }
    }

    /// Fires a single event (kernel lifecycle).
    pub async fn fire(&self, event: &HookEvent) -> Result<(), HookError> {
        self.after(Pair::default(), event).await
    }

    pub fn shutdown(&self) {
        for (_, handler) in self.snapshot() {
            handler.shutdown();
        }
    }
}

/// The question a handler's `Confirm` puts to the person: what is about to happen, and why.
fn question(handler: &str, reason: &str, event: &HookEvent) -> String {
    let why = format!("(Asked by hook handler '{handler}': {reason}.)");
    match event {
        HookEvent::BeforeExecute { kernel_id, code } => format!(
            "Run this code in kernel {kernel_id}?\n{why}\n\n{}",
            crate::confirm::shown(code)
        ),
        HookEvent::BeforeToolCall {
            tool_name,
            arguments,
        } => {
            let arguments = serde_json::to_string_pretty(arguments).unwrap_or_default();
            format!(
                "Allow this call to the tool '{tool_name}'?\n{why}\n\nArguments:\n{}",
                crate::confirm::shown(&arguments)
            )
        }
        _ => format!("Allow this?\n{why}"),
    }
}

#[cfg(test)]
mod tests;
