//! insert_cell, overwrite_cell_source, edit_cell_source, delete_cell, clear_cell_output and
//! move_cell: the arguments and texts of the tools; the edits are `domain::cells`.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{
    bound, default_true, notebook_in_use, with_cell_id, with_notebook_version, with_persisted,
    with_version,
};
use crate::tools::format::{brief_table, change_report};
use crate::tools::{ToolContext, ToolError, ToolOutput, ToolResult};
use server_core::domain::cells::{
    self, Expected, MoveTargets, Overwrite, resolve_cell, set_source, update, version_of,
};
use server_core::domain::cells::{Cell, CellType, Edit, Notebook};

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
    pub notebook_name: Option<String>,
    /// The notebook_version you last read (read_notebook's `_meta`); if cells were inserted,
    /// deleted or moved since, nothing is done and the error lists the cells as they are now.
    pub expected_notebook_version: Option<String>,
}

pub(super) async fn insert_cell(context: ToolContext, args: InsertCellArgs) -> ToolResult {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let cell_type: CellType = args.cell_type.into();
    let expected = Expected {
        cell: None,
        notebook: args.expected_notebook_version,
    };
    let (index, id, saved) = cells::insert(
        &in_use,
        args.cell_index,
        Cell::new(cell_type, args.cell_source),
        &expected,
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
        brief_table(&*saved, start, 10, bound(&context, &in_use.name))
    );
    let output = with_version(text, &version_of(&saved, &id), &in_use).await;
    Ok(with_notebook_version(with_cell_id(output, &id), &saved))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OverwriteArgs {
    /// Index of the cell to overwrite (0-based). Omit when passing cell_id.
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    pub cell_id: Option<String>,
    /// New complete cell source.
    pub cell_source: String,
    /// Target this notebook instead of the current one.
    pub notebook_name: Option<String>,
    /// The cell's version as you last read it (read_cell, read_notebook); if someone changed
    /// the cell since, nothing is done and the error shows its current source and version.
    pub expected_version: Option<String>,
}

pub(super) async fn overwrite_cell_source(context: ToolContext, args: OverwriteArgs) -> ToolResult {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let expected = Expected {
        cell: args.expected_version.clone(),
        notebook: None,
    };
    let done = cells::overwrite_if(
        &in_use,
        Overwrite {
            index: args.cell_index,
            id: args.cell_id,
            source: args.cell_source.clone(),
            expected: None,
            clear_outputs: false,
        },
        &expected,
    )
    .await?;
    let text = change_report(
        done.index,
        "overwritten",
        &done.old_source,
        &args.cell_source,
        bound(&context, &in_use.name).max_chars,
    );
    Ok(with_cell_id(
        with_version(text, &done.version, &in_use).await,
        &done.cell_id,
    ))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditSourceArgs {
    /// Index of the cell to edit (0-based). Omit when passing cell_id.
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    pub cell_id: Option<String>,
    /// Exact string to find in the cell source.
    pub old_string: String,
    /// Replacement string.
    pub new_string: String,
    /// Replace all occurrences (default: only one, which must be unique).
    #[serde(default)]
    pub replace_all: bool,
    /// Target this notebook instead of the current one.
    pub notebook_name: Option<String>,
    /// The cell's version as you last read it (read_cell, read_notebook); if someone changed
    /// the cell since, nothing is done and the error shows its current source and version.
    pub expected_version: Option<String>,
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
        ).into()));
    }
    Ok(if args.replace_all {
        cell.source.replace(&args.old_string, &args.new_string)
    } else {
        cell.source.replacen(&args.old_string, &args.new_string, 1)
    })
}

pub(super) async fn edit_cell_source(context: ToolContext, args: EditSourceArgs) -> ToolResult {
    if args.old_string.is_empty() {
        return Err(ToolError::InvalidArguments(
            "old_string must not be empty".into(),
        ));
    }
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let expected = Expected {
        cell: args.expected_version.clone(),
        notebook: None,
    };
    let (before, after) = update(&in_use, |nb| {
        let index = resolve_cell(nb, args.cell_index, args.cell_id.as_deref())?;
        expected.check(&in_use, nb, index)?;
        let cell = &nb.cells[index];
        Ok(set_source(cell, replaced_source(cell, &args)?, None))
    })
    .await?;
    let index = resolve_cell(&before, args.cell_index, args.cell_id.as_deref())?;
    let cell = &before.cells[index];
    let new_source = replaced_source(cell, &args)?;
    let text = change_report(
        index,
        "edited",
        &cell.source,
        &new_source,
        bound(&context, &in_use.name).max_chars,
    );
    let output = with_version(text, &version_of(&after, &cell.id), &in_use).await;
    Ok(with_cell_id(output, &cell.id))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteCellArgs {
    /// Indices of the cells to delete (0-based).
    pub cell_indices: Option<Vec<i64>>,
    /// Ids of the cells to delete; when given, cell_indices is ignored.
    pub cell_ids_to_delete: Option<Vec<String>>,
    /// Whether to include the source of deleted cells.
    #[serde(default = "default_true")]
    pub include_source: bool,
    /// Target this notebook instead of the current one.
    pub notebook_name: Option<String>,
    /// The version of the one cell to delete as you last read it; if someone changed it since,
    /// nothing is deleted and the error shows its current source and version.
    pub expected_version: Option<String>,
    /// The notebook_version you last read (read_notebook's `_meta`); if cells were inserted,
    /// deleted or moved since, nothing is done and the error lists the cells as they are now.
    pub expected_notebook_version: Option<String>,
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
                ).into()));
            }
            ids.iter().filter_map(|id| notebook.index_of(id)).collect()
        }
        (_, Some(indices)) if !indices.is_empty() => {
            let mut seen = std::collections::HashSet::new();
            if !indices.iter().all(|i| seen.insert(*i)) {
                return Err(ToolError::Failed(
                    format!("cell_indices contains duplicate values: {indices:?}").into(),
                ));
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

pub(super) async fn delete_cell(context: ToolContext, args: DeleteCellArgs) -> ToolResult {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let expected = Expected {
        cell: args.expected_version.clone(),
        notebook: args.expected_notebook_version.clone(),
    };
    let (notebook, indices, after) =
        cells::delete_if(&in_use, |nb| delete_targets(nb, &args), &expected).await?;
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
    let output = ToolOutput::text(parts.join("\n")).with_meta("cell_ids", json!(ids));
    Ok(with_persisted(with_notebook_version(output, &after), &in_use).await)
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClearOutputArgs {
    /// Index of the code cell to clear (0-based). Omit when passing cell_id.
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    pub cell_id: Option<String>,
    /// Target this notebook instead of the current one.
    pub notebook_name: Option<String>,
    /// The cell's version as you last read it (read_cell, read_notebook); if someone changed
    /// the cell since, nothing is done and the error shows its current source and version.
    pub expected_version: Option<String>,
}

/// The code cell a clear_cell_output call names.
fn clear_target(notebook: &Notebook, args: &ClearOutputArgs) -> Result<usize, ToolError> {
    let index = resolve_cell(notebook, args.cell_index, args.cell_id.as_deref())?;
    if notebook.cells[index].cell_type != CellType::Code {
        return Err(ToolError::Failed(
            format!("Cell {index} is not a code cell, cannot clear output.").into(),
        ));
    }
    Ok(index)
}

pub(super) async fn clear_cell_output(context: ToolContext, args: ClearOutputArgs) -> ToolResult {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let expected = Expected {
        cell: args.expected_version.clone(),
        notebook: None,
    };
    let (before, _) = update(&in_use, |nb| {
        let index = clear_target(nb, &args)?;
        expected.check(&in_use, nb, index)?;
        let cell = &nb.cells[index];
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
    // Outputs are not part of the version: it is unchanged, so only `_meta` says it (the text
    // stays the Python server's, which clients compare whole).
    let output =
        ToolOutput::text(text).with_meta("cell_version", json!(version_of(&before, &cell.id)));
    Ok(with_persisted(with_cell_id(output, &cell.id), &in_use).await)
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MoveCellArgs {
    /// Index of the cell to move (0-based).
    pub source_index: Option<i64>,
    /// Address the cell to move by its id rather than its index.
    pub source_cell_id: Option<String>,
    /// Destination index where the cell will end up (0-based).
    pub target_index: Option<i64>,
    /// Put the moved cell where this cell is now, addressed by id.
    pub target_cell_id: Option<String>,
    /// Target this notebook instead of the current one.
    pub notebook_name: Option<String>,
    /// The version of the cell to move as you last read it; if someone changed it since,
    /// nothing is moved and the error shows its current source and version.
    pub expected_version: Option<String>,
    /// The notebook_version you last read (read_notebook's `_meta`); if cells were inserted,
    /// deleted or moved since, nothing is done and the error lists the cells as they are now.
    pub expected_notebook_version: Option<String>,
}

impl MoveCellArgs {
    fn targets(&self) -> MoveTargets {
        MoveTargets {
            source_index: self.source_index,
            source_id: self.source_cell_id.clone(),
            target_index: self.target_index,
            target_id: self.target_cell_id.clone(),
        }
    }
}

pub(super) async fn move_cell(context: ToolContext, args: MoveCellArgs) -> ToolResult {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let expected = Expected {
        cell: args.expected_version.clone(),
        notebook: args.expected_notebook_version.clone(),
    };
    let (before, saved, source, target) =
        cells::move_cell_if(&in_use, &args.targets(), &expected).await?;
    let cell = &before.cells[source];
    let text = format!(
        "Cell moved successfully from index {source} to {target} ({}).\nNotebook has {} cells, showing surrounding cells:\n{}",
        cell.cell_type.as_str(),
        saved.cells.len(),
        brief_table(
            &*saved,
            target.saturating_sub(3),
            7,
            bound(&context, &in_use.name)
        )
    );
    let output = with_version(text, &version_of(&saved, &cell.id), &in_use).await;
    Ok(with_notebook_version(
        with_cell_id(output, &cell.id),
        &saved,
    ))
}
