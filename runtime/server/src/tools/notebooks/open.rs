//! use_notebook: `domain::notebooks` opens the notebook; this says what became of it in the
//! Python server's words.

use schemars::JsonSchema;
use serde::Deserialize;

use crate::tools::format::{Bound, brief_table};
use crate::tools::{ToolContext, ToolOutput, ToolResult};
use server_core::domain::notebooks::{self, Attached, NotebookInUse, Opened, UseRequest, Used};

/// How often use_notebook reports a kernel start still pending.
const START_PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Debug, Deserialize, JsonSchema, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum UseMode {
    Connect,
    Create,
}

fn default_mode() -> UseMode {
    UseMode::Connect
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UseNotebookArgs {
    /// Unique identifier for the notebook.
    pub notebook_name: String,
    /// Path to the notebook file, relative to the Jupyter server root (e.g. 'notebook.ipynb').
    pub notebook_path: String,
    /// 'connect' to open an existing notebook, 'create' to create a new one.
    #[serde(default = "default_mode")]
    pub mode: UseMode,
    /// A running kernel to use (see list_kernels); without it a kernel is started.
    pub kernel_id: Option<String>,
    /// The kernelspec to start the notebook's kernel from (see list_kernelspecs), e.g. another
    /// Python environment or language; without it the server's default. Not with kernel_id.
    pub kernel_name: Option<String>,
}

pub(super) async fn use_notebook(context: ToolContext, args: UseNotebookArgs) -> ToolResult {
    let mode = match args.mode {
        UseMode::Connect => notebooks::UseMode::Connect,
        UseMode::Create => notebooks::UseMode::Create,
    };
    let request = UseRequest {
        name: args.notebook_name,
        path: args.notebook_path,
        mode,
        kernel_id: args.kernel_id.clone(),
        kernel_name: args.kernel_name.clone(),
        // A client that asked for progress hears of a kernel start that takes a while.
        start_progress: context.progress.clone().map(|reporter| {
            (
                START_PROGRESS_EVERY,
                crate::tools::execute::progress_sink(reporter),
            )
        }),
        defer_kernel: false,
    };
    let text = match context.domain.use_notebook(request).await? {
        Used::AlreadyCreated { name, path } => {
            format!("Notebook '{name}'(path: {path}) is already created. DO NOT CREATE AGAIN.")
        }
        Used::AlreadyInUse { notebook, previous } => {
            let name = &notebook.name;
            let kernel = notebook.kernel();
            let kernel_id = kernel.as_ref().map(|k| k.id().to_owned());
            let on_kernel = match &kernel_id {
                Some(id) => format!("It is in use on kernel '{id}'."),
                None => "It has no kernel yet: one is started when code first runs.".to_owned(),
            };
            let mut text = format!(
                "Notebook '{name}' is already connected — no need to call use_notebook again. \
                 {on_kernel}"
            );
            if let Some(previous) = previous {
                text.push_str(&format!(
                    " [INFO] Reactivating notebook '{name}' and deactivating '{previous}'."
                ));
            }
            if args.kernel_name.is_some() {
                text.push_str(
                    " The kernel_name you passed was not applied: call restart_notebook with \
                     kernel_name to move this notebook to another kernelspec.",
                );
            }
            if args.kernel_id.is_some() && args.kernel_id != kernel_id {
                text.push_str(
                    " The kernel_id you passed was not applied: a notebook in use keeps its kernel \
                     (unuse_notebook first to attach another).",
                );
            }
            text
        }
        Used::Opened(opened) => opened_text(&opened, context.domain.settings.output.max_chars),
    };
    Ok(ToolOutput::text(text))
}

/// use_notebook's answer for a notebook it opened: how its kernel came, which backend edits it,
/// and its first cells.
fn opened_text(opened: &Opened, max_chars: usize) -> String {
    let Opened {
        notebook,
        read,
        attached,
        spec,
        previous,
    } = opened;
    let mut kernel_line = attached_line(notebook, attached);
    if let Some(spec) = spec {
        kernel_line.push_str(&format!(
            "\n[INFO] The kernel runs kernelspec '{}' ({}).",
            spec.name, spec.display_name
        ));
    }
    let backend_line = match notebook.document.backend() {
        "live" => {
            "[INFO] Editing live through the notebook's collaboration room (live backend): people with it open see each change as it happens."
        }
        _ => {
            "[INFO] Editing through the Jupyter contents API (file backend): each edit saves the file."
        }
    };
    let mut lines = vec![format!("{kernel_line}\n{backend_line}")];
    if let Some(previous) = previous {
        lines.push(format!("[INFO] Deactivating notebook '{previous}'."));
    }
    lines.push(format!(
        "[INFO] Successfully activate notebook '{}'.",
        notebook.name
    ));
    let total = read.cells.len();
    lines.push(format!("\nNotebook has {total} cells."));
    lines.push(format!("Showing first {} cells:\n", total.min(20)));
    let bound = Bound {
        max_chars,
        name: &notebook.name,
    };
    lines.push(brief_table(read, 0, 20, bound));
    lines.join("\n")
}

/// The line saying how a notebook's kernel came to it.
pub(super) fn attached_line(notebook: &NotebookInUse, attached: &Attached) -> String {
    let Some(kernel) = notebook.kernel() else {
        return "[INFO] No kernel yet: one is started when code first runs (--start-new-code-sandbox is false)."
            .to_owned();
    };
    let id = kernel.id();
    let path = &notebook.path;
    match attached {
        Attached::Deferred => format!("[INFO] Kernel '{id}' was started when code first ran."),
        Attached::Given => format!(
            "[INFO] Connected to kernel '{id}' (given by kernel_id; it is left running when the notebook is released)."
        ),
        Attached::Adopted => format!(
            "[INFO] Adopted kernel '{id}' of the Jupyter session already open on '{path}' (kernel.adopt-session is on); it is shared, and left running when the notebook is released."
        ),
        Attached::Shared => format!(
            "[INFO] Started kernel '{id}' for this notebook; it is shared with anyone who opens '{path}' in JupyterLab."
        ),
        Attached::BesideTheirs { their_kernel } => format!(
            "[INFO] '{path}' is already open in a Jupyter session (kernel '{}'); it is left alone, and this notebook runs on its own new kernel '{id}' (not shared).",
            their_kernel.as_deref().unwrap_or("none"),
        ),
        Attached::OpenedMeanwhile => format!(
            "[INFO] '{path}' was opened in Jupyter meanwhile; this notebook runs on its own kernel '{id}' (not shared)."
        ),
    }
}
