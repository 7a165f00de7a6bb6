//! `interrupt_kernel`: stop what a kernel is running, keeping its state.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolOutput, ToolResult, declare};
use server_core::domain::interrupt::Activity;
use server_core::domain::variables::first_line;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InterruptArgs {
    /// The notebook whose kernel to interrupt; without it the current notebook's, or, with no
    /// notebook in use, execute_code's default kernel.
    pub notebook_name: Option<String>,
}

pub fn interrupt_kernel() -> Arc<dyn Tool> {
    declare(
        "interrupt_kernel",
        "Interrupt the code a kernel is running (like the stop button in JupyterLab): the running \
         cell or execute_code call ends with KeyboardInterrupt, and the kernel keeps every \
         variable. Targets notebook_name's kernel, else the current notebook's, else the default \
         kernel of execute_code. An idle kernel is left alone.",
    )
    .runs_code()
    .run(run)
}

async fn run(context: ToolContext, args: InterruptArgs) -> ToolResult {
    let done = context
        .domain
        .interrupt(args.notebook_name.as_deref())
        .await?;
    let owner = &done.owner;
    let id = done.kernel_id.as_deref().unwrap_or("");
    let text = match done.activity {
        Activity::NoKernel => format!(
            "Nothing to interrupt: no notebook is in use and {owner} has not been started (it \
             starts with the first execute_code call)."
        ),
        Activity::Idle => format!(
            "Nothing to interrupt: the kernel of {owner} ('{id}') is idle. No interrupt was sent."
        ),
        Activity::Ours {
            code,
            elapsed,
            stopped,
        } => {
            let mut text = format!(
                "Interrupted the kernel of {owner} ('{id}'): it had been running `{}` for {:.1}s.",
                first_line(&code),
                elapsed.as_secs_f64()
            );
            text.push_str(if stopped {
                " The execution stopped (KeyboardInterrupt); the kernel and its variables are kept."
            } else {
                " The execution has not stopped yet: code in C extensions or sleeping in system \
                 calls may ignore the interrupt for a while. Call interrupt_kernel again, or \
                 restart_notebook as a last resort (that clears every variable)."
            });
            text
        }
        Activity::Theirs => format!(
            "Interrupted the kernel of {owner} ('{id}'): it was busy with code this server did not \
             send (someone else's, e.g. in JupyterLab). The kernel and its variables are kept."
        ),
    };
    Ok(ToolOutput::text(text))
}
