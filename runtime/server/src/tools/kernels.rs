//! `list_kernels`: the kernels running on the Jupyter Server.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{Tool, ToolContext, ToolOutput, ToolResult, declare};
use crate::tools::wire::Shape;
use server_core::domain::kernelspecs::RunningKernels;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListKernelsArgs {}

pub fn list_kernels() -> Arc<dyn Tool> {
    declare(
        "list_kernels",
        "List all kernels running on the Jupyter Server, with their IDs, names, states, connection \
         counts and kernelspec details (display name, language, environment). Use an ID as \
         execute_code's kernel_id.",
    )
    .read_only()
    .shape(Shape::Text)
    .run(run)
}

/// ISO timestamps from Jupyter as `YYYY-MM-DD HH:MM:SS` (UTC), as the Python server prints them.
pub fn format_timestamp(iso: &str) -> String {
    chrono::DateTime::parse_from_rfc3339(iso)
        .map(|t| {
            t.with_timezone(&chrono::Utc)
                .format("%Y-%m-%d %H:%M:%S")
                .to_string()
        })
        .unwrap_or_else(|_| iso.to_owned())
}

async fn run(context: ToolContext, _args: ListKernelsArgs) -> ToolResult {
    let RunningKernels {
        kernels,
        specs,
        spares,
    } = context.domain.running_kernels().await?;
    if kernels.is_empty() {
        return Ok(ToolOutput::text("No kernels found on the Jupyter server."));
    }
    let mut lines = vec![
        "ID\tName\tDisplay_Name\tLanguage\tState\tConnections\tLast_Activity\tEnvironment"
            .to_owned(),
    ];
    for kernel in kernels {
        let spec = specs
            .as_ref()
            .and_then(|s| s.kernelspecs.get(&kernel.name))
            .map(|entry| &entry.spec);
        let display_name = spec.and_then(|s| s.display_name.clone());
        let language = spec.and_then(|s| s.language.clone());
        let env = spec
            .and_then(|s| s.env.as_ref())
            .filter(|e| !e.is_empty())
            .map(|env| {
                let joined = env
                    .iter()
                    .map(|(k, v)| match v {
                        Value::String(s) => format!("{k}={s}"),
                        other => format!("{k}={other}"),
                    })
                    .collect::<Vec<_>>()
                    .join("; ");
                if joined.chars().count() > 100 {
                    format!("{}...", joined.chars().take(100).collect::<String>())
                } else {
                    joined
                }
            });
        let unknown = || "unknown".to_owned();
        lines.push(
            [
                kernel.id.clone(),
                kernel.name.clone(),
                display_name.unwrap_or_else(unknown),
                language.unwrap_or_else(unknown),
                kernel.execution_state.clone().unwrap_or_else(unknown),
                kernel
                    .connections
                    .map(|c| c.to_string())
                    .unwrap_or_else(unknown),
                kernel
                    .last_activity
                    .as_deref()
                    .map(format_timestamp)
                    .unwrap_or_else(unknown),
                env.unwrap_or_else(unknown),
            ]
            .join("\t"),
        );
    }
    let mut text = lines.join("\n");
    if !spares.is_empty() {
        // After the table, so clients that read its rows are not thrown off.
        text.push_str(&format!(
            "\n\n[kernel.prewarm] Spare kernels, started ahead and never used (the next new \
             notebook takes one; stopped at exit): {}",
            spares.join(", ")
        ));
    }
    Ok(ToolOutput::text(text))
}

#[cfg(test)]
mod tests {
    #[test]
    fn timestamps_print_like_upstream() {
        assert_eq!(
            super::format_timestamp("2026-11-30T04:24:32.123456Z"),
            "2026-11-30 04:24:32"
        );
        assert_eq!(super::format_timestamp("not a time"), "not a time");
    }
}
