//! Resources: the notebooks in use, their cells and their outputs, readable by URI.
//!
//! `notebook://{name}` is the whole notebook (nbformat JSON), `notebook://{name}/cells/{cell_id}`
//! one cell with its outputs listed by URI, `notebook://{name}/cells/{cell_id}/outputs/{index}` one
//! output in its own MIME type. `{name}` is the use_notebook name.

use rmcp::ErrorData as McpError;
use rmcp::model::{ReadResourceResult, Resource, ResourceContents, ResourceTemplate};
use serde_json::{Value, json};

use notebook_format::notebook::{Cell, Notebook};
use server_core::domain::Domain;
use server_core::domain::outputs::{EXECUTION_SCHEME, MimeBundle, Output};

const SCHEME: &str = "notebook://";

pub const CAPABILITIES_URI: &str = "capabilities://";

pub fn capabilities_resource() -> Resource {
    let mut resource = Resource::new(CAPABILITIES_URI, "capabilities").with_description(
        "What this server does on its own (e.g. restarting lost kernels): every capability it \
         knows, whether it is on, and why.",
    );
    resource.mime_type = Some("application/json".into());
    resource
}

pub fn read_capabilities(domain: &Domain) -> ReadResourceResult {
    let text =
        serde_json::to_string_pretty(&domain.capabilities.block()).expect("JSON values serialize");
    ReadResourceResult::new(vec![
        ResourceContents::text(text, CAPABILITIES_URI).with_mime_type("application/json"),
    ])
}

pub fn list(domain: &Domain) -> Vec<Resource> {
    domain
        .notebooks
        .all()
        .into_iter()
        .map(|nb| {
            let mut resource = Resource::new(format!("{SCHEME}{}", nb.name), nb.name.clone())
                .with_description(format!("The notebook {} ({})", nb.name, nb.path));
            resource.mime_type = Some("application/x-ipynb+json".into());
            resource
        })
        .collect()
}

pub fn templates() -> Vec<ResourceTemplate> {
    let template = |uri: &str, name: &str, description: &str, mime: Option<&str>| {
        let mut t = ResourceTemplate::new(uri, name).with_description(description);
        t.mime_type = mime.map(str::to_owned);
        t
    };
    vec![
        template(
            "notebook://{name}",
            "notebook",
            "A notebook in use, as nbformat JSON (its current content).",
            Some("application/x-ipynb+json"),
        ),
        template(
            "notebook://{name}/cells/{cell_id}",
            "cell",
            "One cell: id, index, type, source, execution count, and its outputs as URIs.",
            Some("application/json"),
        ),
        template(
            "notebook://{name}/cells/{cell_id}/outputs/{index}",
            "output",
            "One output of a cell, whole, in its own MIME type.",
            None,
        ),
        template(
            "notebook://{name}/cells/{cell_id}/outputs/{index}/image",
            "output image",
            "The image of one output, as --images link links it (within the image bounds while \
             output.compact is on).",
            None,
        ),
        template(
            "execution://{id}/outputs/{index}/image",
            "execution output image",
            "The image of one output of an execute_code call, as --images link links it.",
            None,
        ),
        template(
            "execution://{id}/outputs/{index}",
            "execution output",
            "One output of an execute_code call, whole, as a shortened result names it; the \
             server keeps recent ones within a memory bound.",
            None,
        ),
    ]
}

/// The parts of a notebook URI.
#[derive(Debug, PartialEq, Eq)]
pub struct NotebookUri<'a> {
    pub name: &'a str,
    pub cell_id: Option<&'a str>,
    pub output: Option<&'a str>,
}

pub fn parse_uri(uri: &str) -> Option<NotebookUri<'_>> {
    let rest = uri.strip_prefix(SCHEME)?;
    let mut parts = rest.splitn(2, "/cells/");
    let name = parts.next().filter(|n| !n.is_empty())?;
    let Some(cell_part) = parts.next() else {
        return Some(NotebookUri {
            name,
            cell_id: None,
            output: None,
        });
    };
    let mut cell_parts = cell_part.splitn(2, "/outputs/");
    let cell_id = cell_parts.next().filter(|c| !c.is_empty())?;
    Some(NotebookUri {
        name,
        cell_id: Some(cell_id),
        output: cell_parts.next(),
    })
}

/// Whether a change to notebook `name` concerns a subscription to `uri`.
pub fn concerns(uri: &str, name: &str) -> bool {
    parse_uri(uri).is_some_and(|parsed| parsed.name == name)
}

fn not_found(uri: &str, message: String) -> McpError {
    McpError::resource_not_found(message, Some(json!({ "uri": uri })))
}

pub async fn read(domain: &Domain, uri: &str) -> Result<ReadResourceResult, McpError> {
    if let Some(rest) = uri.strip_prefix(EXECUTION_SCHEME) {
        return read_execution(domain, uri, rest).map(|c| ReadResourceResult::new(vec![c]));
    }
    let Some(parsed) = parse_uri(uri) else {
        return Err(not_found(
            uri,
            format!("No resource at '{uri}'. Call resources/list to see what this server offers."),
        ));
    };
    let Some(in_use) = domain.notebooks.get(parsed.name) else {
        return Err(not_found(
            uri,
            format!(
                "No notebook named '{}' is in use. Open one with use_notebook, and list what is open with list_notebooks.",
                parsed.name
            ),
        ));
    };
    let notebook = in_use
        .document
        .read()
        .await
        .map_err(|e| McpError::internal_error(e.to_string(), Some(json!({ "uri": uri }))))?;
    let contents = match (parsed.cell_id, parsed.output) {
        (None, _) => ResourceContents::text(notebook.to_ipynb(), uri)
            .with_mime_type("application/x-ipynb+json"),
        (Some(cell_id), output) => {
            let Some(index) = notebook.index_of(cell_id) else {
                return Err(not_found(
                    uri,
                    format!(
                        "No cell with id '{cell_id}' in this notebook. Cell ids are on every cell result; an index is not an id."
                    ),
                ));
            };
            let cell = &notebook.cells[index];
            match output {
                None => ResourceContents::text(cell_document(parsed.name, index, cell), uri)
                    .with_mime_type("application/json"),
                Some(position) => output_contents(uri, cell, position, domain)?,
            }
        }
    };
    Ok(ReadResourceResult::new(vec![contents]))
}

fn cell_document(name: &str, index: usize, cell: &Cell) -> String {
    let outputs: Vec<Value> = cell
        .outputs
        .iter()
        .enumerate()
        .map(|(position, output)| {
            json!({
                "index": position,
                "mimeType": output_mime(output),
                "uri": format!("{SCHEME}{name}/cells/{}/outputs/{position}", cell.id),
            })
        })
        .collect();
    let source: Vec<&str> = cell.source.split_inclusive('\n').collect();
    serde_json::to_string_pretty(&json!({
        "id": cell.id,
        "index": index,
        "cell_type": cell.cell_type.as_str(),
        "source": source,
        "execution_count": cell.execution_count,
        "outputs": outputs,
    }))
    .expect("JSON values serialize")
}

/// The MIME type an output is served in: its first rich type, else plain text.
fn output_mime(output: &Output) -> String {
    output
        .data()
        .map_or_else(|| "text/plain".into(), bundle_mime)
}

fn bundle_mime(data: &MimeBundle) -> String {
    data.mime_types()
        .find(|k| *k != "text/plain")
        .unwrap_or("text/plain")
        .to_owned()
}

fn output_contents(
    uri: &str,
    cell: &Cell,
    position: &str,
    domain: &Domain,
) -> Result<ResourceContents, McpError> {
    let (position, image) = image_of(position);
    let output = position
        .parse::<usize>()
        .ok()
        .and_then(|i| cell.outputs.get(i))
        .ok_or_else(|| {
            not_found(
                uri,
                format!(
                    "Cell '{}' has {} output(s); there is no output {position}.",
                    cell.id,
                    cell.outputs.len()
                ),
            )
        })?;
    if image {
        return sized_image(domain, uri, output);
    }
    Ok(output_resource(uri, output))
}

/// An output position, and whether the URI asks for its image within the bounds (`/image`).
fn image_of(position: &str) -> (&str, bool) {
    match position.strip_suffix("/image") {
        Some(position) => (position, true),
        None => (position, false),
    }
}

/// `…/outputs/{index}/image`: the output's image as `--images link` links it, scaled within
/// `--max-image-px` and `--max-image-megapixels` when `output.compact` is on, else as it is.
fn sized_image(domain: &Domain, uri: &str, output: &Output) -> Result<ResourceContents, McpError> {
    let image = output.data().and_then(|data| {
        ["image/png", "image/jpeg"]
            .into_iter()
            .find_map(|mime| Some((data.text(mime)?, mime)))
    });
    let Some((data, mime)) = image else {
        return Err(not_found(
            uri,
            format!(
                "This output has no PNG or JPEG image; read {} for the output itself.",
                uri.trim_end_matches("/image")
            ),
        ));
    };
    let mut limits = domain.settings.output;
    if !domain
        .capabilities
        .enabled(server_core::capabilities::COMPACT_OUTPUT)
    {
        limits.max_image_px = u32::MAX;
        limits.max_image_megapixels = f64::INFINITY;
    }
    let sized = crate::tools::compact::sized(&data, mime, limits).ok_or_else(|| {
        McpError::internal_error(
            format!("The image of this output cannot be decoded as {mime}."),
            Some(json!({ "uri": uri })),
        )
    })?;
    Ok(ResourceContents::blob(sized.data, uri).with_mime_type(&sized.mime_type))
}

/// `execution://{id}/outputs/{index}`: one output an execute_code call's result pointed to.
fn read_execution(domain: &Domain, uri: &str, rest: &str) -> Result<ResourceContents, McpError> {
    let (id, position) = rest.split_once("/outputs/").unwrap_or((rest, ""));
    let gone = || {
        not_found(
            uri,
            format!(
                "No kept outputs for execution '{id}': the server keeps the outputs of recent \
                 executions (see list_executions), and these are gone or never were. Run the \
                 code again, or in a notebook cell so the notebook keeps them."
            ),
        )
    };
    let execution = domain.executions.get(id).ok_or_else(gone)?;
    let result = execution.snapshot().result.ok_or_else(|| {
        not_found(
            uri,
            format!(
                "Execution '{id}' is still running: its outputs are kept once it ends \
                 (get_execution shows them so far)."
            ),
        )
    })?;
    let Ok(executed) = result.as_ref() else {
        return Err(not_found(
            uri,
            format!("Execution '{id}' ended without outputs: get_execution says how."),
        ));
    };
    if let Some(note) = execution.shed_note() {
        return Err(not_found(uri, note.to_owned()));
    }
    let outputs = &executed.outcome.outputs;
    let (position, image) = image_of(position);
    let output = position.parse::<usize>().ok().and_then(|i| outputs.get(i));
    let Some(output) = output else {
        return Err(not_found(
            uri,
            format!(
                "Execution '{id}' has {} output(s); there is no output '{position}'.",
                outputs.len()
            ),
        ));
    };
    if image {
        return sized_image(domain, uri, output);
    }
    Ok(output_resource(uri, output))
}

/// One output whole, in its own MIME type: a stream's or an error's text, else the bundle's
/// first rich type (images as blobs).
fn output_resource(uri: &str, output: &Output) -> ResourceContents {
    match output {
        Output::Stream { text, .. } => ResourceContents::text(text.clone(), uri),
        Output::Error {
            ename,
            evalue,
            traceback,
            ..
        } => ResourceContents::text(Output::error_text(ename, evalue, traceback), uri),
        Output::Other(value) => ResourceContents::text(value.to_string(), uri),
        Output::DisplayData { data, .. } | Output::ExecuteResult { data, .. } => {
            let mime = bundle_mime(data);
            let value = data.json(&mime).unwrap_or(&Value::Null);
            let join = || data.text(&mime).unwrap_or_else(|| value.to_string());
            if mime.starts_with("image/") && mime != "image/svg+xml" {
                ResourceContents::blob(join().split_whitespace().collect::<String>(), uri)
                    .with_mime_type(&mime)
            } else if mime == "application/json" || mime.ends_with("+json") {
                ResourceContents::text(value.to_string(), uri).with_mime_type(&mime)
            } else {
                ResourceContents::text(join(), uri).with_mime_type(&mime)
            }
        }
    }
}

/// Parses the `cell_indices` of jupyter_cite: `N`, `A-B` (inclusive), `A-` (to the end), comma
/// separated; sorted and de-duplicated.
pub fn parse_cell_ranges(spec: &str, cell_count: usize) -> Result<Vec<usize>, String> {
    if spec.trim().is_empty() {
        return Err("Cell indices cannot be empty".into());
    }
    if cell_count == 0 {
        return Err("Notebook has no cells".into());
    }
    let number = |text: &str, what: &str| -> Result<usize, String> {
        let text = text.trim();
        let value: i64 = text
            .parse()
            .map_err(|_| format!("Invalid {what}: {text}"))?;
        usize::try_from(value)
            .map_err(|_| format!("{} cannot be negative: {value}", capitalize(what)))
    };
    let mut indices = Vec::new();
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        if let Some((start, end)) = part.split_once('-') {
            if start.trim().is_empty() {
                return Err(format!("Invalid range format: {part}"));
            }
            let start = number(start, "start index")?;
            let end = if end.trim().is_empty() {
                cell_count - 1
            } else {
                number(end, "end index")?
            };
            if end < start {
                return Err(format!(
                    "End index ({end}) must be greater than or equal to start index ({start})"
                ));
            }
            indices.extend(start..=end);
        } else {
            indices.push(number(part, "cell index")?);
        }
    }
    indices.sort_unstable();
    indices.dedup();
    if let Some(bad) = indices.iter().find(|&&i| i >= cell_count) {
        return Err(format!(
            "Cell index {bad} is out of range. Notebook has {cell_count} cells."
        ));
    }
    Ok(indices)
}

fn capitalize(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map(|c| c.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// The user message of jupyter_cite, from the notebook as it is now.
pub fn cite_text(name: &str, notebook: &Notebook, indices: &[usize], prompt: &str) -> String {
    let listed: Vec<String> = indices.iter().map(usize::to_string).collect();
    let mut lines = vec![format!(
        "USER Cite cells [{}] from notebook {name}, here are the cells:",
        listed.join(", ")
    )];
    for &index in indices {
        let cell = &notebook.cells[index];
        lines.push(crate::tools::format::cell_header(index, cell));
        lines.push(cell.source.clone());
    }
    lines.push("=====End of Cited Cells=====".into());
    lines.push(format!("USER's Instruction are follow: {prompt}"));
    lines.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris() {
        assert_eq!(
            parse_uri("notebook://nb"),
            Some(NotebookUri {
                name: "nb",
                cell_id: None,
                output: None
            })
        );
        assert_eq!(
            parse_uri("notebook://nb/cells/ab12/outputs/0"),
            Some(NotebookUri {
                name: "nb",
                cell_id: Some("ab12"),
                output: Some("0")
            })
        );
        assert_eq!(parse_uri("notebook://"), None);
        assert_eq!(parse_uri("file:///x"), None);
        assert!(concerns("notebook://nb/cells/x", "nb") && !concerns("notebook://other", "nb"));
    }

    #[test]
    fn cite_ranges() {
        assert_eq!(
            parse_cell_ranges("0,2-3, 5-", 7).unwrap(),
            vec![0, 2, 3, 5, 6]
        );
        assert_eq!(parse_cell_ranges("1,1,0-1", 3).unwrap(), vec![0, 1]);
        for (ranges, count, error) in [
            ("", 3, "Cell indices cannot be empty"),
            ("-1", 3, "Invalid range format: -1"),
            ("x", 3, "Invalid cell index: x"),
            (
                "9",
                3,
                "Cell index 9 is out of range. Notebook has 3 cells.",
            ),
            ("0", 0, "Notebook has no cells"),
        ] {
            assert_eq!(parse_cell_ranges(ranges, count).unwrap_err(), error);
        }
        assert!(
            parse_cell_ranges("3-1", 5)
                .unwrap_err()
                .starts_with("End index (1) must be")
        );
    }
}
