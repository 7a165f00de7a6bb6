//! Outputs kept outside the room: with its outputs service on, jupyter-server-documents moves a
//! notebook's outputs out of the shared document when it loads the file, leaving in each place a
//! placeholder whose `metadata.url` names where the output is kept
//! (`/api/outputs/{file id}/{cell id}/{n}.output`). JupyterLab fetches them to show them; our
//! reads do the same, so a tool shows what the person sees. Edits leave the placeholders alone.

use notebook_format::notebook::Cell;
use notebook_format::outputs::Output;
use serde_json::Value;

use crate::rest::JupyterRest;

/// Where the output service keeps outputs, as its placeholders name it.
const SERVICE_PREFIX: &str = "/api/outputs/";

/// The kept output's address, if `output` is such a placeholder: an output with nothing in it
/// but that address.
fn placeholder_url(output: &Output) -> Option<&str> {
    let metadata = match output {
        Output::Stream { text, extra, .. } if text.is_empty() => extra.get("metadata")?,
        Output::DisplayData { data, metadata, .. }
        | Output::ExecuteResult { data, metadata, .. }
            if data.entries().is_empty() =>
        {
            return url_of(metadata.get("url"));
        }
        Output::Error {
            traceback, extra, ..
        } if traceback.is_empty() => extra.get("metadata")?,
        Output::Other(value) => value.get("metadata")?,
        _ => return None,
    };
    url_of(metadata.get("url"))
}

fn url_of(url: Option<&Value>) -> Option<&str> {
    url.and_then(Value::as_str)
        .filter(|url| url.starts_with(SERVICE_PREFIX))
}

/// Whether any cell shows a placeholder (cheap: no request).
pub(super) fn any_placeholder<'a>(mut cells: impl Iterator<Item = &'a Cell>) -> bool {
    cells.any(|cell| cell.outputs.iter().any(|o| placeholder_url(o).is_some()))
}

/// Puts each kept output in its placeholder's place. One that cannot be fetched stays a
/// placeholder (shown as an output we do not know), and the reason is logged.
pub(super) async fn fetch_into<'a>(rest: &JupyterRest, cells: impl Iterator<Item = &'a mut Cell>) {
    for cell in cells {
        for output in &mut cell.outputs {
            let Some(url) = placeholder_url(output) else {
                continue;
            };
            let segments: Vec<&str> = url.trim_start_matches('/').split('/').collect();
            match rest.get_json_at(&segments).await {
                Ok(kept) => *output = Output::from_json(&kept),
                Err(e) => tracing::warn!(
                    "an output of cell '{}' is kept by jupyter-server-documents' outputs service \
                     at {url}, and could not be fetched: {e}",
                    cell.id
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_the_services_placeholders_are_fetched() {
        let placeholder = Output::from_json(&json!({
            "output_type": "stream", "text": "",
            "metadata": {"url": "/api/outputs/f/c/0.output"}
        }));
        assert_eq!(
            placeholder_url(&placeholder),
            Some("/api/outputs/f/c/0.output")
        );
        let display = Output::from_json(&json!({
            "output_type": "display_data", "metadata": {"url": "/api/outputs/f/c/1.output"}
        }));
        assert!(placeholder_url(&display).is_some());
        // A whole output, or one naming some other place, is left as it is.
        let whole = Output::from_json(&json!({
            "output_type": "display_data", "data": {"text/plain": "1"},
            "metadata": {"url": "/api/outputs/f/c/1.output"}
        }));
        assert_eq!(placeholder_url(&whole), None);
        let elsewhere = Output::Other(json!({"output_type": "x", "metadata": {"url": "/files/a"}}));
        assert_eq!(placeholder_url(&elsewhere), None);
    }
}
