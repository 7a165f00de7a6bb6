//! `read_file` and `write_file`: plain files of the Jupyter root, binary as base64.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Tool, ToolContext, ToolOutput, ToolResult, declare};
use server_core::domain::files::Encoding;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// Path of the file, relative to the Jupyter root (as list_files shows it).
    pub path: String,
    /// First line to return (0-based) for a text file; first byte for a binary one.
    #[serde(default)]
    pub offset: usize,
    /// How many lines (text) or bytes (binary) to return; absent = to the end.
    pub limit: Option<usize>,
}

#[derive(Debug, Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum WriteEncoding {
    Text,
    Base64,
}

fn default_encoding() -> WriteEncoding {
    WriteEncoding::Text
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// Path of the file, relative to the Jupyter root; missing parent directories are created.
    pub path: String,
    /// The content: text as is, or the bytes base64-encoded with encoding 'base64'.
    pub content: String,
    /// 'text' (UTF-8) or 'base64' (binary).
    #[serde(default = "default_encoding")]
    pub encoding: WriteEncoding,
    /// Replace the file if it exists (otherwise an existing file is refused).
    #[serde(default)]
    pub overwrite: bool,
}

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        declare(
            "read_file",
            "Read a file of the Jupyter root through the contents API: text as text (offset and \
             limit in lines), binary as base64 (offset and limit in bytes). Files above the \
             server's size limit are refused with their size. Notebooks are refused: use \
             use_notebook and read_notebook.",
        )
        .read_only()
        .run(read_file),
        declare(
            "write_file",
            "Write a file in the Jupyter root: text, or binary given as base64 \
             (encoding='base64'). Missing parent directories are created; an existing file is \
             replaced only with overwrite=true. Bounded by the server's size limit. Notebooks \
             are refused: use use_notebook and the cell tools.",
        )
        .run(write_file),
    ]
}

async fn read_file(context: ToolContext, args: ReadFileArgs) -> ToolResult {
    let read = context
        .domain
        .read_file(&args.path, args.offset, args.limit)
        .await?;
    let (start, end) = read.range;
    let whole = start == 0 && end == read.total;
    let text = match read.encoding {
        Encoding::Text if whole => read.content.clone(),
        Encoding::Text => format!(
            "{}\n[read_file: lines {start}-{end} of {} in '{}'{}]",
            read.content.trim_end_matches('\n'),
            read.total,
            read.path,
            if end < read.total {
                format!("; call with offset={end} for more")
            } else {
                String::new()
            }
        ),
        Encoding::Base64 => format!(
            "'{}' is a binary file of {} bytes; bytes {start}-{end} as base64:\n{}",
            read.path, read.size, read.content
        ),
    };
    Ok(ToolOutput {
        structured: Some(json!({
            "path": read.path,
            "size": read.size,
            "encoding": read.encoding.as_str(),
            "content": read.content,
            "offset": start,
            "end": end,
            "total": read.total,
        })),
        ..ToolOutput::text(text)
    })
}

async fn write_file(context: ToolContext, args: WriteFileArgs) -> ToolResult {
    let encoding = match args.encoding {
        WriteEncoding::Text => Encoding::Text,
        WriteEncoding::Base64 => Encoding::Base64,
    };
    let written = context
        .domain
        .write_file(&args.path, &args.content, encoding, args.overwrite)
        .await?;
    let mut text = format!(
        "{} '{}' ({} bytes).",
        if written.replaced {
            "Replaced"
        } else {
            "Created"
        },
        written.path,
        written.bytes
    );
    if !written.created_directories.is_empty() {
        text.push_str(&format!(
            " Created the directories {}.",
            written
                .created_directories
                .iter()
                .map(|d| format!("'{d}'"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(ToolOutput::text(text))
}
