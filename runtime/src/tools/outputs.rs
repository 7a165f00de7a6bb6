//! Kernel outputs (nbformat shape) turned into what an agent reads.
//!
//! Follows the Python server: ANSI codes stripped, PNG/JPEG as image content, text preferred as
//! markdown > latex > json > plain, tracebacks for errors. Unlike it, text beyond
//! `--max-output-chars` is cut with a note, so one noisy cell cannot flood an agent's context.

use std::sync::LazyLock;

use regex::Regex;
use rmcp::model::ContentBlock as Content;
use serde_json::Value;

use crate::config::OutputLimits;
use crate::jupyter::notebook::{error_text, multiline_text};

static ANSI: LazyLock<Regex> = LazyLock::new(|| {
    // CSI sequences (colours, cursor moves) and OSC sequences (titles, hyperlinks).
    Regex::new(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
        .expect("valid regex")
});

pub fn strip_ansi(text: &str) -> String {
    ANSI.replace_all(text, "").into_owned()
}

/// One piece of an output as the agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Rendered {
    Text(String),
    Image { data: String, mime_type: String },
}

/// Renders one nbformat output.
pub fn render_output(output: &Value, allow_images: bool) -> Option<Rendered> {
    let output_type = output
        .get("output_type")
        .and_then(Value::as_str)
        .unwrap_or("");
    match output_type {
        "stream" => {
            let text = output
                .get("text")
                .and_then(multiline_text)
                .unwrap_or_default();
            (!text.is_empty()).then(|| Rendered::Text(strip_ansi(&text)))
        }
        "display_data" | "execute_result" => {
            let empty = serde_json::Map::new();
            let data = output
                .get("data")
                .and_then(Value::as_object)
                .unwrap_or(&empty);
            for mime in ["image/png", "image/jpeg"] {
                if let Some(image) = data.get(mime).and_then(multiline_text) {
                    return Some(if allow_images {
                        Rendered::Image {
                            data: image.split_whitespace().collect(),
                            mime_type: mime.to_owned(),
                        }
                    } else {
                        let kind = if mime == "image/png" { "PNG" } else { "JPEG" };
                        Rendered::Text(format!("[Image Output ({kind}) - Image display disabled]"))
                    });
                }
            }
            for mime in ["text/markdown", "text/latex"] {
                if let Some(text) = data.get(mime).and_then(multiline_text) {
                    return Some(Rendered::Text(strip_ansi(&text)));
                }
            }
            if let Some(json) = data.get("application/json") {
                let pretty = serde_json::to_string_pretty(json).unwrap_or_default();
                return Some(Rendered::Text(pretty));
            }
            if let Some(text) = data.get("text/plain").and_then(multiline_text) {
                return Some(Rendered::Text(strip_ansi(&text)));
            }
            if data.contains_key("text/html") {
                return Some(Rendered::Text("[HTML Output]".to_owned()));
            }
            let keys: Vec<String> = data.keys().map(|k| format!("'{k}'")).collect();
            Some(Rendered::Text(format!(
                "[{output_type} Data: keys=[{}]]",
                keys.join(", ")
            )))
        }
        "error" => Some(Rendered::Text(strip_ansi(&error_text(output)))),
        other => Some(Rendered::Text(format!("[Unknown output type: {other}]"))),
    }
}

pub const NO_OUTPUT: &str = "[No output generated]";

/// Renders outputs, then cuts the text to `limits.max_chars` with a note saying how much was left
/// out and where the whole output can be read (`full_output_hint`).
pub fn render_outputs(
    outputs: &[Value],
    limits: OutputLimits,
    full_output_hint: &str,
) -> Vec<Rendered> {
    let rendered: Vec<Rendered> = outputs
        .iter()
        .filter_map(|o| render_output(o, limits.allow_images))
        .collect();
    cut_text(rendered, limits.max_chars, full_output_hint)
}

/// Keeps the text within `max_chars` characters (0 = no limit); images are kept.
pub fn cut_text(
    rendered: Vec<Rendered>,
    max_chars: usize,
    full_output_hint: &str,
) -> Vec<Rendered> {
    let total: usize = rendered
        .iter()
        .map(|r| match r {
            Rendered::Text(t) => t.chars().count(),
            Rendered::Image { .. } => 0,
        })
        .sum();
    if max_chars == 0 || total <= max_chars {
        return rendered;
    }
    let mut budget = max_chars;
    let mut kept = Vec::with_capacity(rendered.len() + 1);
    for piece in rendered {
        match piece {
            Rendered::Text(text) => {
                if budget == 0 {
                    continue;
                }
                let len = text.chars().count();
                if len <= budget {
                    budget -= len;
                    kept.push(Rendered::Text(text));
                } else {
                    kept.push(Rendered::Text(text.chars().take(budget).collect()));
                    budget = 0;
                }
            }
            image => kept.push(image),
        }
    }
    kept.push(Rendered::Text(format!(
        "[OUTPUT TRUNCATED: {} of {total} characters were left out (limit: --max-output-chars={max_chars}). {full_output_hint}]",
        total - max_chars
    )));
    kept
}

pub fn to_content(rendered: Vec<Rendered>) -> Vec<Content> {
    rendered
        .into_iter()
        .map(|piece| match piece {
            Rendered::Text(text) => Content::text(text),
            Rendered::Image { data, mime_type } => Content::image(data, mime_type),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(r: &Rendered) -> &str {
        match r {
            Rendered::Text(t) => t,
            other => panic!("expected text, got {other:?}"),
        }
    }

    #[test]
    fn ansi_codes_are_stripped() {
        assert_eq!(
            strip_ansi("\x1b[0;31mError\x1b[0m: x\x1b]0;title\x07"),
            "Error: x"
        );
        let tb = json!({"output_type": "error", "ename": "ZeroDivisionError", "evalue": "division by zero",
            "traceback": ["\x1b[0;31m---\x1b[0m", "\x1b[0;31mZeroDivisionError\x1b[0m: division by zero"]});
        assert_eq!(
            text(&render_output(&tb, true).unwrap()),
            "---\nZeroDivisionError: division by zero"
        );
    }

    #[test]
    fn mime_preference_follows_upstream() {
        let bundle =
            |data: Value| json!({"output_type": "execute_result", "data": data, "metadata": {}});
        let all = bundle(json!({"text/plain": "p", "text/markdown": "**m**", "text/latex": "$l$"}));
        assert_eq!(text(&render_output(&all, true).unwrap()), "**m**");
        let latex = bundle(json!({"text/plain": "p", "text/latex": "$l$"}));
        assert_eq!(text(&render_output(&latex, true).unwrap()), "$l$");
        let js = bundle(json!({"text/plain": "p", "application/json": {"a": 1}}));
        assert_eq!(text(&render_output(&js, true).unwrap()), "{\n  \"a\": 1\n}");
        let html = bundle(json!({"text/html": "<b>x</b>"}));
        assert_eq!(text(&render_output(&html, true).unwrap()), "[HTML Output]");
        let lines = bundle(json!({"text/plain": ["a\n", "b"]}));
        assert_eq!(text(&render_output(&lines, true).unwrap()), "a\nb");
    }

    #[test]
    fn images_become_image_content_unless_disabled() {
        let png = json!({"output_type": "display_data", "data": {"image/png": "iVBO\nRw==\n", "text/plain": "<Figure>"}});
        assert_eq!(
            render_output(&png, true).unwrap(),
            Rendered::Image {
                data: "iVBORw==".into(),
                mime_type: "image/png".into()
            }
        );
        assert_eq!(
            text(&render_output(&png, false).unwrap()),
            "[Image Output (PNG) - Image display disabled]"
        );
        let jpeg = json!({"output_type": "display_data", "data": {"image/jpeg": "/9j/"}});
        assert!(
            matches!(render_output(&jpeg, true).unwrap(), Rendered::Image { mime_type, .. } if mime_type == "image/jpeg")
        );
    }

    #[test]
    fn long_text_is_cut_with_a_note() {
        let outputs = vec![
            json!({"output_type": "stream", "name": "stdout", "text": "a".repeat(80)}),
            json!({"output_type": "display_data", "data": {"image/png": "AAAA"}}),
            json!({"output_type": "stream", "name": "stderr", "text": "b".repeat(80)}),
        ];
        let limits = OutputLimits {
            max_chars: 100,
            allow_images: true,
        };
        let rendered = render_outputs(&outputs, limits, "See the notebook.");
        assert_eq!(rendered.len(), 4);
        assert_eq!(text(&rendered[0]).len(), 80);
        assert!(matches!(rendered[1], Rendered::Image { .. }));
        assert_eq!(text(&rendered[2]), "b".repeat(20));
        let note = text(&rendered[3]);
        assert!(note.contains("60 of 160 characters"), "{note}");
        assert!(note.contains("See the notebook."));
        let unlimited = OutputLimits {
            max_chars: 0,
            allow_images: true,
        };
        assert_eq!(render_outputs(&outputs, unlimited, "").len(), 3);
    }
}
