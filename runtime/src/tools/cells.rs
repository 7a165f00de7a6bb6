//! Cell tools: read, insert, edit, move, delete, clear and execute cells of a notebook in use.
//!
//! Results follow the Python server's texts. Cells can be named by index or by id (an index is a
//! position that shifts when anyone inserts above it; an id does not); every result carries the id
//! it acted on in its `_meta` (`io.jupyter-mcp/cell_id`).

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::execute::{format_secs, progress_sink, render_execution};
use super::outputs::{self, Rendered};
use super::{Tool, ToolContext, ToolError, ToolOutput, native, seconds};
use crate::capabilities::AUTO_RESTART;
use crate::jupyter::document::{DocumentError, Edit};
use crate::jupyter::kernel::{Completion, ExecutionRequest, Kernel, Liveness};
use crate::jupyter::notebook::{Cell, CellType, Notebook};
use crate::notebooks::NotebookInUse;

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        native(
            "read_notebook",
            "Read a notebook in use: a brief table (index, type, execution count, first line) or \
             the detailed source of each cell, paged with start_index and limit. No outputs; use \
             read_cell for those.",
            true,
            read_notebook,
        ),
        native(
            "read_cell",
            "Read one cell (by cell_index or cell_id): its header, source and, for code cells, \
             its outputs (images as image content).",
            true,
            read_cell,
        ),
        native(
            "insert_cell",
            "Insert a code, markdown or raw cell at cell_index (-1 appends) and show the cells \
             around it.",
            false,
            insert_cell,
        ),
        native(
            "insert_execute_code_cell",
            "Insert a code cell into the current notebook at cell_index (-1 appends) and run it; \
             the outputs are saved into the cell and returned.",
            false,
            insert_execute_code_cell,
        ),
        native(
            "overwrite_cell_source",
            "Replace a cell's whole source (by cell_index or cell_id); returns a diff.",
            false,
            overwrite_cell_source,
        ),
        native(
            "edit_cell_source",
            "Replace an exact string in a cell's source (literal, not a pattern). An old_string \
             that occurs more than once is refused unless replace_all is true. Returns a diff.",
            false,
            edit_cell_source,
        ),
        native(
            "execute_cell",
            "Run a code cell (by cell_index or cell_id) in the notebook's kernel. Outputs and the \
             execution count are written into the notebook as they arrive and returned. On timeout \
             the kernel is interrupted and the outputs so far are returned.",
            false,
            execute_cell,
        ),
        native(
            "delete_cell",
            "Delete cells by cell_indices or by cell_ids_to_delete, all at once; reports each \
             deleted cell with its source.",
            false,
            delete_cell,
        ),
        native(
            "clear_cell_output",
            "Remove the outputs (and execution count) of a code cell.",
            false,
            clear_cell_output,
        ),
        native(
            "move_cell",
            "Move a cell (source_index or source_cell_id) so it ends up at target_index, or where \
             the cell target_cell_id is now; shows the cells around it.",
            false,
            move_cell,
        ),
    ]
}

// ---- shared formatting -------------------------------------------------------------------

pub fn count_text(cell: &Cell) -> String {
    match cell.execution_count {
        Some(n) if n > 0 => n.to_string(),
        _ => "N/A".into(),
    }
}

pub fn cell_header(index: usize, cell: &Cell) -> String {
    format!(
        "=====Cell {index} | type: {} | execution count: {}=====",
        cell.cell_type.as_str(),
        count_text(cell)
    )
}

/// The table the Python server shows for a range of cells.
pub fn brief_table(notebook: &Notebook, start: usize, limit: usize) -> String {
    if notebook.cells.is_empty() {
        return "Notebook is empty".into();
    }
    let end = if limit == 0 {
        notebook.cells.len()
    } else {
        (start + limit).min(notebook.cells.len())
    };
    if start >= end {
        return "No cells in the specified range".into();
    }
    let mut lines = vec!["Index\tType\tCount\tFirst Line".to_owned()];
    for (index, cell) in notebook.cells.iter().enumerate().take(end).skip(start) {
        let mut source_lines = cell.source.lines();
        let first = source_lines.next().unwrap_or("").to_owned();
        let hidden = source_lines.count();
        let first = if hidden > 0 {
            format!("{first}...({hidden} lines hidden)")
        } else {
            first
        };
        lines.push(format!(
            "{index}\t{}\t{}\t{first}",
            cell.cell_type.as_str(),
            count_text(cell)
        ));
    }
    lines.join("\n")
}

fn detailed(notebook: &Notebook, start: usize, limit: usize) -> String {
    let end = if limit == 0 {
        notebook.cells.len()
    } else {
        (start + limit).min(notebook.cells.len())
    };
    notebook
        .cells
        .iter()
        .enumerate()
        .take(end)
        .skip(start)
        .map(|(index, cell)| format!("{}\n\n{}\n\n", cell_header(index, cell), cell.source))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A unified diff of two sources, `None` when nothing changed.
pub fn source_diff(old: &str, new: &str) -> Option<String> {
    if old == new {
        return None;
    }
    let diff = similar::TextDiff::from_lines(old, new);
    let mut text = String::from("--- \n+++ ");
    for hunk in diff.unified_diff().context_radius(3).iter_hunks() {
        text.push('\n');
        text.push_str(hunk.header().to_string().trim_end());
        for change in hunk.iter_changes() {
            let sign = match change.tag() {
                similar::ChangeTag::Delete => '-',
                similar::ChangeTag::Insert => '+',
                similar::ChangeTag::Equal => ' ',
            };
            text.push('\n');
            text.push(sign);
            text.push_str(change.value().trim_end_matches('\n'));
        }
    }
    Some(text)
}

/// "Cell N <done> successfully!" with a fenced diff, or the no-change variant.
fn change_report(index: usize, done: &str, old: &str, new: &str) -> String {
    match source_diff(old, new) {
        Some(diff) => format!("Cell {index} {done} successfully!\n\n```diff\n{diff}\n```"),
        None => format!("Cell {index} {done} successfully - no changes detected"),
    }
}

// ---- addressing ----------------------------------------------------------------------------

fn notebook_in_use(
    context: &ToolContext,
    name: Option<&str>,
) -> Result<Arc<NotebookInUse>, ToolError> {
    context
        .state
        .notebooks
        .resolve(name)
        .map_err(ToolError::failed)
}

fn document_error(error: DocumentError) -> ToolError {
    match error {
        DocumentError::Refused(reason) => ToolError::Failed(reason),
        other => ToolError::failed(other),
    }
}

/// Plans edits against the notebook as it is when the write happens (one check for other
/// writers per call); returns the notebook before and after.
async fn update<'a>(
    notebook: &NotebookInUse,
    plan: impl FnOnce(&Notebook) -> Result<Vec<Edit>, ToolError> + Send + 'a,
) -> Result<(Notebook, Notebook), ToolError> {
    notebook
        .update(Box::new(move |nb| plan(nb).map_err(|e| e.to_string())))
        .await
        .map_err(document_error)
}

async fn read(notebook: &NotebookInUse) -> Result<Notebook, ToolError> {
    notebook.document.read().await.map_err(document_error)
}

async fn apply(notebook: &NotebookInUse, edits: Vec<Edit>) -> Result<Notebook, ToolError> {
    notebook.apply(edits).await.map_err(document_error)
}

fn out_of_range(index: i64, notebook: &Notebook) -> ToolError {
    ToolError::Failed(format!(
        "Cell index {index} is out of range. Notebook has {} cells.",
        notebook.cells.len()
    ))
}

fn unknown_id(id: &str) -> ToolError {
    ToolError::Failed(format!(
        "No cell '{id}' in this notebook. It was deleted, or it belongs to another notebook. Read \
         the notebook again for current cell ids."
    ))
}

/// Finds the cell named by id (which wins) or index.
fn resolve_cell(
    notebook: &Notebook,
    index: Option<i64>,
    id: Option<&str>,
) -> Result<usize, ToolError> {
    match (id, index) {
        (Some(id), _) => notebook.index_of(id).ok_or_else(|| unknown_id(id)),
        (None, Some(index)) => usize::try_from(index)
            .ok()
            .filter(|i| *i < notebook.cells.len())
            .ok_or_else(|| out_of_range(index, notebook)),
        (None, None) => Err(ToolError::InvalidArguments(
            "name the cell to act on, by cell_index or by cell_id".into(),
        )),
    }
}

fn with_cell_id(output: ToolOutput, cell_id: &str) -> ToolOutput {
    output.with_meta("cell_id", json!(cell_id))
}

// ---- read -----------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema, PartialEq, Eq, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum ResponseFormat {
    Brief,
    Detailed,
}

fn default_brief() -> ResponseFormat {
    ResponseFormat::Brief
}

fn default_limit() -> usize {
    20
}

fn default_true() -> bool {
    true
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadNotebookArgs {
    /// Notebook identifier to read (its use_notebook name).
    pub notebook_name: String,
    /// 'brief': first line and line count of each cell; 'detailed': full cell source.
    #[serde(default = "default_brief")]
    pub response_format: ResponseFormat,
    /// Starting index for pagination (0-based).
    #[serde(default)]
    pub start_index: usize,
    /// Maximum number of cells to return (0 means no limit).
    #[serde(default = "default_limit")]
    pub limit: usize,
}

async fn read_notebook(
    context: ToolContext,
    args: ReadNotebookArgs,
) -> Result<ToolOutput, ToolError> {
    let in_use = notebook_in_use(&context, Some(&args.notebook_name))?;
    let notebook = read(&in_use).await?;
    let total = notebook.cells.len();
    if args.start_index >= total {
        return Ok(ToolOutput::text(format!(
            "Start index {} is out of range. Notebook has {total} cells.",
            args.start_index
        )));
    }
    let body = match args.response_format {
        ResponseFormat::Brief => brief_table(&notebook, args.start_index, args.limit),
        ResponseFormat::Detailed => detailed(&notebook, args.start_index, args.limit),
    };
    let end = if args.limit == 0 {
        total
    } else {
        (args.start_index + args.limit).min(total)
    };
    let ids: Vec<&str> = notebook.cells[args.start_index..end]
        .iter()
        .map(|c| c.id.as_str())
        .collect();
    Ok(ToolOutput::text(format!(
        "Notebook {} has {total} cells.\n\n{body}",
        args.notebook_name
    ))
    .with_meta("start_index", json!(args.start_index))
    .with_meta("cell_ids", json!(ids)))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadCellArgs {
    /// Index of the cell to read (0-based). Omit when passing cell_id.
    #[serde(default)]
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    #[serde(default)]
    pub cell_id: Option<String>,
    /// Include outputs in the response (only for code cells).
    #[serde(default = "default_true")]
    pub include_outputs: bool,
    /// Target this notebook instead of the current one.
    #[serde(default)]
    pub notebook_name: Option<String>,
}

async fn read_cell(context: ToolContext, args: ReadCellArgs) -> Result<ToolOutput, ToolError> {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let notebook = read(&in_use).await?;
    let index = resolve_cell(&notebook, args.cell_index, args.cell_id.as_deref())?;
    let cell = &notebook.cells[index];
    let mut pieces = vec![
        Rendered::Text(cell_header(index, cell)),
        Rendered::Text(cell.source.clone()),
    ];
    let hint = full_output_hint(&in_use.name, &cell.id);
    let limits = context.state.config.output;
    let shown: &[Value] = if args.include_outputs && cell.cell_type == CellType::Code {
        &cell.outputs
    } else {
        &[]
    };
    pieces.extend(outputs::render_outputs(shown, limits, &hint));
    let mut output = ToolOutput::content(outputs::to_content(pieces));
    // For clients with an output viewer (MCP Apps); the MCP layer drops it for the others.
    output.structured = Some(outputs::bundles(shown, limits, &hint));
    Ok(with_cell_id(output, &cell.id))
}

fn full_output_hint(name: &str, cell_id: &str) -> String {
    format!(
        "The whole output is saved in the notebook: read notebook://{name}/cells/{cell_id}/outputs/<index>."
    )
}

// ---- insert ---------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum NewCellType {
    Code,
    Markdown,
    Raw,
}

impl From<NewCellType> for CellType {
    fn from(value: NewCellType) -> Self {
        match value {
            NewCellType::Code => CellType::Code,
            NewCellType::Markdown => CellType::Markdown,
            NewCellType::Raw => CellType::Raw,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InsertCellArgs {
    /// Target index for insertion (0-based); -1 appends at the end.
    pub cell_index: i64,
    /// Type of cell to insert.
    pub cell_type: NewCellType,
    /// Source content for the cell.
    pub cell_source: String,
    /// Target this notebook instead of the current one.
    #[serde(default)]
    pub notebook_name: Option<String>,
}

/// Inserts a cell; returns its index, id and the notebook after the insert.
async fn insert(
    in_use: &NotebookInUse,
    cell_index: i64,
    cell: Cell,
) -> Result<(usize, String, Notebook), ToolError> {
    let id = cell.id.clone();
    let (_, saved) = update(in_use, move |current| {
        let total = current.cells.len() as i64;
        if cell_index < -1 || cell_index > total {
            return Err(ToolError::Failed(format!(
                "Index {cell_index} is outside valid range [-1, {total}]. Use -1 to append at end."
            )));
        }
        let at = if cell_index == -1 {
            current.cells.len()
        } else {
            cell_index as usize
        };
        Ok(vec![Edit::Insert { index: at, cell }])
    })
    .await?;
    let index = saved.index_of(&id).ok_or_else(|| unknown_id(&id))?;
    Ok((index, id, saved))
}

async fn insert_cell(context: ToolContext, args: InsertCellArgs) -> Result<ToolOutput, ToolError> {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let cell_type: CellType = args.cell_type.into();
    let (index, id, saved) = insert(
        &in_use,
        args.cell_index,
        Cell::new(cell_type, args.cell_source),
    )
    .await?;
    let total = saved.cells.len();
    let start = if total - index < 5 {
        total.saturating_sub(10)
    } else {
        index.saturating_sub(5)
    };
    let text = format!(
        "Cell inserted successfully at index {index} ({})!\nNotebook now has {total} cells, showing surrounding cells:\n{}",
        cell_type.as_str(),
        brief_table(&saved, start, 10)
    );
    Ok(with_cell_id(ToolOutput::text(text), &id))
}

// ---- edit -----------------------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverwriteArgs {
    /// Index of the cell to overwrite (0-based). Omit when passing cell_id.
    #[serde(default)]
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    #[serde(default)]
    pub cell_id: Option<String>,
    /// New complete cell source.
    pub cell_source: String,
    /// Target this notebook instead of the current one.
    #[serde(default)]
    pub notebook_name: Option<String>,
}

/// The edit that sets a cell's source, refused if someone changed the cell meanwhile; no edit
/// when nothing changes.
fn set_source(cell: &Cell, source: String) -> Vec<Edit> {
    if cell.source == source {
        return Vec::new();
    }
    vec![Edit::SetSource {
        cell_id: cell.id.clone(),
        source,
        expected: Some(cell.source.clone()),
    }]
}

async fn overwrite_cell_source(
    context: ToolContext,
    args: OverwriteArgs,
) -> Result<ToolOutput, ToolError> {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let (before, _) = update(&in_use, |nb| {
        let index = resolve_cell(nb, args.cell_index, args.cell_id.as_deref())?;
        Ok(set_source(&nb.cells[index], args.cell_source.clone()))
    })
    .await?;
    let index = resolve_cell(&before, args.cell_index, args.cell_id.as_deref())?;
    let cell = &before.cells[index];
    let text = change_report(index, "overwritten", &cell.source, &args.cell_source);
    Ok(with_cell_id(ToolOutput::text(text), &cell.id))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditSourceArgs {
    /// Index of the cell to edit (0-based). Omit when passing cell_id.
    #[serde(default)]
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    #[serde(default)]
    pub cell_id: Option<String>,
    /// Exact string to find in the cell source.
    pub old_string: String,
    /// Replacement string.
    pub new_string: String,
    /// Replace all occurrences (default: only one, which must be unique).
    #[serde(default)]
    pub replace_all: bool,
    /// Target this notebook instead of the current one.
    #[serde(default)]
    pub notebook_name: Option<String>,
}

/// The new source of an edit_cell_source call, or why it cannot be made.
fn replaced_source(cell: &Cell, args: &EditSourceArgs) -> Result<String, ToolError> {
    let count = cell.source.matches(&args.old_string).count();
    if count == 0 {
        return Err(ToolError::Failed(
            "old_string not found in cell source".into(),
        ));
    }
    if count > 1 && !args.replace_all {
        return Err(ToolError::Failed(format!(
            "old_string is not unique in cell source ({count} occurrences). Use replace_all=True to replace all occurrences."
        )));
    }
    Ok(if args.replace_all {
        cell.source.replace(&args.old_string, &args.new_string)
    } else {
        cell.source.replacen(&args.old_string, &args.new_string, 1)
    })
}

async fn edit_cell_source(
    context: ToolContext,
    args: EditSourceArgs,
) -> Result<ToolOutput, ToolError> {
    if args.old_string.is_empty() {
        return Err(ToolError::InvalidArguments(
            "old_string must not be empty".into(),
        ));
    }
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let (before, _) = update(&in_use, |nb| {
        let cell = &nb.cells[resolve_cell(nb, args.cell_index, args.cell_id.as_deref())?];
        Ok(set_source(cell, replaced_source(cell, &args)?))
    })
    .await?;
    let index = resolve_cell(&before, args.cell_index, args.cell_id.as_deref())?;
    let cell = &before.cells[index];
    let new_source = replaced_source(cell, &args)?;
    let text = change_report(index, "edited", &cell.source, &new_source);
    Ok(with_cell_id(ToolOutput::text(text), &cell.id))
}

// ---- delete, clear, move ----------------------------------------------------------------------

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteCellArgs {
    /// Indices of the cells to delete (0-based).
    #[serde(default)]
    pub cell_indices: Option<Vec<i64>>,
    /// Ids of the cells to delete; when given, cell_indices is ignored.
    #[serde(default)]
    pub cell_ids_to_delete: Option<Vec<String>>,
    /// Whether to include the source of deleted cells.
    #[serde(default = "default_true")]
    pub include_source: bool,
    /// Target this notebook instead of the current one.
    #[serde(default)]
    pub notebook_name: Option<String>,
}

/// The indices of the cells a delete_cell call names, checked against the notebook.
fn delete_targets(notebook: &Notebook, args: &DeleteCellArgs) -> Result<Vec<usize>, ToolError> {
    let indices: Vec<usize> = match (&args.cell_ids_to_delete, &args.cell_indices) {
        (Some(ids), _) if !ids.is_empty() => {
            let missing: Vec<&String> = ids
                .iter()
                .filter(|id| notebook.index_of(id).is_none())
                .collect();
            if let Some(first) = missing.first() {
                let more = if missing.len() > 1 {
                    format!(" (and {} more)", missing.len() - 1)
                } else {
                    String::new()
                };
                return Err(ToolError::Failed(format!(
                    "No cell '{first}' in this notebook{more}. Read the notebook again for current cell ids."
                )));
            }
            ids.iter().filter_map(|id| notebook.index_of(id)).collect()
        }
        (_, Some(indices)) if !indices.is_empty() => {
            let mut seen = std::collections::HashSet::new();
            if !indices.iter().all(|i| seen.insert(*i)) {
                return Err(ToolError::Failed(format!(
                    "cell_indices contains duplicate values: {indices:?}"
                )));
            }
            indices
                .iter()
                .map(|&i| resolve_cell(notebook, Some(i), None))
                .collect::<Result<_, _>>()?
        }
        _ => {
            return Err(ToolError::InvalidArguments(
                "name the cells to act on, by cell_indices or by cell_ids_to_delete".into(),
            ));
        }
    };
    let mut seen = std::collections::HashSet::new();
    if !indices.iter().all(|i| seen.insert(*i)) {
        return Err(ToolError::Failed("the same cell is named twice".into()));
    }
    Ok(indices)
}

async fn delete_cell(context: ToolContext, args: DeleteCellArgs) -> Result<ToolOutput, ToolError> {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let (notebook, _) = update(&in_use, |nb| {
        let cell_ids = delete_targets(nb, &args)?
            .iter()
            .map(|&i| nb.cells[i].id.clone())
            .collect();
        Ok(vec![Edit::Delete { cell_ids }])
    })
    .await?;
    let indices = delete_targets(&notebook, &args)?;
    let ids: Vec<String> = indices
        .iter()
        .map(|&i| notebook.cells[i].id.clone())
        .collect();
    let mut parts = Vec::new();
    for &index in &indices {
        let cell = &notebook.cells[index];
        parts.push(format!(
            "Cell {index} ({}) deleted successfully.",
            cell.cell_type.as_str()
        ));
        if args.include_source {
            parts.push(format!("deleted cell source:\n{}", cell.source));
            parts.push("\n---\n".into());
        }
    }
    Ok(ToolOutput::text(parts.join("\n")).with_meta("cell_ids", json!(ids)))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClearOutputArgs {
    /// Index of the code cell to clear (0-based). Omit when passing cell_id.
    #[serde(default)]
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    #[serde(default)]
    pub cell_id: Option<String>,
    /// Target this notebook instead of the current one.
    #[serde(default)]
    pub notebook_name: Option<String>,
}

/// The code cell a clear_cell_output call names.
fn clear_target(notebook: &Notebook, args: &ClearOutputArgs) -> Result<usize, ToolError> {
    let index = resolve_cell(notebook, args.cell_index, args.cell_id.as_deref())?;
    if notebook.cells[index].cell_type != CellType::Code {
        return Err(ToolError::Failed(format!(
            "Cell {index} is not a code cell, cannot clear output."
        )));
    }
    Ok(index)
}

async fn clear_cell_output(
    context: ToolContext,
    args: ClearOutputArgs,
) -> Result<ToolOutput, ToolError> {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let (before, _) = update(&in_use, |nb| {
        let cell = &nb.cells[clear_target(nb, &args)?];
        if cell.outputs.is_empty() && cell.execution_count.is_none() {
            return Ok(Vec::new());
        }
        Ok(vec![Edit::SetOutputs {
            cell_id: cell.id.clone(),
            outputs: Vec::new(),
            execution_count: None,
        }])
    })
    .await?;
    let index = clear_target(&before, &args)?;
    let cell = &before.cells[index];
    let removed = cell.outputs.len();
    let text = if removed == 0 {
        format!("Cell {index} had no output to clear.")
    } else {
        format!("Cell {index} output cleared successfully ({removed} output(s) removed).")
    };
    Ok(with_cell_id(ToolOutput::text(text), &cell.id))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveCellArgs {
    /// Index of the cell to move (0-based).
    #[serde(default)]
    pub source_index: Option<i64>,
    /// Address the cell to move by its id rather than its index.
    #[serde(default)]
    pub source_cell_id: Option<String>,
    /// Destination index where the cell will end up (0-based).
    #[serde(default)]
    pub target_index: Option<i64>,
    /// Put the moved cell where this cell is now, addressed by id.
    #[serde(default)]
    pub target_cell_id: Option<String>,
    /// Target this notebook instead of the current one.
    #[serde(default)]
    pub notebook_name: Option<String>,
}

/// The source and target indices a move_cell call names.
fn move_targets(notebook: &Notebook, args: &MoveCellArgs) -> Result<(usize, usize), ToolError> {
    let total = notebook.cells.len();
    if total == 0 {
        return Err(ToolError::Failed("Notebook has no cells.".into()));
    }
    let range = |what: &str, i: i64| {
        ToolError::Failed(format!(
            "{what} index {i} is out of range. Notebook has {total} cells (valid: 0-{}).",
            total - 1
        ))
    };
    let source = match (&args.source_cell_id, args.source_index) {
        (Some(id), _) => notebook.index_of(id).ok_or_else(|| unknown_id(id))?,
        (None, Some(i)) => usize::try_from(i)
            .ok()
            .filter(|i| *i < total)
            .ok_or_else(|| range("Source", i))?,
        (None, None) => {
            return Err(ToolError::InvalidArguments(
                "name the cell to move, by source_index or source_cell_id".into(),
            ));
        }
    };
    let target = match (&args.target_cell_id, args.target_index) {
        (Some(id), _) => notebook.index_of(id).ok_or_else(|| unknown_id(id))?,
        (None, Some(i)) => usize::try_from(i)
            .ok()
            .filter(|i| *i < total)
            .ok_or_else(|| range("Target", i))?,
        (None, None) => {
            return Err(ToolError::InvalidArguments(
                "name where to move it, by target_index or target_cell_id".into(),
            ));
        }
    };
    Ok((source, target))
}

async fn move_cell(context: ToolContext, args: MoveCellArgs) -> Result<ToolOutput, ToolError> {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let (before, saved) = update(&in_use, |nb| {
        let (source, target) = move_targets(nb, &args)?;
        if source == target {
            return Ok(Vec::new());
        }
        Ok(vec![Edit::Move {
            cell_id: nb.cells[source].id.clone(),
            to: target,
        }])
    })
    .await?;
    let (source, target) = move_targets(&before, &args)?;
    let cell = &before.cells[source];
    let text = format!(
        "Cell moved successfully from index {source} to {target} ({}).\nNotebook has {} cells, showing surrounding cells:\n{}",
        cell.cell_type.as_str(),
        saved.cells.len(),
        brief_table(&saved, target.saturating_sub(3), 7)
    );
    Ok(with_cell_id(ToolOutput::text(text), &cell.id))
}

// ---- execute ----------------------------------------------------------------------------------

fn default_progress_interval() -> f64 {
    5.0
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ExecuteCellArgs {
    /// Index of the cell to execute (0-based). Omit when passing cell_id.
    #[serde(default)]
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    #[serde(default)]
    pub cell_id: Option<String>,
    /// Maximum seconds to wait for execution (0 = the server's --execution-timeout).
    #[serde(default)]
    pub timeout: f64,
    /// Add a timeline (completion time, timeout) after the outputs.
    #[serde(default = "default_true")]
    pub stream: bool,
    /// Seconds between MCP progress notifications while the cell runs (0 = none).
    #[serde(default = "default_progress_interval")]
    pub progress_interval: f64,
    /// Target this notebook instead of the current one.
    #[serde(default)]
    pub notebook_name: Option<String>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InsertExecuteArgs {
    /// Index at which to insert the code cell (0-based); -1 appends at the end.
    pub cell_index: i64,
    /// Code source for the cell.
    pub cell_source: String,
    /// Maximum seconds to wait for execution (0 = the server's --execution-timeout).
    #[serde(default)]
    pub timeout: f64,
    /// Add a timeline (completion time, timeout) after the outputs.
    #[serde(default = "default_true")]
    pub stream: bool,
    /// Seconds between MCP progress notifications while the cell runs (0 = none).
    #[serde(default = "default_progress_interval")]
    pub progress_interval: f64,
}

/// The error every tool gives for a notebook whose kernel state was lost.
pub fn kernel_gone_message(notebook_name: &str) -> String {
    format!(
        "The kernel of '{notebook_name}' is gone, and its session — every variable, import and \
         definition — went with it. Call restart_notebook to start a fresh one, or enable the \
         'kernel.auto-restart' capability to have replacements started automatically."
    )
}

/// The notebook's kernel, ready to run code. A lost kernel is refused, or replaced when
/// `kernel.auto-restart` is on — and then the returned note says so.
pub async fn ready_kernel(
    context: &ToolContext,
    in_use: &NotebookInUse,
) -> Result<(Arc<Kernel>, Option<String>), ToolError> {
    let kernel = in_use.kernel();
    let Liveness::Gone(reason) = kernel.liveness() else {
        return Ok((kernel, None));
    };
    if !context.state.capabilities.enabled(AUTO_RESTART) {
        return Err(ToolError::Failed(kernel_gone_message(&in_use.name)));
    }
    let fresh = context
        .state
        .jupyter()
        .replace_lost_kernel(&kernel)
        .await
        .map_err(|e| {
            ToolError::Failed(format!(
                "The kernel of '{}' is gone and no replacement could be started: {e}",
                in_use.name
            ))
        })?;
    in_use.replace_kernel(fresh.clone());
    let note = format!(
        "[KERNEL REPLACED: the kernel of '{}' {reason}; a new, empty kernel ('{}') replaced it \
         (kernel.auto-restart is on), so every earlier variable, import and definition is gone.]",
        in_use.name,
        fresh.id()
    );
    Ok((fresh, Some(note)))
}

async fn execute_cell(
    context: ToolContext,
    args: ExecuteCellArgs,
) -> Result<ToolOutput, ToolError> {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let notebook = read(&in_use).await?;
    let index = resolve_cell(&notebook, args.cell_index, args.cell_id.as_deref())?;
    let cell = notebook.cells[index].clone();
    run_cell(
        &context,
        &in_use,
        index,
        &cell,
        args.timeout,
        args.stream,
        args.progress_interval,
    )
    .await
}

async fn insert_execute_code_cell(
    context: ToolContext,
    args: InsertExecuteArgs,
) -> Result<ToolOutput, ToolError> {
    let in_use = notebook_in_use(&context, None)?;
    let (index, id, saved) = insert(
        &in_use,
        args.cell_index,
        Cell::new(CellType::Code, args.cell_source),
    )
    .await?;
    let cell = saved
        .cells
        .iter()
        .find(|c| c.id == id)
        .cloned()
        .ok_or_else(|| unknown_id(&id))?;
    run_cell(
        &context,
        &in_use,
        index,
        &cell,
        args.timeout,
        args.stream,
        args.progress_interval,
    )
    .await
}

/// Runs a code cell, writing its outputs into the notebook while it runs (at most once a second)
/// and once more at the end.
async fn run_cell(
    context: &ToolContext,
    in_use: &Arc<NotebookInUse>,
    index: usize,
    cell: &Cell,
    timeout: f64,
    stream: bool,
    progress_interval: f64,
) -> Result<ToolOutput, ToolError> {
    if cell.cell_type != CellType::Code {
        return Err(ToolError::Failed(format!(
            "Cell {index} is a {} cell; only code cells can be executed.",
            cell.cell_type.as_str()
        )));
    }
    let (kernel, replaced) = ready_kernel(context, in_use).await?;
    let timeout = context.state.config.execution.resolve(timeout);
    let mut request = ExecutionRequest::new(cell.source.clone(), timeout);
    request.cancel = context.cancel.clone();
    if let Some(reporter) = context.progress.clone()
        && progress_interval > 0.0
    {
        request.progress = Some((seconds(progress_interval), progress_sink(reporter)));
    }
    let (live_tx, live_rx) = watch::channel::<Option<(Vec<Value>, Option<i64>)>>(None);
    request.on_output = Some(Arc::new(move |outputs: &[Value], count| {
        live_tx.send_replace(Some((outputs.to_vec(), count)));
    }));
    let streams = in_use.document.streams_outputs();
    if streams {
        // Collaborators see the run start: old outputs cleared and the cell marked running.
        apply(
            in_use,
            vec![
                Edit::SetOutputs {
                    cell_id: cell.id.clone(),
                    outputs: Vec::new(),
                    execution_count: None,
                },
                Edit::SetRunning {
                    cell_id: cell.id.clone(),
                    running: true,
                },
            ],
        )
        .await?;
    }
    let writer = tokio::spawn(write_while_running(
        in_use.clone(),
        cell.id.clone(),
        live_rx,
        streams,
    ));

    let outcome = kernel.execute(request).await;
    writer.abort();
    let _ = writer.await;
    let mut finish = Vec::new();
    if let Ok(outcome) = &outcome {
        finish.push(Edit::SetOutputs {
            cell_id: cell.id.clone(),
            outputs: outcome.outputs.clone(),
            execution_count: outcome.execution_count,
        });
    }
    if streams {
        finish.push(Edit::SetRunning {
            cell_id: cell.id.clone(),
            running: false,
        });
    }
    let saved = apply(in_use, finish).await;
    let outcome = match outcome {
        Ok(outcome) => outcome,
        Err(e) if e.gone_reason().is_some() => {
            return Err(ToolError::Failed(kernel_gone_message(&in_use.name)));
        }
        Err(e) => return Err(ToolError::failed(e)),
    };
    saved?;

    let mut rendered = render_execution(
        &outcome,
        timeout,
        context.state.config.output,
        &full_output_hint(&in_use.name, &cell.id),
    );
    if let Some(note) = replaced {
        rendered.insert(super::execute::notes_at(&outcome), Rendered::Text(note));
    }
    if stream {
        match outcome.completion {
            Completion::Finished => rendered.push(Rendered::Text(format!(
                "[COMPLETED in {:.1}s]",
                outcome.elapsed.as_secs_f64()
            ))),
            Completion::TimedOut => rendered.push(Rendered::Text(format!(
                "[TIMEOUT at {}s: the kernel was interrupted]",
                format_secs(timeout)
            ))),
            Completion::Cancelled => {}
        }
    }
    let mut output = ToolOutput::content(outputs::to_content(rendered));
    // For clients with an output viewer (MCP Apps); the MCP layer drops it for the others.
    output.structured = Some(outputs::bundles(
        &outcome.outputs,
        context.state.config.output,
        &full_output_hint(&in_use.name, &cell.id),
    ));
    Ok(with_cell_id(output, &cell.id))
}

async fn write_while_running(
    in_use: Arc<NotebookInUse>,
    cell_id: String,
    mut live: watch::Receiver<Option<(Vec<Value>, Option<i64>)>>,
    streams: bool,
) {
    // A room shows each write at once, so outputs go out as they come (a short pause bounds the
    // work for chatty cells). A file is rewritten at most once a second, and not at all in the
    // first second: quick cells get a single write at the end.
    let pause = if streams {
        Duration::from_millis(20)
    } else {
        Duration::from_secs(1)
    };
    if !streams {
        tokio::time::sleep(pause).await;
    }
    while live.changed().await.is_ok() {
        let Some((outputs, execution_count)) = live.borrow_and_update().clone() else {
            continue;
        };
        let edit = Edit::SetOutputs {
            cell_id: cell_id.clone(),
            outputs,
            execution_count,
        };
        if let Err(e) = in_use.apply(vec![edit]).await {
            tracing::debug!("could not save outputs while running: {e}");
        }
        tokio::time::sleep(pause).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notebook(sources: &[(&str, CellType)]) -> Notebook {
        let mut nb = Notebook::empty();
        for (s, t) in sources {
            nb.cells.push(Cell::new(*t, *s));
        }
        nb
    }

    #[test]
    fn brief_table_like_upstream() {
        let mut nb = notebook(&[
            ("import os\nprint(1)\nx", CellType::Code),
            ("# Title", CellType::Markdown),
            ("", CellType::Code),
        ]);
        nb.cells[0].execution_count = Some(3);
        assert_eq!(
            brief_table(&nb, 0, 20),
            "Index\tType\tCount\tFirst Line\n0\tcode\t3\timport os...(2 lines hidden)\n1\tmarkdown\tN/A\t# Title\n2\tcode\tN/A\t"
        );
        assert_eq!(brief_table(&nb, 5, 1), "No cells in the specified range");
        assert_eq!(brief_table(&Notebook::empty(), 0, 0), "Notebook is empty");
    }

    #[test]
    fn diffs_are_unified() {
        assert_eq!(
            source_diff("a\nb\nc", "a\nB\nc"),
            Some("--- \n+++ \n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c".into())
        );
        assert_eq!(source_diff("same", "same"), None);
    }

    #[test]
    fn cells_resolve_by_id_first() {
        let nb = notebook(&[("a", CellType::Code), ("b", CellType::Code)]);
        let id = nb.cells[1].id.clone();
        assert_eq!(resolve_cell(&nb, Some(0), Some(&id)).unwrap(), 1);
        assert_eq!(resolve_cell(&nb, Some(1), None).unwrap(), 1);
        assert!(
            resolve_cell(&nb, Some(2), None)
                .unwrap_err()
                .to_string()
                .contains("out of range")
        );
        assert!(resolve_cell(&nb, Some(-1), None).is_err());
        assert!(
            resolve_cell(&nb, None, Some("nope"))
                .unwrap_err()
                .to_string()
                .contains("No cell 'nope'")
        );
        assert!(resolve_cell(&nb, None, None).is_err());
    }
}
