//! Hook events, typed as the WIT types them.

pub use crate::bindings::jupyter_mcp::extension::types::{
    AfterExecute, AfterToolCall, BeforeExecute, BeforeToolCall, HookEvent, KernelChange,
    KernelLifecycle,
};

impl HookEvent {
    /// The event's name as native handlers and spans know it (`before_execute`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            HookEvent::BeforeToolCall(_) => "before_tool_call",
            HookEvent::AfterToolCall(_) => "after_tool_call",
            HookEvent::BeforeExecute(_) => "before_execute",
            HookEvent::AfterExecute(_) => "after_execute",
            HookEvent::KernelLifecycle(_) => "kernel_lifecycle",
        }
    }
}

/// What a hook handler decides about the call a `before_*` event announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// Let it go on.
    Proceed,
    /// Go on only once the person says yes; the reason is shown to them.
    Confirm(String),
}
