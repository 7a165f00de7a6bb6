//! `inspect_variables`: a kernel's user variables, read without running a cell.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Tool, ToolContext, ToolOutput, ToolResult, declare};
use server_core::domain::variables::{MAX_LISTED, Variable};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct InspectArgs {
    /// Target this notebook instead of the current one.
    pub notebook_name: Option<String>,
    /// Only these variables (any object, modules and functions included); without it, every
    /// user variable except modules, functions and classes.
    pub names: Option<Vec<String>>,
}

pub fn inspect_variables() -> Arc<dyn Tool> {
    declare(
        "inspect_variables",
        "List the user variables of a notebook's kernel: name, type, shape or length, and a short \
         repr (DataFrames with their column types). Read silently: the execution count, the \
         history, the notebook and every variable stay as they are. Python kernels only. Pass \
         names to see just those.",
    )
    .runs_code()
    .read_only()
    .run(run)
}

fn describe(variable: &Variable) -> String {
    let size = match (&variable.shape, variable.length) {
        (Some(shape), _) => format!(
            "shape ({})",
            shape
                .iter()
                .map(|n| n.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, Some(length)) => format!("len {length}"),
        (None, None) => String::new(),
    };
    let mut line = format!(
        "{}\t{}\t{size}\t{}",
        variable.name,
        variable.kind,
        variable.repr.replace('\n', "⏎")
    );
    if let Some(columns) = &variable.columns {
        let columns: Vec<String> = columns
            .iter()
            .map(|(name, dtype)| format!("{name}: {}", dtype.as_str().unwrap_or("?")))
            .collect();
        line.push_str(&format!("\n\tcolumns: {}", columns.join(", ")));
    } else if let Some(dtype) = &variable.dtype {
        line.push_str(&format!("\n\tdtype: {dtype}"));
    }
    line
}

async fn run(context: ToolContext, args: InspectArgs) -> ToolResult {
    let domain = &context.domain;
    let in_use = domain.notebook(args.notebook_name.as_deref())?;
    let names = args.names.filter(|n| !n.is_empty());
    let (found, replaced) = domain.inspect_variables(&in_use, names.as_deref()).await?;
    let mut lines = Vec::new();
    if let Some(note) = replaced {
        lines.push(note);
    }
    if found.variables.is_empty() && found.unknown.is_empty() {
        lines.push(format!(
            "The kernel of '{}' has no user variables (modules, functions and classes are not \
             listed; pass names to see them).",
            in_use.name
        ));
    } else if !found.variables.is_empty() {
        lines.push("Name\tType\tSize\tValue".to_owned());
        lines.extend(found.variables.iter().map(describe));
    }
    if !found.unknown.is_empty() {
        lines.push(format!(
            "Not defined in the kernel: {}.",
            found.unknown.join(", ")
        ));
    }
    if found.more > 0 {
        lines.push(format!(
            "[{} more variables not shown (at most {MAX_LISTED}); pass names to see them.]",
            found.more
        ));
    }
    Ok(ToolOutput {
        structured: Some(json!({
            "variables": found.variables,
            "unknown": found.unknown,
        })),
        ..ToolOutput::text(lines.join("\n"))
    })
}
