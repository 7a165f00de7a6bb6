//! read_notebook and read_cell.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{bound, default_true, notebook_in_use, with_cell_id, with_revision_named};
use crate::tools::format::{
    bounded_source, brief_table, cell_uri, detailed, full_output_hint, versioned_header,
};
use crate::tools::outputs::{self, Compact, Rendered};
use crate::tools::{ToolContext, ToolOutput, ToolResult};
use server_core::capabilities::COMPACT_OUTPUT;
use server_core::domain::cells::CellType;
use server_core::domain::cells::{self, Presence, whereabouts};
use server_core::domain::outputs::Output;
use server_core::domain::versions::{cell_version, structure_version};

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

pub(super) async fn read_notebook(context: ToolContext, args: ReadNotebookArgs) -> ToolResult {
    let in_use = notebook_in_use(&context, Some(&args.notebook_name))?;
    let revision = in_use.revision().await.ok();
    // The page alone, and every cell's id: a page of a big notebook costs that page.
    let page = in_use.read_page(args.start_index, args.limit).await?;
    let total = page.ids.len();
    if args.start_index >= total {
        return Ok(ToolOutput::text(format!(
            "Start index {} is out of range. Notebook has {total} cells.",
            args.start_index
        )));
    }
    let body = match args.response_format {
        ResponseFormat::Brief => brief_table(
            &page,
            args.start_index,
            args.limit,
            bound(&context, &in_use.name),
        ),
        ResponseFormat::Detailed => detailed(
            &page,
            args.start_index,
            args.limit,
            bound(&context, &in_use.name),
        ),
    };
    let ids: Vec<&str> = page.cells.iter().map(|c| c.id.as_str()).collect();
    let versions: Vec<String> = page.cells.iter().map(cell_version).collect();
    let others = whereabouts(&in_use);
    let here = match (args.response_format, others.is_empty()) {
        (ResponseFormat::Detailed, false) => format!("{}\n", people_line(&others)),
        _ => String::new(),
    };
    let structure = structure_version(page.ids.iter().map(String::as_str));
    // The revision goes in the first line: programs that parse the Python server's text read
    // on from the table header or the cell headers, which stay as they were.
    let revision_said = match &revision {
        Some(revision) => format!(" (revision: {revision})"),
        None => String::new(),
    };
    let output = ToolOutput::text(format!(
        "Notebook {} has {total} cells{revision_said}.\n{here}\n{body}",
        args.notebook_name
    ));
    let output = match &revision {
        Some(revision) => with_revision_named(output, revision),
        None => output,
    };
    Ok(output
        .with_meta("people", people_meta(&others))
        .with_meta("start_index", json!(args.start_index))
        .with_meta("cell_ids", json!(ids))
        .with_meta("cell_versions", json!(versions))
        .with_meta("notebook_version", json!(structure)))
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadCellArgs {
    /// Index of the cell to read (0-based). Omit when passing cell_id.
    pub cell_index: Option<i64>,
    /// Address the cell by its id instead of its index; given both, the id wins.
    pub cell_id: Option<String>,
    /// Include outputs in the response (only for code cells).
    #[serde(default = "default_true")]
    pub include_outputs: bool,
    /// Target this notebook instead of the current one.
    pub notebook_name: Option<String>,
}

pub(super) async fn read_cell(context: ToolContext, args: ReadCellArgs) -> ToolResult {
    let in_use = notebook_in_use(&context, args.notebook_name.as_deref())?;
    let revision = in_use.revision().await.ok();
    // The cell alone: reading one cell of a big notebook costs that cell.
    let (index, cell, read) =
        cells::read_cell(&in_use, args.cell_index, args.cell_id.as_deref()).await?;
    let cell = &cell;
    let mut pieces = vec![
        Rendered::Text(versioned_header(index, cell)),
        Rendered::Text(bounded_source(
            &cell.source,
            context.domain.settings.output.max_chars,
            &cell_uri(&in_use.name, &cell.id),
        )),
    ];
    let hint = full_output_hint(&in_use.name, &cell.id);
    let limits = context.domain.settings.output;
    let shown: &[Output] = if args.include_outputs && cell.cell_type == CellType::Code {
        &cell.outputs
    } else {
        &[]
    };
    let base = cell_uri(&in_use.name, &cell.id);
    let compact = context.domain.capabilities.enabled(COMPACT_OUTPUT);
    pieces.extend(outputs::render_outputs(
        shown,
        limits,
        Some(Compact {
            base: &base,
            shorten: compact,
        }),
        &hint,
    ));
    if compact && args.include_outputs && cell.cell_type == CellType::Code && shown.is_empty() {
        // Nothing silent: a cell that ran and printed nothing is not a cell never run.
        pieces.push(Rendered::Text(match cell.execution_count {
            Some(count) => format!("[Ran (execution count {count}); no output]"),
            None => "[Not run yet: no execution count, no output]".to_owned(),
        }));
    }
    let others = whereabouts(&in_use);
    if !others.is_empty() {
        pieces.push(Rendered::Text(people_line(&others)));
    }
    let mut output = ToolOutput::content(outputs::to_content(pieces));
    output = output.with_meta("people", people_meta(&others));
    // For clients with an output viewer (MCP Apps); the MCP layer drops it for the others.
    // Widgets as the notebook's kernel holds them now, else as the notebook saved them.
    let widgets = in_use.widget_state(shown, &read.metadata);
    output.structured = Some(outputs::bundles(shown, widgets, limits, &hint));
    let mut output = output.with_meta("cell_version", json!(cell_version(cell)));
    if let Some(revision) = &revision {
        output = with_revision_named(output, revision);
    }
    Ok(with_cell_id(output, &cell.id))
}

/// "Also in this notebook: …", each person with the cell they are in.
pub(crate) fn people_line(people: &[Presence]) -> String {
    let shown: Vec<String> = people
        .iter()
        .map(|person| match (&person.cell_id, person.cursor) {
            (Some(cell), true) => format!("{} (in cell {cell})", person.name),
            (Some(cell), false) => format!("{} (last changed cell {cell})", person.name),
            (None, _) => person.name.clone(),
        })
        .collect();
    format!("Also in this notebook: {}.", shown.join(", "))
}

/// `io.jupyter-mcp/people`: each person, the cell they are in and whether their cursor is there.
pub(crate) fn people_meta(people: &[Presence]) -> serde_json::Value {
    json!(
        people
            .iter()
            .map(|person| json!({
                "name": person.name,
                "cell_id": person.cell_id,
                "cursor": person.cursor,
            }))
            .collect::<Vec<_>>()
    )
}
