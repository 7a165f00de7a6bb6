//! Notebook binding: use_notebook, list_notebooks, restart_notebook, unuse_notebook.
//!
//! A notebook in use gets a kernel. Given `kernel_id`, that kernel. Otherwise, if no Jupyter
//! session holds the path, we start a kernel and create a session for the path, so a person who
//! opens the notebook in JupyterLab shares the agent's kernel. If a session already holds it (a
//! person has it open), we start our own kernel and leave theirs alone.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use crate::tools::wire::Shape;
use crate::tools::{Tool, ToolContext, ToolOutput, ToolResult, declare};
use server_core::domain::kernels::Liveness;

mod open;
mod release;

use open::use_notebook;
use release::{restart_notebook, unuse_notebook};

pub use open::{UseMode, UseNotebookArgs};
pub use release::{NotebookNameArgs, RestartArgs};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        declare(
            "use_notebook",
            "Open (mode 'connect') or create (mode 'create') a notebook, give it a name, and make \
             it the current notebook. It gets a kernel: kernel_id if given, else one started for \
             it and shared with JupyterLab through a Jupyter session. Shows the first cells.",
        )
        .shape(Shape::Text)
        .run(use_notebook),
        declare(
            "list_notebooks",
            "List the notebooks in use with their paths, kernels, kernel status and which one is \
             current.",
        )
        .read_only()
        .shape(Shape::Text)
        .run(list_notebooks),
        declare(
            "restart_notebook",
            "Restart a notebook's kernel: all variables, imports and definitions are cleared. \
             Also brings back a notebook whose kernel was lost.",
        )
        .runs_code()
        .shape(Shape::Text)
        .run(restart_notebook),
        declare(
            "unuse_notebook",
            "Stop using a notebook: release its name and stop the kernel this server started for \
             it, unless someone else uses that kernel.",
        )
        .shape(Shape::Text)
        .run(unuse_notebook),
    ]
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

async fn list_notebooks(context: ToolContext, _args: NoArgs) -> ToolResult {
    let domain = &context.domain;
    let all = domain.notebooks.all();
    if all.is_empty() {
        return Ok(ToolOutput::text(
            "No managed notebooks. Use the use_notebook tool to manage notebooks first.",
        ));
    }
    let current = domain.notebooks.current_name();
    let mut lines = vec!["Name\tPath\tKernel_ID\tKernel_Status\tActivate\tBackend".to_owned()];
    for notebook in all {
        let kernel = notebook.kernel();
        let status = match kernel.as_ref().map(|k| k.liveness()) {
            None => "not_initialized".to_owned(),
            Some(Liveness::Gone(_)) => "dead".to_owned(),
            Some(Liveness::Alive) => {
                match kernel.as_ref().map(|k| k.connection().execution_state()) {
                    Some(state) if state != "unknown" => state,
                    _ => "alive".to_owned(),
                }
            }
        };
        let kernel_id = kernel.as_ref().map_or("-", |k| k.id());
        let active = if current.as_deref() == Some(notebook.name.as_str()) {
            "✓"
        } else {
            ""
        };
        lines.push(format!(
            "{}\t{}\t{}\t{status}\t{active}\t{}",
            notebook.name,
            notebook.path,
            kernel_id,
            notebook.document.backend()
        ));
    }
    Ok(ToolOutput::text(lines.join("\n")))
}
