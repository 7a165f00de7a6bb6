//! One tool, `runs_code`, that runs `code` in the current notebook's kernel through the granted
//! `execute-code` (the SDK's WIT, 0.3.0 now): the SDK twin of `declares_run`, so the end-to-end tests
//! can check that both versions' guests follow the kernel's rules (readiness, auto-restart)
//! exactly as the `execute_cell` tool does.

use jupyter_mcp_extension::{
    self as ext, Extension, HostError, Tool, ToolResult, notebook, register_extension,
};
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Deserialize, JsonSchema)]
struct RunArgs {
    /// The code to run.
    code: String,
}

/// The host error's case, as WIT names it: the tests check the kind as well as the words.
fn kind(error: &HostError) -> &'static str {
    match error {
        HostError::NotGranted(_) => "not-granted",
        HostError::NotAvailable(_) => "not-available",
        HostError::NotFound(_) => "not-found",
        HostError::Conflict(_) => "conflict",
        HostError::Kernel(_) => "kernel",
        HostError::Invalid(_) => "invalid",
        HostError::UnsupportedByClient(_) => "unsupported-by-client",
        HostError::Refused(_) => "refused",
        HostError::Failed(_) => "failed",
    }
}

struct Runs;

impl Runs {
    /// The outputs' JSON as the host gave it; a host error as its case and the host's words.
    fn runs_code(&self, args: RunArgs) -> ext::Result<ToolResult> {
        Ok(match notebook::execute_code("", &args.code, Some(30)) {
            Ok(outputs) => ToolResult::text(outputs),
            Err(error) => ToolResult::error(format!("{}: {}", kind(&error), error.message())),
        })
    }
}

impl Extension for Runs {
    fn new() -> Self {
        Runs
    }

    fn tools(&self) -> Vec<Tool<Self>> {
        vec![Tool::new(
            "runs_code",
            "Runs code in the current notebook's kernel and answers its outputs as JSON.",
            Self::runs_code,
        )]
    }
}

register_extension!(Runs);
