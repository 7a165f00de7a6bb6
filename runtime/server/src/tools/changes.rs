//! get_notebook_changes: what changed in a notebook since a revision this server handed out, and
//! who changed it, optionally waiting for someone else to change it.

use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::format::{Bound, brief_table, cell_uri, cut_with, format_secs, full_output_hint};
use super::outputs::{self, Compact, Rendered};
use super::{Tool, ToolContext, ToolOutput, ToolResult, declare};
use server_core::capabilities::COMPACT_OUTPUT;
use server_core::domain::changes;
use server_core::domain::notebooks::revisions::{Author, Change, HISTORY, Since};
use server_core::domain::versions::{cell_version, source_diff};

pub fn tools() -> Vec<Arc<dyn Tool>> {
    vec![
        declare(
            "get_notebook_changes",
            "What changed in a notebook since a revision (every read, edit and run answers with \
             the notebook's `revision:`): cells added, deleted and moved, each changed source as \
             a diff, changed outputs, and who made each change (a person in the room, this \
             agent, another program). With wait_seconds, waits until someone else changes the \
             notebook (your own edits do not end the wait) and answers at once, or says nothing \
             changed at the deadline. Pass the revision it answers with next time.",
        )
        .read_only()
        .run(get_notebook_changes),
    ]
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GetNotebookChangesArgs {
    /// The revision you last saw: the `revision:` of an earlier read, edit or changes answer.
    pub since: String,
    /// The notebook (its use_notebook name); the current one when omitted.
    pub notebook_name: Option<String>,
    /// Wait up to this many seconds for someone else to change the notebook (capped by the
    /// server's --max-execution-timeout); 0 answers at once.
    #[serde(default)]
    pub wait_seconds: f64,
}

async fn get_notebook_changes(context: ToolContext, args: GetNotebookChangesArgs) -> ToolResult {
    let domain = context.domain.clone();
    let in_use = domain.notebook(args.notebook_name.as_deref())?;
    let wait = super::seconds(args.wait_seconds).min(domain.settings.execution.max_timeout);
    let report = |waited: Duration| {
        if let Some(report) = &context.progress {
            report(
                waited.as_secs_f64(),
                Some(wait.as_secs_f64()),
                format!(
                    "Waiting for someone to change notebook {}: {}s of {}s",
                    in_use.name,
                    waited.as_secs(),
                    format_secs(wait)
                ),
            );
        }
    };
    let looked = changes::since(
        &in_use,
        &args.since,
        wait,
        &context.cancel,
        domain.settings.execution.keepalive,
        &report,
    )
    .await?;
    let name = &in_use.name;
    let since = args.since.trim();
    let limits = domain.settings.output;
    let bound = Bound {
        max_chars: limits.max_chars,
        name,
    };
    let mut pieces: Vec<Rendered> = Vec::new();
    let waited = if wait.is_zero() {
        String::new()
    } else if looked.cancelled {
        format!(
            " (waited {:.1} s, then the call was cancelled)",
            looked.waited.as_secs_f64()
        )
    } else {
        format!(" (waited {:.1} s)", looked.waited.as_secs_f64())
    };
    let count = match &looked.changes {
        Err(why) => {
            let said = match why {
                Since::TooOld => format!(
                    "Revision {since} is older than the last {HISTORY} revisions this server \
                     keeps of notebook {name}, so it cannot say what changed since."
                ),
                Since::Unknown => format!(
                    "Revision {since} is not one this server handed out for notebook {name} (it \
                     may come from before a restart of this server or an earlier use_notebook, or \
                     be mistyped), so it cannot say what changed since."
                ),
                Since::Kept => unreachable!("a kept revision is diffed"),
            };
            pieces.push(Rendered::Text(format!(
                "{said} The notebook now, in brief:\n{}",
                brief_table(&looked.notebook, 0, 0, bound)
            )));
            None
        }
        Ok(found) if found.is_empty() => {
            pieces.push(Rendered::Text(format!(
                "Nothing changed in notebook {name} since revision {since}{waited}."
            )));
            Some(0)
        }
        Ok(found) => {
            let others = looked.by_others();
            let headline = if others {
                format!(
                    "Notebook {name}: {} since revision {since}{waited}:",
                    plural(found.len(), "change")
                )
            } else {
                format!(
                    "Nobody else changed notebook {name} since revision {since}{waited}; this \
                     agent's own {}:",
                    plural(found.len(), "change")
                )
            };
            pieces.push(Rendered::Text(headline));
            let compact = domain.capabilities.enabled(COMPACT_OUTPUT);
            let file = in_use.document.backend() == "file";
            for (change, by) in found {
                let shown = Shown {
                    notebook: &looked.notebook,
                    name,
                    limits,
                    compact,
                    file,
                };
                shown.describe(&mut pieces, change, by);
            }
            Some(found.len())
        }
    };
    let people = in_use.document.whereabouts();
    if !people.is_empty() {
        pieces.push(Rendered::Text(super::cells::people_line(&people)));
    }
    pieces.push(Rendered::Text(format!(
        "revision: {} (pass it as `since` next time)",
        looked.revision
    )));
    Ok(ToolOutput::content(outputs::to_content(pieces))
        .with_meta("revision", json!(looked.revision))
        .with_meta("changes", json!(count))
        .with_meta("changed_by_others", json!(looked.by_others()))
        .with_meta("people", super::cells::people_meta(&people)))
}

fn plural(count: usize, noun: &str) -> String {
    if count == 1 {
        format!("1 {noun}")
    } else {
        format!("{count} {noun}s")
    }
}

/// Who made a change, in words: another program writes a file; a room's unnamed writer is
/// someone.
fn author(by: &Author, file: bool) -> String {
    match by {
        Author::ThisAgent => "this agent".into(),
        Author::Person(name) => name.clone(),
        Author::Unnamed if file => "another program".into(),
        Author::Unnamed => "someone the room does not name".into(),
    }
}

/// How changes are shown: against the notebook as it is now, within the output limits.
struct Shown<'a> {
    notebook: &'a server_core::domain::cells::Notebook,
    name: &'a str,
    limits: server_core::settings::OutputLimits,
    /// `output.compact` is on.
    compact: bool,
    /// The file backend: an unnamed writer is another program.
    file: bool,
}

impl Shown<'_> {
    /// One change as a line (and its source, diff or outputs below it).
    fn describe(&self, pieces: &mut Vec<Rendered>, change: &Change, by: &Author) {
        let Shown {
            notebook,
            name,
            limits,
            compact,
            file,
        } = *self;
        let by = author(by, file);
        let cut = |text: &str, uri: &str| {
            cut_with(text, limits.max_chars, |total| {
                format!(
                    "\n[Cut: {} of {total} characters shown (--max-output-chars); the cell is {uri}]",
                    limits.max_chars
                )
            })
        };
        match change {
            Change::Added { index, id } => {
                let cell = &notebook.cells[*index];
                let uri = cell_uri(name, id);
                pieces.push(Rendered::Text(format!(
                    "- Cell {index} (id {id}, {}, version {}) added by {by}:\n```\n{}\n```",
                    cell.type_name(),
                    cell_version(cell),
                    cut(&cell.source, &uri)
                )));
            }
            Change::Deleted {
                id,
                cell_type,
                source,
            } => {
                let first = source.lines().next().unwrap_or("");
                pieces.push(Rendered::Text(format!(
                    "- Cell id {id} ({cell_type}) deleted by {by}; its first line was: {first}"
                )));
            }
            Change::Moved { id, from, to } => {
                pieces.push(Rendered::Text(format!(
                    "- Cell id {id} moved from index {from} to {to} by {by}"
                )));
            }
            Change::Source {
                index,
                id,
                old_type,
                old,
            } => {
                let cell = &notebook.cells[*index];
                let mut line = format!(
                    "- Cell {index} (id {id}) changed by {by}, now version {}",
                    cell_version(cell)
                );
                if old_type != cell.type_name() {
                    line.push_str(&format!(
                        "; its type went from {old_type} to {}",
                        cell.type_name()
                    ));
                }
                if let Some(diff) = source_diff(old, &cell.source) {
                    // The file header lines name no file here: only the hunks.
                    let diff = diff.trim_start_matches("--- \n+++ \n");
                    line.push_str(&format!(
                        ":\n```diff\n{}\n```",
                        cut(diff, &cell_uri(name, id))
                    ));
                }
                pieces.push(Rendered::Text(line));
            }
            Change::Outputs { index, id } => {
                let cell = &notebook.cells[*index];
                let count = match cell.execution_count {
                    Some(count) => format!(" (execution count {count})"),
                    None => String::new(),
                };
                pieces.push(Rendered::Text(format!(
                    "- Cell {index} (id {id}) outputs changed by {by}{count}:"
                )));
                if cell.outputs.is_empty() {
                    pieces.push(Rendered::Text("[No output]".into()));
                } else {
                    let base = cell_uri(name, id);
                    pieces.extend(outputs::render_outputs(
                        &cell.outputs,
                        limits,
                        Some(Compact {
                            base: &base,
                            shorten: compact,
                        }),
                        &full_output_hint(name, id),
                    ));
                }
            }
        }
    }
}
