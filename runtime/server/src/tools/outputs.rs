//! Kernel outputs (nbformat shape) turned into what an agent reads.
//!
//! Follows the Python server: ANSI codes stripped, PNG/JPEG as image content, text preferred as
//! markdown > latex > json > plain, tracebacks for errors. Unlike it, text beyond
//! `--max-output-chars` is cut with a note, so one noisy cell cannot flood an agent's context.

use rmcp::model::ContentBlock as Content;
use serde_json::Value;

use crate::config::OutputLimits;
use server_core::domain::outputs::Output;

/// Text as a terminal (and JupyterLab) would show it, with nothing that could drive one:
/// escape sequences (CSI, OSC, DCS, SOS, PM, APC, in their 7-bit `ESC x` and 8-bit C1 forms) are
/// dropped with their payloads, every other C0/C1 control and DEL is dropped, `\n` and `\t`
/// stay, `\r\n` is a newline, a lone `\r` returns to the start of the line so what follows
/// overwrites it (a tqdm bar collapses to its last state), and a backspace erases the character
/// before it, as JupyterLab renders them.
pub fn strip_ansi(text: &str) -> String {
    // Most output has nothing to strip: one scan of its bytes, then a copy.
    if !has_controls(text) {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut line: Vec<char> = Vec::new();
    let mut cursor = 0;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => {
                out.extend(line.drain(..));
                out.push('\n');
                cursor = 0;
            }
            '\r' => {
                if chars.peek() != Some(&'\n') {
                    cursor = 0;
                }
            }
            '\u{8}' => {
                if cursor > 0 {
                    cursor -= 1;
                    line.remove(cursor);
                }
            }
            '\u{1b}' => match chars.next() {
                Some('[') => skip_csi(&mut chars),
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // nF sequences (`ESC ( B`): intermediates, then one final byte.
                Some(' '..='/') => {
                    while chars.next_if(|c| matches!(c, ' '..='/')).is_some() {}
                    chars.next();
                }
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{90}' | '\u{98}' | '\u{9d}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\t' => put(&mut line, &mut cursor, c),
            c if c.is_control() => {}
            c => put(&mut line, &mut cursor, c),
        }
    }
    out.extend(line);
    out
}

/// Whether `text` holds a control character other than `\n` and `\t` (C0, DEL, or C1, which
/// UTF-8 writes as 0xC2 0x80..0x9F): only then does stripping change anything.
fn has_controls(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.iter().enumerate().any(|(at, &byte)| match byte {
        b'\n' | b'\t' => false,
        0..0x20 | 0x7f => true,
        0xc2 => bytes
            .get(at + 1)
            .is_some_and(|next| (0x80..0xa0).contains(next)),
        _ => false,
    })
}

/// Writes at the cursor: over what a `\r` went back across, else at the end.
fn put(line: &mut Vec<char>, cursor: &mut usize, c: char) {
    if *cursor < line.len() {
        line[*cursor] = c;
    } else {
        line.push(c);
    }
    *cursor += 1;
}

/// The rest of a CSI sequence: parameters and intermediates, then one final byte.
fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while chars
        .next_if(|c| matches!(c, '0'..='?' | ' '..='/'))
        .is_some()
    {}
    chars.next_if(|c| matches!(c, '@'..='~'));
}

/// The payload of an OSC/DCS/SOS/PM/APC string, through its terminator (BEL, `ESC \` or ST).
fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => return,
            '\u{1b}' => {
                chars.next_if_eq(&'\\');
                return;
            }
            _ => {}
        }
    }
}

/// One piece of an output as the agent sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum Rendered {
    Text(String),
    Image {
        data: String,
        mime_type: String,
    },
    /// `--images link`: an image the server serves at `uri`, within the image bounds.
    Link {
        uri: String,
        mime_type: String,
        width: u32,
        height: u32,
        bytes: usize,
    },
}

/// Renders one output.
pub fn render_output(output: &Output, allow_images: bool) -> Option<Rendered> {
    match output {
        Output::Stream { text, .. } => (!text.is_empty()).then(|| Rendered::Text(strip_ansi(text))),
        Output::DisplayData { data, .. } | Output::ExecuteResult { data, .. } => {
            for mime in ["image/png", "image/jpeg"] {
                if let Some(image) = data.text(mime) {
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
                if let Some(text) = data.text(mime) {
                    return Some(Rendered::Text(strip_ansi(&text)));
                }
            }
            if let Some(json) = data.json("application/json") {
                let pretty = serde_json::to_string_pretty(json).unwrap_or_default();
                return Some(Rendered::Text(pretty));
            }
            if let Some(text) = data.text("text/plain") {
                return Some(Rendered::Text(strip_ansi(&text)));
            }
            if data.contains("text/html") {
                return Some(Rendered::Text("[HTML Output]".to_owned()));
            }
            let keys: Vec<String> = data.mime_types().map(|k| format!("'{k}'")).collect();
            Some(Rendered::Text(format!(
                "[{} Data: keys=[{}]]",
                output.output_type(),
                keys.join(", ")
            )))
        }
        Output::Error {
            ename,
            evalue,
            traceback,
            ..
        } => Some(Rendered::Text(strip_ansi(&Output::error_text(
            ename, evalue, traceback,
        )))),
        Output::Other(_) => Some(Rendered::Text(strip_ansi(&format!(
            "[Unknown output type: {}]",
            output.output_type()
        )))),
    }
}

pub const NO_OUTPUT: &str = "[No output generated]";

/// Where the whole of a result's outputs can be read: the resource URI under which output `i`
/// is `{base}/outputs/{i}`; and whether `output.compact` shortens them (`shorten`). Images are
/// linked there under `--images link`.
#[derive(Debug, Clone, Copy)]
pub struct Compact<'a> {
    pub base: &'a str,
    pub shorten: bool,
}

/// Renders outputs (shortened when `compact` says where the whole is), then cuts the text to
/// `limits.max_chars` with a note saying how much was left out and where the whole output can
/// be read (`full_output_hint`).
pub fn render_outputs(
    outputs: &[Output],
    limits: OutputLimits,
    compact: Option<Compact<'_>>,
    full_output_hint: &str,
) -> Vec<Rendered> {
    let rendered: Vec<Rendered> = match compact {
        Some(Compact {
            base,
            shorten: true,
        }) => {
            // Decoding and scaling images takes a while: off the async worker's role.
            let whole = |i: usize| format!("{base}/outputs/{i}");
            let shorten = || super::compact::render(outputs, limits, &whole);
            match tokio::runtime::Handle::try_current() {
                Ok(handle)
                    if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread =>
                {
                    tokio::task::block_in_place(shorten)
                }
                _ => shorten(),
            }
        }
        _ => {
            let base = compact.map(|c| c.base);
            outputs
                .iter()
                .enumerate()
                .filter_map(|(i, o)| match render_output(o, limits.allow_images)? {
                    // Not shortened: the link serves the original.
                    Rendered::Image { data, mime_type } if limits.link_images && base.is_some() => {
                        let whole = format!("{}/outputs/{i}", base.unwrap_or_default());
                        let unbounded = OutputLimits {
                            max_image_px: u32::MAX,
                            max_image_megapixels: f64::INFINITY,
                            ..limits
                        };
                        Some(super::compact::link(&data, &mime_type, unbounded, &whole))
                    }
                    rendered => Some(rendered),
                })
                .collect()
        }
    };
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
            Rendered::Image { .. } | Rendered::Link { .. } => 0,
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

/// The pieces as MCP content; linked images are counted in a last line.
pub fn to_content(rendered: Vec<Rendered>) -> Vec<Content> {
    let mut linked = 0;
    let mut content: Vec<Content> = rendered
        .into_iter()
        .map(|piece| match piece {
            Rendered::Text(text) => Content::text(text),
            Rendered::Image { data, mime_type } => Content::image(data, mime_type),
            Rendered::Link {
                uri,
                mime_type,
                width,
                height,
                bytes,
            } => {
                linked += 1;
                let mut link = rmcp::model::Resource::new(uri, format!("image {linked}"));
                link.mime_type = Some(mime_type);
                link.size = Some(bytes as u64);
                link.description = Some(format!("{width}×{height} px, {bytes} bytes"));
                Content::resource_link(link)
            }
        })
        .collect();
    if linked > 0 {
        content.push(Content::text(format!(
            "[{linked} image(s) linked, not included (--images link): read one with              resources/read of its URI when you need to see it]"
        )));
    }
    content
}

/// How many times the text budget the MIME bundles of a result may take: they carry images and
/// chart specs for a viewer to draw, which the model never reads (3.2 MB at the default 50 000).
const RICH_BUDGET_FACTOR: usize = 64;

/// The outputs as nbformat MIME bundles, for clients that render them (the MCP Apps viewer):
/// `{"outputs": [...]}`, whole outputs in order while they fit the budget, then
/// `"omitted": "<what was left out and where to find it>"`; and `"widgets"`, the widget state
/// (nbformat's) of the widgets they show, when there is any and it fits too.
pub fn bundles(
    outputs: &[Output],
    widgets: Option<Value>,
    limits: OutputLimits,
    full_output_hint: &str,
) -> Value {
    let budget = limits.max_chars.saturating_mul(RICH_BUDGET_FACTOR);
    let fits =
        |used: usize, size: usize| limits.max_chars == 0 || used.saturating_add(size) <= budget;
    let mut kept = Vec::new();
    let mut used = 0usize;
    for (index, output) in outputs.iter().enumerate() {
        // A stream's JSON is longer than its text: a long one is known not to fit without
        // writing it out (a long-printing cell's output would be copied twice for nothing).
        let surely_over = matches!(output, Output::Stream { text, .. } if !fits(used, text.len()));
        let output = (!surely_over).then(|| output.to_json());
        let size = output
            .as_ref()
            .map_or(usize::MAX, |json| json.to_string().len());
        let Some(output) = output.filter(|_| fits(used, size)) else {
            let left = outputs.len() - index;
            return serde_json::json!({
                "outputs": kept,
                "omitted": format!(
                    "{left} more output(s) left out: over the {budget}-character budget of rich \
                     outputs. {full_output_hint}"
                ),
            });
        };
        used += size;
        kept.push(output);
    }
    let mut shaped = serde_json::json!({ "outputs": kept });
    if let Some(widgets) = widgets {
        if fits(used, widgets.to_string().len()) {
            shaped["widgets"] = widgets;
        } else {
            shaped["omitted"] = format!(
                "The widgets' state was left out: over the {budget}-character budget of rich \
                 outputs; they are shown in their text form."
            )
            .into();
        }
    }
    shaped
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn typed(value: &Value) -> Output {
        Output::from_json(value)
    }

    fn text(r: &Rendered) -> &str {
        match r {
            Rendered::Text(t) => t,
            other => panic!("expected text, got {other:?}"),
        }
    }

    #[test]
    fn terminal_controls_are_dropped_and_carriage_returns_overwrite() {
        // 8-bit CSI, BEL, DCS/APC/OSC payloads, C1 controls, DEL.
        assert_eq!(
            strip_ansi(
                "a\u{9b}31mb\u{7}c\u{1b}Pq#0\u{1b}\\d\u{1b}_hidden\u{9c}e\u{85}\u{7f}f\u{1b}]8;;x\u{7}g"
            ),
            "abcdefg"
        );
        assert_eq!(
            strip_ansi("keep\ttabs\nand lines\r\n"),
            "keep\ttabs\nand lines\n"
        );
        // A tqdm bar: each state rewrites the line; the last one stays.
        assert_eq!(
            strip_ansi("  0%|     | 0/3\r 33%|#    | 1/3\r100%|#####| 3/3\nnext"),
            "100%|#####| 3/3\nnext"
        );
        assert_eq!(strip_ansi("long line\rshort"), "shortline");
        assert_eq!(strip_ansi("abc\u{8}\u{8}X"), "aX");
        assert_eq!(strip_ansi("\u{1b}(Bplain\u{1b}7"), "plain");
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
            text(&render_output(&typed(&tb), true).unwrap()),
            "---\nZeroDivisionError: division by zero"
        );
    }

    #[test]
    fn mime_preference_follows_upstream() {
        let bundle =
            |data: Value| json!({"output_type": "execute_result", "data": data, "metadata": {}});
        let all = bundle(json!({"text/plain": "p", "text/markdown": "**m**", "text/latex": "$l$"}));
        assert_eq!(text(&render_output(&typed(&all), true).unwrap()), "**m**");
        let latex = bundle(json!({"text/plain": "p", "text/latex": "$l$"}));
        assert_eq!(text(&render_output(&typed(&latex), true).unwrap()), "$l$");
        let js = bundle(json!({"text/plain": "p", "application/json": {"a": 1}}));
        assert_eq!(
            text(&render_output(&typed(&js), true).unwrap()),
            "{\n  \"a\": 1\n}"
        );
        let html = bundle(json!({"text/html": "<b>x</b>"}));
        assert_eq!(
            text(&render_output(&typed(&html), true).unwrap()),
            "[HTML Output]"
        );
        let lines = bundle(json!({"text/plain": ["a\n", "b"]}));
        assert_eq!(text(&render_output(&typed(&lines), true).unwrap()), "a\nb");
    }

    #[test]
    fn images_become_image_content_unless_disabled() {
        let png = json!({"output_type": "display_data", "data": {"image/png": "iVBO\nRw==\n", "text/plain": "<Figure>"}});
        assert_eq!(
            render_output(&typed(&png), true).unwrap(),
            Rendered::Image {
                data: "iVBORw==".into(),
                mime_type: "image/png".into()
            }
        );
        assert_eq!(
            text(&render_output(&typed(&png), false).unwrap()),
            "[Image Output (PNG) - Image display disabled]"
        );
        let jpeg = json!({"output_type": "display_data", "data": {"image/jpeg": "/9j/"}});
        assert!(
            matches!(render_output(&typed(&jpeg), true).unwrap(), Rendered::Image { mime_type, .. } if mime_type == "image/jpeg")
        );
    }

    #[test]
    fn long_text_is_cut_with_a_note() {
        let outputs = vec![
            json!({"output_type": "stream", "name": "stdout", "text": "a".repeat(80)}),
            json!({"output_type": "display_data", "data": {"image/png": "AAAA"}}),
            json!({"output_type": "stream", "name": "stderr", "text": "b".repeat(80)}),
        ];
        let limits = OutputLimits::text(100, true);
        let rendered = render_outputs(
            &Output::all_from_json(&outputs),
            limits,
            None,
            "See the notebook.",
        );
        assert_eq!(rendered.len(), 4);
        assert_eq!(text(&rendered[0]).len(), 80);
        assert!(matches!(rendered[1], Rendered::Image { .. }));
        assert_eq!(text(&rendered[2]), "b".repeat(20));
        let note = text(&rendered[3]);
        assert!(note.contains("60 of 160 characters"), "{note}");
        assert!(note.contains("See the notebook."));
        let unlimited = OutputLimits::text(0, true);
        assert_eq!(
            render_outputs(&Output::all_from_json(&outputs), unlimited, None, "").len(),
            3
        );
    }

    #[test]
    fn linked_images_name_their_resource_and_size_and_are_counted() {
        use base64::Engine;
        let mut png = Vec::new();
        image::RgbImage::from_pixel(3000, 20, image::Rgb([200, 30, 30]))
            .write_to(&mut std::io::Cursor::new(&mut png), image::ImageFormat::Png)
            .unwrap();
        let data = base64::engine::general_purpose::STANDARD.encode(&png);
        let output = typed(&json!({"output_type": "display_data", "data": {"image/png": data}}));
        let mut limits = OutputLimits::text(0, true);
        limits.link_images = true;
        let at = |shorten| Compact {
            base: "notebook://nb/cells/c1",
            shorten,
        };
        // Shortened: the link serves the image scaled within the bounds.
        let compact = render_outputs(std::slice::from_ref(&output), limits, Some(at(true)), "");
        let [Rendered::Link { uri, width, .. }] = &compact[..] else {
            panic!("{compact:?}")
        };
        assert_eq!(uri, "notebook://nb/cells/c1/outputs/0/image");
        assert!((1560..=1568).contains(width), "{width}");
        // Whole: the link serves the image as it came, and says so by its size.
        let whole = render_outputs(std::slice::from_ref(&output), limits, Some(at(false)), "");
        let [
            Rendered::Link {
                width,
                height,
                bytes,
                ..
            },
        ] = &whole[..]
        else {
            panic!("{whole:?}")
        };
        assert_eq!((*width, *height, *bytes), (3000, 20, png.len()));
        let content = to_content(whole);
        assert_eq!(content.len(), 2);
        let link = content[0].as_resource_link().unwrap();
        assert_eq!(link.size, Some(png.len() as u64));
        assert_eq!(
            link.description.as_deref(),
            Some(format!("3000×20 px, {} bytes", png.len()).as_str())
        );
        assert!(
            content[1]
                .as_text()
                .unwrap()
                .text
                .starts_with("[1 image(s) linked")
        );
        // Inline (the default): the image itself.
        limits.link_images = false;
        let inline = render_outputs(std::slice::from_ref(&output), limits, Some(at(false)), "");
        assert!(matches!(inline[..], [Rendered::Image { .. }]));
    }

    #[test]
    fn bundles_keep_whole_outputs_within_the_rich_budget() {
        let small = serde_json::json!({"output_type": "stream", "name": "stdout", "text": "hi"});
        let big = serde_json::json!({"output_type": "display_data", "metadata": {},
            "data": {"image/png": "A".repeat(400)}});
        let limits = OutputLimits::text(5, true);
        let shaped = bundles(
            &[typed(&small), typed(&big)],
            None,
            limits,
            "See the notebook.",
        );
        assert_eq!(shaped["outputs"], serde_json::json!([small]));
        assert!(
            shaped["omitted"]
                .as_str()
                .unwrap()
                .starts_with("1 more output(s) left out")
        );
        let unbounded = OutputLimits::text(0, true);
        let all = bundles(&[typed(&small), typed(&big)], None, unbounded, "");
        assert_eq!(all, serde_json::json!({"outputs": [small.clone(), big]}));
        let widgets = serde_json::json!({"state": {"m": {"state": {"value": 1}}}});
        let with = bundles(&[typed(&small)], Some(widgets.clone()), limits, "");
        assert_eq!(
            with,
            serde_json::json!({"outputs": [small.clone()], "widgets": widgets})
        );
        let huge = serde_json::json!({"state": {"m": {"state": {"value": "x".repeat(400)}}}});
        let without = bundles(&[typed(&small)], Some(huge), limits, "");
        assert_eq!(without["outputs"], serde_json::json!([small]));
        assert!(without.get("widgets").is_none() && without["omitted"].is_string());
    }
}
