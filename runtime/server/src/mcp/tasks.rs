//! The tasks extension (`io.modelcontextprotocol/tasks`, 2026-07-28): a client that declared it
//! gets a task handle for a long tool call instead of waiting on the request, then polls
//! `tasks/get` for its state and inlined result, and may `tasks/cancel` it.
//!
//! Two questions decide it, kept apart: which *request* a client can follow as a task
//! ([`client_follows`]) and which *tool* may run as one ([`task_support`]).
//!
//! rmcp's `TaskManager` keeps the tasks (state, TTL, eviction, the -32602 for an unknown id) and
//! gates the `tasks/*` methods on the client's declaration; each tool says whether it may run as
//! a task (`ToolSpec::tasks`); this module says for how long a task is kept. Cancelling a task
//! cancels its call the same way a cancelled request does, so an execution interrupts its kernel.
//!
//! rmcp's tasks live in this process's memory; the execution a task ran is recorded with the
//! task's id, so `tasks/get` for a task this process does not hold (after a restart, or one a
//! replica sharing the store started) is answered from that record ([`from_record`]), with the
//! same words `get_execution` gives.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{DetailedTask, Task, TaskPayload, TaskStatus};

use crate::config::ExecutionLimits;
use crate::dispatch::ToolRegistry;
use server_core::domain::Domain;
use server_core::domain::executions::State;

/// A tool's own word on whether its calls may become tasks (`ToolSpec::tasks`): the ones that
/// run code, whose calls can take minutes, say `Optional`.
pub use crate::tools::TaskSupport;

/// What a tool call's request says about its client and tasks.
#[derive(Debug, Clone, Copy)]
pub struct TaskRequest {
    /// The client declared the extension (in this request's `_meta`, or at `initialize`).
    pub declared: bool,
    /// The request names a 2026-07-28 (or later) revision in its `_meta`.
    pub modern: bool,
    /// The request carries a `task` field (2025-11-25's task-augmented request).
    pub augmented: bool,
}

/// Whether the client will follow a task handle for this request. A 2026-07-28 request that
/// declares the extension allows one, as the extension says; in a 2025-11-25 session only a
/// task-augmented request asks for one (clients there declare the extension at `initialize`
/// without polling, e.g. the MCP Inspector's CLI, and would lose the result).
pub fn client_follows(request: TaskRequest) -> bool {
    request.declared && (request.modern || request.augmented)
}

/// How long a task is kept, from its creation: long enough for the longest execution the
/// operator allows, queued behind another one, plus ten minutes to fetch the result. rmcp fails a
/// task still running at its TTL and drops a finished one a TTL after it ended.
pub fn ttl(limits: &ExecutionLimits) -> Duration {
    limits
        .max_timeout
        .saturating_mul(2)
        .saturating_add(Duration::from_secs(600))
}

/// The task `task_id` as the record of the execution it ran shows it, when one did: working
/// while it runs, else completed with `get_execution`'s answer (through dispatch, as a call).
pub async fn from_record(
    tools: &ToolRegistry,
    domain: &Arc<Domain>,
    task_id: &str,
) -> Option<DetailedTask> {
    let execution = domain.executions.by_task(task_id)?;
    let created = chrono::DateTime::<chrono::Utc>::from(execution.started).to_rfc3339();
    let mut task = Task::new(
        task_id,
        TaskStatus::Working,
        created,
        chrono::Utc::now().to_rfc3339(),
    );
    task.ttl_ms = u64::try_from(ttl(&domain.settings.execution).as_millis()).ok();
    task.poll_interval_ms = Some(500);
    if execution.status().0 == State::Running {
        task.status_message = Some(format!(
            "execution {} runs (get_execution with its id shows its outputs so far)",
            execution.id
        ));
        return Some(DetailedTask::new(task, TaskPayload::Working));
    }
    let mut arguments = serde_json::Map::new();
    arguments.insert("execution_id".into(), execution.id.clone().into());
    let context = crate::tools::ToolContext::internal(domain.clone());
    let answer =
        crate::dispatch::call_tool(tools, None, "get_execution", Some(arguments), context, None)
            .await;
    let payload = match answer.map(serde_json::to_value) {
        Ok(Ok(serde_json::Value::Object(result))) => TaskPayload::Completed { result },
        Ok(_) => return None,
        Err(error) => TaskPayload::Failed {
            error: serde_json::to_value(error)
                .ok()
                .and_then(|v| v.as_object().cloned())
                .unwrap_or_default(),
        },
    };
    Some(DetailedTask::new(task, payload))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_task_only_where_the_client_follows_it() {
        let request = |declared, modern, augmented| TaskRequest {
            declared,
            modern,
            augmented,
        };
        assert!(client_follows(request(true, true, false)));
        assert!(client_follows(request(true, false, true)));
        assert!(
            !client_follows(request(true, false, false)),
            "legacy, plain"
        );
        assert!(!client_follows(request(false, true, false)), "undeclared");
        assert!(!client_follows(request(false, false, true)), "undeclared");
    }

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
            keepalive: Duration::from_secs(30),
            memory_budget: server_core::domain::executions::DEFAULT_MEMORY_BUDGET,
        };
        assert_eq!(ttl(&limits), Duration::from_secs(7800));
    }
}
