//! Cell tools: read, insert, edit, move, delete, clear and execute cells of a notebook in use.
//!
//! Results follow the Python server's texts (`tools::format`). Cells can be named by index or
//! by id (an index is a position that shifts when anyone inserts above it; an id does not);
//! every result carries the id it acted on in its `_meta` (`io.jupyter-mcp/cell_id`). The edits and runs
//! themselves are the domain's (`domain::cells`, `domain::execution`).

mod edit;
mod read;

pub(crate) use read::{people_line, people_meta};
pub(crate) mod run;

use std::sync::Arc;

use serde_json::json;

use super::{TaskSupport, Tool, ToolContext, ToolError, ToolOutput, declare};
use crate::tools::format::Bound;
use crate::tools::wire::Shape;
use server_core::domain::cells::{Notebook, persisted};
use server_core::domain::notebooks::NotebookInUse;
use server_core::domain::versions::notebook_version;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        declare(
            "read_notebook",
            "Read a notebook in use: a brief table (index, type, execution count, first line) or \
             the detailed source of each cell, paged with start_index and limit. No outputs; use \
             read_cell for those.",
        )
        .read_only()
        .shape(Shape::Text)
        .run(read::read_notebook),
        declare(
            "read_cell",
            "Read one cell (by cell_index or cell_id): its header, source and, for code cells, \
             its outputs (images as image content).",
        )
        .read_only()
        .shape(Shape::Outputs("cell.read"))
        .shows_outputs()
        .run(read::read_cell),
        declare(
            "insert_cell",
            "Insert a code, markdown or raw cell at cell_index (-1 appends) and show the cells \
             around it.",
        )
        .shape(Shape::Text)
        .run(edit::insert_cell),
        declare(
            "insert_execute_code_cell",
            "Insert a code cell into the current notebook at cell_index (-1 appends) and run it; \
             the outputs are saved into the cell and returned.",
        )
        .runs_code()
        .shape(Shape::Outputs("cell.insert_execute"))
        .shows_outputs()
        .tasks(TaskSupport::Optional)
        .run(run::insert_execute_code_cell),
        declare(
            "overwrite_cell_source",
            "Replace a cell's whole source (by cell_index or cell_id); returns a diff.",
        )
        .shape(Shape::Text)
        .run(edit::overwrite_cell_source),
        declare(
            "edit_cell_source",
            "Replace an exact string in a cell's source (literal, not a pattern). An old_string \
             that occurs more than once is refused unless replace_all is true. Returns a diff.",
        )
        .shape(Shape::Text)
        .run(edit::edit_cell_source),
        declare(
            "execute_cell",
            "Run a code cell (by cell_index or cell_id) in the notebook's kernel. Outputs and the \
             execution count are written into the notebook as they arrive and returned. On timeout \
             the kernel is interrupted and the outputs so far are returned.",
        )
        .runs_code()
        .shape(Shape::Outputs("cell.execute"))
        .shows_outputs()
        .tasks(TaskSupport::Optional)
        .run(run::execute_cell),
        declare(
            "delete_cell",
            "Delete cells by cell_indices or by cell_ids_to_delete, all at once; reports each \
             deleted cell with its source.",
        )
        .shape(Shape::Text)
        .run(edit::delete_cell),
        declare(
            "clear_cell_output",
            "Remove the outputs (and execution count) of a code cell.",
        )
        .shape(Shape::Text)
        .run(edit::clear_cell_output),
        declare(
            "move_cell",
            "Move a cell (source_index or source_cell_id) so it ends up at target_index, or where \
             the cell target_cell_id is now; shows the cells around it.",
        )
        .shape(Shape::Text)
        .run(edit::move_cell),
    ]
}

fn notebook_in_use(
    context: &ToolContext,
    name: Option<&str>,
) -> Result<Arc<NotebookInUse>, ToolError> {
    context.domain.notebook(name)
}

/// How answers about notebook `name` are bounded (`--max-output-chars`).
fn bound<'a>(context: &ToolContext, name: &'a str) -> Bound<'a> {
    Bound {
        max_chars: context.domain.settings.output.max_chars,
        name,
    }
}

fn with_cell_id(output: ToolOutput, cell_id: &str) -> ToolOutput {
    output.with_meta("cell_id", json!(cell_id))
}

/// An edit's text with the cell's version now and whether the change is on disk, both also in
/// `_meta`.
/// And the notebook's revision, as the last line.
async fn with_version(text: String, version: &str, in_use: &NotebookInUse) -> ToolOutput {
    let saved = persisted(in_use);
    let revision = in_use.revision().await.ok();
    let revision_line = match &revision {
        Some(revision) => format!("revision: {revision}\n"),
        None => String::new(),
    };
    let output = ToolOutput::text(format!(
        "{text}\nversion: {version}\n{revision_line}{}",
        saved.note
    ))
    .with_meta("cell_version", json!(version))
    .with_meta("persisted", json!(saved.on_disk));
    match &revision {
        Some(revision) => with_revision_named(output, revision),
        None => output,
    }
}

/// Whether the change is on disk, and the notebook's revision, in `_meta` only: for the tools
/// whose text is the Python server's, which its clients compare whole.
async fn with_persisted(output: ToolOutput, in_use: &NotebookInUse) -> ToolOutput {
    let output = output.with_meta("persisted", json!(persisted(in_use).on_disk));
    with_revision(output, in_use).await
}

/// The notebook's structure version after the call, in `_meta`.
fn with_notebook_version(output: ToolOutput, notebook: &Notebook) -> ToolOutput {
    output.with_meta("notebook_version", json!(notebook_version(notebook)))
}

/// The notebook's revision, `get_notebook_changes`' cursor, in `_meta` (taken before a read, it
/// never passes over what the read shows).
pub(crate) async fn with_revision(output: ToolOutput, in_use: &NotebookInUse) -> ToolOutput {
    match in_use.revision().await {
        Ok(revision) => with_revision_named(output, &revision),
        Err(e) => {
            tracing::debug!("no revision for notebook {}: {e}", in_use.name);
            output
        }
    }
}

/// The revision in `_meta`.
pub(crate) fn with_revision_named(output: ToolOutput, revision: &str) -> ToolOutput {
    output.with_meta("revision", json!(revision))
}

fn default_true() -> bool {
    true
}
