//! `list_files`: the Jupyter Server's file tree, paged and filtered.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;

use super::kernels::format_timestamp;
use super::{Tool, ToolContext, ToolError, ToolOutput, ToolResult, declare};
use crate::tools::wire::Shape;
use server_core::domain::files::{ContentsModel, Listed};

fn default_max_depth() -> u8 {
    1
}

fn default_limit() -> usize {
    25
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListFilesArgs {
    /// The starting path to list from (empty string means the root directory).
    #[serde(default)]
    pub path: String,
    /// Maximum depth to recurse into subdirectories (0 lists only the starting directory).
    #[serde(default = "default_max_depth")]
    #[schemars(range(min = 0, max = 3))]
    pub max_depth: u8,
    /// Starting index for pagination (0-based).
    #[serde(default)]
    pub start_index: usize,
    /// Maximum number of items to return (0 means no limit).
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// Glob pattern (fnmatch style, matched against the whole path; `*` also crosses `/`).
    #[serde(default)]
    pub pattern: String,
}

pub fn list_files() -> Arc<dyn Tool> {
    declare("list_files", "List files and directories of the Jupyter Server's file system, recursively up to \
         max_depth, as a paged table (Path, Type, Size, Last_Modified). Filter with a glob pattern.").read_only().shape(Shape::Text).run(run)
}

#[derive(Debug, Clone, PartialEq)]
pub struct FileRow {
    pub path: String,
    pub kind: String,
    pub size: String,
    pub last_modified: String,
}

/// Sizes as the Python server prints them.
pub fn format_size(bytes: u64) -> String {
    const KIB: f64 = 1024.0;
    let b = bytes as f64;
    if b < KIB {
        format!("{bytes}B")
    } else if b < KIB * KIB {
        format!("{:.1}KB", b / KIB)
    } else {
        format!("{:.1}MB", b / (KIB * KIB))
    }
}

fn listed_row(listed: Listed) -> FileRow {
    match listed {
        Listed::Entry(model) => row(&model),
        Listed::Unreadable { path, error } => FileRow {
            path,
            kind: "error".into(),
            size: String::new(),
            last_modified: format!("Error: {error}"),
        },
    }
}

fn row(model: &ContentsModel) -> FileRow {
    FileRow {
        path: model.path.clone(),
        kind: model.kind.clone(),
        size: match (model.kind.as_str(), model.size) {
            ("directory", _) | (_, None) => String::new(),
            (_, Some(size)) => format_size(size),
        },
        last_modified: model
            .last_modified
            .as_deref()
            .map(format_timestamp)
            .unwrap_or_default(),
    }
}

/// Sorts, filters and pages rows into the table the agent reads.
pub fn render(mut rows: Vec<FileRow>, args: &ListFilesArgs) -> String {
    let place = if args.path.is_empty() {
        "root"
    } else {
        args.path.as_str()
    };
    if rows.is_empty() {
        return format!("No files found in path '{place}'");
    }
    rows.sort_by(|a, b| a.path.cmp(&b.path));
    let mut text = String::new();
    if !args.pattern.is_empty() {
        match globset::Glob::new(&args.pattern) {
            Ok(glob) => {
                let matcher = glob.compile_matcher();
                rows.retain(|r| matcher.is_match(&r.path));
                if rows.is_empty() {
                    return format!(
                        "No files matching pattern '{}' found in path '{place}'",
                        args.pattern
                    );
                }
            }
            Err(e) => text.push_str(&format!(
                "[WARNING] Invalid glob pattern '{}' ({e}), skipping pattern filter.\n",
                args.pattern
            )),
        }
    }
    let total = rows.len();
    let mut start = args.start_index;
    if start >= total {
        text.push_str(&format!(
            "[WARNING] Start index is greater than the number of files: start_index={start}, total_files={total}. Reset start_index to 0.\n"
        ));
        start = 0;
    }
    let end = if args.limit == 0 {
        total
    } else {
        (start + args.limit).min(total)
    };
    text.push_str(&format!("Showing {start}-{end} of {total} files\n\n"));
    text.push_str("Path\tType\tSize\tLast_Modified");
    for r in &rows[start..end] {
        text.push_str(&format!(
            "\n{}\t{}\t{}\t{}",
            r.path, r.kind, r.size, r.last_modified
        ));
    }
    text
}

async fn run(context: ToolContext, args: ListFilesArgs) -> ToolResult {
    if args.max_depth > 3 {
        return Err(ToolError::InvalidArguments(
            format!("max_depth must be between 0 and 3, got {}", args.max_depth).into(),
        ));
    }
    let listed = context.domain.list_tree(&args.path, args.max_depth).await?;
    let rows = listed.into_iter().map(listed_row).collect();
    Ok(ToolOutput::text(render(rows, &args)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(pattern: &str, start_index: usize, limit: usize) -> ListFilesArgs {
        ListFilesArgs {
            path: String::new(),
            max_depth: 1,
            start_index,
            limit,
            pattern: pattern.into(),
        }
    }

    fn file(path: &str) -> FileRow {
        FileRow {
            path: path.into(),
            kind: "file".into(),
            size: "1B".into(),
            last_modified: String::new(),
        }
    }

    #[test]
    fn sizes() {
        assert_eq!(format_size(0), "0B");
        assert_eq!(format_size(1023), "1023B");
        assert_eq!(format_size(1536), "1.5KB");
        assert_eq!(format_size(5 * 1024 * 1024), "5.0MB");
    }

    #[test]
    fn sorted_paged_and_filtered() {
        let rows = vec![file("b.py"), file("a.ipynb"), file("d/c.py")];
        let all = render(rows.clone(), &args("", 0, 25));
        assert!(
            all.starts_with("Showing 0-3 of 3 files\n\nPath\tType\tSize\tLast_Modified\na.ipynb"),
            "{all}"
        );
        let py = render(rows.clone(), &args("*.py", 0, 0));
        assert!(
            py.contains("Showing 0-2 of 2 files") && py.contains("d/c.py"),
            "{py}"
        );
        let page = render(rows.clone(), &args("", 1, 1));
        assert!(
            page.contains("Showing 1-2 of 3 files") && page.ends_with("b.py\tfile\t1B\t"),
            "{page}"
        );
        let past = render(rows.clone(), &args("", 9, 1));
        assert!(
            past.starts_with("[WARNING] Start index is greater"),
            "{past}"
        );
        assert_eq!(
            render(rows, &args("*.rs", 0, 0)),
            "No files matching pattern '*.rs' found in path 'root'"
        );
        assert_eq!(
            render(vec![], &args("", 0, 0)),
            "No files found in path 'root'"
        );
    }
}
