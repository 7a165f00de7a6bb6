//! The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28): a client that declared it
//! gets a task handle for a long tool call instead of waiting on the request, then polls
//! `tasks/get` for its state and inlined result, and may `tasks/cancel` it.
//!
//! rmcp's `TaskManager` keeps the tasks (state, TTL, eviction, the -32602 for an unknown id) and
//! gates the `tasks/*` methods on the client's declaration; each tool says whether it may run as
//! a task (`ToolSpec::tasks`); this module says for how long a task is kept. Cancelling a task
//! cancels its call the same way a cancelled request does, so an execution interrupts its kernel.

use std::time::Duration;

use crate::config::ExecutionLimits;

/// A tool's own word on whether its calls may become tasks (`ToolSpec::tasks`): the ones that
/// run code, whose calls can take minutes, say `Optional`.
pub use crate::tools::TaskSupport;

/// How long a task is kept, from its creation: long enough for the longest execution the
/// operator allows, queued behind another one, plus ten minutes to fetch the result. rmcp fails a
/// task still running at its TTL and drops a finished one a TTL after it ended.
pub fn ttl(limits: &ExecutionLimits) -> Duration {
    limits
        .max_timeout
        .saturating_mul(2)
        .saturating_add(Duration::from_secs(600))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_execution_tools_run_as_tasks() {
        let tools = crate::dispatch::ToolRegistry::builtin();
        for tool in tools.all() {
            let spec = tool.spec();
            let runs_code = matches!(
                spec.name.as_str(),
                "execute_cell" | "execute_code" | "insert_execute_code_cell"
            );
            let expected = if runs_code {
                TaskSupport::Optional
            } else {
                TaskSupport::Forbidden
            };
            assert_eq!(spec.tasks, expected, "{}", spec.name);
        }
        let limits = ExecutionLimits {
            default_timeout: Duration::from_secs(30),
            max_timeout: Duration::from_secs(3600),
        };
        assert_eq!(ttl(&limits), Duration::from_secs(7800));
    }
}
