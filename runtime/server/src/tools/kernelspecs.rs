//! `list_kernelspecs`: the kernels that can be started (see `kernel_name` of use_notebook and
//! restart_notebook).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::{Tool, ToolContext, ToolOutput, ToolResult, declare};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListKernelspecsArgs {}

pub fn list_kernelspecs() -> Arc<dyn Tool> {
    declare(
        "list_kernelspecs",
        "List the kernels installed on the Jupyter Server that a notebook can run on (name, \
         display name, language; the default marked). Pass a name as kernel_name to use_notebook \
         or restart_notebook.",
    )
    .read_only()
    .run(run)
}

async fn run(context: ToolContext, _args: ListKernelspecsArgs) -> ToolResult {
    let specs = context.domain.installed_kernelspecs().await?;
    if specs.kernelspecs.is_empty() {
        return Ok(ToolOutput::text(
            "No kernelspecs are installed on the Jupyter Server.",
        ));
    }
    let mut lines = vec!["Name\tDisplay_Name\tLanguage\tDefault".to_owned()];
    for (name, entry) in &specs.kernelspecs {
        let default = if specs.default.as_deref() == Some(name.as_str()) {
            "✓"
        } else {
            ""
        };
        lines.push(format!(
            "{name}\t{}\t{}\t{default}",
            entry.spec.display_name.as_deref().unwrap_or("unknown"),
            entry.spec.language.as_deref().unwrap_or("unknown"),
        ));
    }
    Ok(ToolOutput::text(lines.join("\n")))
}
