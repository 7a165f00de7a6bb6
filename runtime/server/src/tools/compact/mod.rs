//! `output.compact`: outputs shortened to what a model can use, each cut said in one line that
//! names where the whole output is.
//!
//! Long streams keep their first and (above all) last lines; runs of lines that differ only in
//! their numbers, and runs of identical traceback frames, become the first, a count and the
//! last; a table's text keeps its head and tail rows and its shape; an image is scaled within
//! `--max-image-px` and `--max-image-megapixels` and re-encoded as the smallest faithful form
//! (`images`), at most `--max-images` per result. The exception of an error is always kept.

use super::outputs::{Rendered, render_output, strip_ansi};
use crate::config::OutputLimits;
use server_core::domain::outputs::Output;

mod images;
use images::image;
pub use images::{Sized, sized};

/// Lines of a long stream kept before and after the cut.
const HEAD_LINES: usize = 15;
const TAIL_LINES: usize = 25;
/// Characters of a stream with few, long lines kept before and after the cut.
const HEAD_CHARS: usize = 1_500;
const TAIL_CHARS: usize = 4_000;
/// Traceback frames kept before and after the cut, once repeats are collapsed.
const HEAD_FRAMES: usize = 6;
const TAIL_FRAMES: usize = 10;
/// Rows of a table kept at its head and at its tail.
const TABLE_ROWS: usize = 5;
/// The longest block of lines (or frames) whose repetition is collapsed.
const MAX_PERIOD: usize = 4;
/// How many times a block must occur in a row to be collapsed.
const MIN_REPEATS: usize = 3;

/// The outputs shortened; `whole` names where output `i` can be read whole (a resource URI).
pub fn render(
    outputs: &[Output],
    limits: OutputLimits,
    whole: &dyn Fn(usize) -> String,
) -> Vec<Rendered> {
    let mut rendered = Vec::new();
    let mut images = 0;
    let mut unshown = Vec::new();
    for (index, output) in outputs.iter().enumerate() {
        match output {
            Output::Stream { text, .. } if !text.is_empty() => {
                rendered.push(Rendered::Text(stream(&strip_ansi(text), &whole(index))));
            }
            Output::Error {
                ename,
                evalue,
                traceback,
                ..
            } => rendered.push(Rendered::Text(error(
                ename,
                evalue,
                traceback,
                &whole(index),
            ))),
            _ => match render_output(output, limits.allow_images) {
                Some(Rendered::Image { data, mime_type }) if limits.link_images => {
                    // A link costs the context a line: every image gets one.
                    rendered.push(link(&data, &mime_type, limits, &whole(index)));
                }
                Some(Rendered::Image { data, mime_type }) => {
                    images += 1;
                    if images > limits.max_images {
                        unshown.push(index);
                        continue;
                    }
                    let (image, note) = image(&data, &mime_type, limits, &whole(index));
                    rendered.push(image);
                    rendered.extend(note.map(Rendered::Text));
                }
                Some(Rendered::Text(text)) => {
                    rendered.push(Rendered::Text(stream(&table(&text), &whole(index))))
                }
                Some(link @ Rendered::Link { .. }) => rendered.push(link),
                None => {}
            },
        }
    }
    if !unshown.is_empty() {
        let indices: Vec<String> = unshown.iter().map(usize::to_string).collect();
        rendered.push(Rendered::Text(format!(
            "[{} more image(s) not shown (output(s) {}): at most --max-images={} per result. \
             Read one whole at {}]",
            unshown.len(),
            indices.join(", "),
            limits.max_images,
            whole(unshown[0]),
        )));
    }
    rendered
}

/// `--images link`: a link to the image at `{whole}/image`, which serves it within the bounds;
/// the image itself when it cannot be read (nothing to size).
pub fn link(data: &str, mime_type: &str, limits: OutputLimits, whole: &str) -> Rendered {
    match sized(data, mime_type, limits) {
        Some(image) => Rendered::Link {
            uri: format!("{whole}/image"),
            mime_type: image.mime_type,
            width: image.width,
            height: image.height,
            bytes: image.bytes,
        },
        None => Rendered::Image {
            data: data.to_owned(),
            mime_type: mime_type.to_owned(),
        },
    }
}

/// A stream's text with repeated lines collapsed, then cut to its head and tail; a short one
/// (one that would not be cut) as it is, so small exact values reach the caller unchanged.
fn stream(text: &str, whole: &str) -> String {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.len() <= HEAD_LINES + TAIL_LINES + 1 {
        return cut_chars(text, whole);
    }
    let collapsed = collapse(&lines, MIN_REPEATS, Key::NumbersAsOne, |p, times, same| {
        let what = if p == 1 {
            "the line above".to_owned()
        } else {
            format!("the {p} lines above")
        };
        let how = if same {
            ""
        } else {
            ", differing only in numbers"
        };
        format!(
            "[… {what} repeated {times} more time(s){how}; the last time follows; the whole \
             output: {whole} …]\n"
        )
    });
    let cut = head_and_tail(&collapsed, HEAD_LINES, TAIL_LINES, |left: &[String]| {
        let bytes: usize = left.iter().map(String::len).sum();
        format!(
            "[… {} line(s) ({bytes} bytes) left out here; the whole output: {whole} …]\n",
            left.len()
        )
    });
    cut_chars(&cut.concat(), whole)
}

/// Text of few, long lines cut to its first and last characters.
fn cut_chars(text: &str, whole: &str) -> String {
    let chars = text.chars().count();
    if chars <= HEAD_CHARS + TAIL_CHARS + 200 {
        return text.to_owned();
    }
    let left = chars - HEAD_CHARS - TAIL_CHARS;
    let head: String = text.chars().take(HEAD_CHARS).collect();
    let middle: usize = text
        .chars()
        .skip(HEAD_CHARS)
        .take(left)
        .map(char::len_utf8)
        .sum();
    let tail: String = text.chars().skip(chars - TAIL_CHARS).collect();
    format!(
        "{head}\n[… {left} characters ({middle} bytes) left out here; the whole output: {whole} …]\n{tail}"
    )
}

/// A traceback without terminal codes, runs of identical frames collapsed, cut to its first and
/// last frames; the exception's type and message always end it.
fn error(ename: &str, evalue: &str, traceback: &[String], whole: &str) -> String {
    let frames: Vec<String> = traceback.iter().map(|frame| strip_ansi(frame)).collect();
    let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
    let collapsed = collapse(&frames, MIN_REPEATS, Key::Exact, |p, times, _| {
        let what = if p == 1 {
            "the frame above".to_owned()
        } else {
            format!("the {p} frames above")
        };
        format!("[… {what} repeated {times} more time(s); the last time follows …]")
    });
    let cut = head_and_tail(&collapsed, HEAD_FRAMES, TAIL_FRAMES, |left: &[String]| {
        format!(
            "[… {} frame(s) left out here; the whole traceback: {whole} …]",
            left.len()
        )
    });
    let mut text = if cut.is_empty() {
        String::new()
    } else {
        cut.join("\n")
    };
    let exception = format!(
        "{}: {evalue}",
        if ename.is_empty() { "Error" } else { ename }
    );
    let last = text
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    if !last.contains(ename) || !last.contains(evalue.lines().next().unwrap_or("")) {
        if !text.is_empty() {
            text.push('\n');
        }
        text.push_str(&exception);
    }
    // A frame may hold long lines; the text is cut by characters too, keeping its end.
    cut_chars(&text, whole)
}

/// When two items count as the same in a repeated block.
#[derive(Clone, Copy)]
enum Key {
    /// Equal text.
    Exact,
    /// Equal once every run of digits is read as one `0`: lines that differ only in numbers.
    NumbersAsOne,
}

impl Key {
    /// Each item as this key compares it. Written into one buffer, not a string per item: a
    /// long stream has hundreds of thousands of lines.
    fn of_all(self, items: &[&str]) -> (Vec<u8>, Vec<std::ops::Range<usize>>) {
        let mut buffer = Vec::new();
        let mut ranges = Vec::with_capacity(items.len());
        for item in items {
            let start = buffer.len();
            match self {
                Key::Exact => buffer.extend_from_slice(item.as_bytes()),
                // Bytes, not characters: no byte of a multibyte character is an ASCII digit.
                Key::NumbersAsOne => {
                    let mut in_number = false;
                    for &byte in item.as_bytes() {
                        let digit = byte.is_ascii_digit();
                        if !(digit && in_number) {
                            buffer.push(if digit { b'0' } else { byte });
                        }
                        in_number = digit;
                    }
                }
            }
            ranges.push(start..buffer.len());
        }
        (buffer, ranges)
    }
}

/// `items` with every run of `min_repeats` or more equal blocks (of up to `MAX_PERIOD` items,
/// compared by `key`) shown as its first block, a note, and its last block.
fn collapse(
    items: &[&str],
    min_repeats: usize,
    key: Key,
    note: impl Fn(usize, usize, bool) -> String,
) -> Vec<String> {
    let (buffer, ranges) = key.of_all(items);
    let keys: Vec<&[u8]> = ranges.into_iter().map(|range| &buffer[range]).collect();
    let mut out = Vec::with_capacity(items.len());
    let mut i = 0;
    while i < items.len() {
        // The block length covering the most items from here.
        let mut best = (0, 0);
        for p in 1..=MAX_PERIOD.min(items.len() - i) {
            let mut repeats = 1;
            while i + (repeats + 1) * p <= items.len()
                && keys[i + repeats * p..i + (repeats + 1) * p] == keys[i..i + p]
            {
                repeats += 1;
            }
            if repeats >= min_repeats && p * repeats > best.0 * best.1 {
                best = (p, repeats);
            }
        }
        let (p, repeats) = best;
        if p == 0 {
            out.push(items[i].to_owned());
            i += 1;
            continue;
        }
        let run = &items[i..i + p * repeats];
        let same = run.chunks(p).all(|block| block == &run[..p]);
        out.extend(run[..p].iter().map(|s| (*s).to_owned()));
        out.push(note(p, repeats - 2, same));
        out.extend(run[run.len() - p..].iter().map(|s| (*s).to_owned()));
        i += p * repeats;
    }
    out
}

/// The first `head` and last `tail` items, with a note in place of what is between.
fn head_and_tail(
    items: &[String],
    head: usize,
    tail: usize,
    note: impl Fn(&[String]) -> String,
) -> Vec<String> {
    if items.len() <= head + tail + 1 {
        return items.to_vec();
    }
    let mut kept = items[..head].to_vec();
    kept.push(note(&items[head..items.len() - tail]));
    kept.extend_from_slice(&items[items.len() - tail..]);
    kept
}

/// A table's text (pandas' form: a header line, then one line per row led by its index, and
/// `[R rows x C columns]` when pandas cut it) cut to its head and tail rows, its header and
/// shape kept; other text as it is.
fn table(text: &str) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.len() <= 2 * TABLE_ROWS + 2 || lines.iter().any(|l| l.ends_with('\\')) {
        // Short, or too wide for one block (printed in several, lines ending in `\`): whole.
        return text.to_owned();
    }
    let last = lines[lines.len() - 1].trim();
    let said = last.starts_with('[') && last.ends_with(" columns]") && last.contains(" rows x ");
    let rows = &lines[1..lines.len() - usize::from(said)];
    let columns = lines[0].split_whitespace().count();
    let shape = if said {
        last.to_owned()
    } else {
        // Printed whole: a table only if every row is its index and one field per column.
        if columns == 0
            || rows
                .iter()
                .any(|r| r.split_whitespace().count() != columns + 1)
        {
            return text.to_owned();
        }
        format!("[{} rows x {columns} columns]", rows.len())
    };
    let mut kept = vec![lines[0]];
    kept.extend_from_slice(&rows[..TABLE_ROWS]);
    kept.push("...");
    kept.extend_from_slice(&rows[rows.len() - TABLE_ROWS..]);
    kept.push("");
    kept.push(&shape);
    kept.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbered_lines_collapse_keeping_first_and_last() {
        let text: String = (0..5000)
            .map(|i| format!("epoch {i} loss 0.{i}\n"))
            .collect();
        let out = stream(&text, "notebook://nb/cells/c/outputs/0");
        assert!(out.starts_with("epoch 0 loss 0.0\n"), "{out}");
        assert!(out.ends_with("epoch 4999 loss 0.4999\n"), "{out}");
        assert!(out.contains("repeated 4998 more time(s), differing only in numbers"));
        assert!(out.len() < 300, "{out}");
    }

    #[test]
    fn pairs_of_lines_collapse_as_blocks() {
        let text: String = (0..200)
            .map(|i| format!("/tmp/x.py:3: UserWarning: w{i}\n  warnings.warn(f'w{{i}}')\n"))
            .collect();
        let out = stream(&text, "u");
        assert!(
            out.contains("the 2 lines above repeated 198 more time(s)"),
            "{out}"
        );
        assert!(out.contains("UserWarning: w199"));
    }

    #[test]
    fn long_streams_keep_head_and_tail_and_name_the_whole() {
        let text: String = (0..100)
            .map(|i| format!("{}\n", "ab".repeat(i % 7 + 1) + &"x".repeat(i)))
            .collect();
        let out = stream(&text, "notebook://nb/cells/c/outputs/2");
        assert!(out.contains("line(s) ("), "{out}");
        assert!(out.contains("the whole output: notebook://nb/cells/c/outputs/2"));
        assert!(out.trim_end().ends_with(&"x".repeat(99)));
    }

    #[test]
    fn recursion_keeps_the_exception_and_collapses_frames() {
        let mut traceback = vec![
            "\u{1b}[0;31m---\u{1b}[0m".to_owned(),
            "Cell In[1], line 3".to_owned(),
        ];
        for _ in 0..2970 {
            traceback.push("Cell In[1], line 2, in f(n)\n----> 2     return f(n + 1)".to_owned());
        }
        traceback.push(
            "\u{1b}[0;31mRecursionError\u{1b}[0m: maximum recursion depth exceeded".to_owned(),
        );
        let out = error(
            "RecursionError",
            "maximum recursion depth exceeded",
            &traceback,
            "u",
        );
        assert!(!out.contains('\u{1b}'));
        assert!(
            out.contains("the frame above repeated 2968 more time(s)"),
            "{out}"
        );
        assert!(
            out.trim_end()
                .ends_with("RecursionError: maximum recursion depth exceeded")
        );
        assert!(out.len() < 500, "{}", out.len());
        let bare = error("KeyError", "'x'", &[], "u");
        assert_eq!(bare, "KeyError: 'x'");
    }

    #[test]
    fn tables_keep_head_tail_and_shape() {
        let mut text = String::from("    a  b\n");
        for i in 0..300 {
            text.push_str(&format!("{i}  1  2\n"));
        }
        text.push_str("\n[300 rows x 2 columns]");
        let out = table(&text);
        assert_eq!(out.lines().count(), 1 + 5 + 1 + 5 + 2);
        assert!(out.ends_with("[300 rows x 2 columns]") && out.contains("299  1  2"));
        // Printed whole (no shape line): the shape is counted.
        let whole = text.replace("\n[300 rows x 2 columns]", "");
        let out = table(&whole);
        assert!(
            out.ends_with("[300 rows x 2 columns]") && out.contains("299  1  2"),
            "{out}"
        );
        assert_eq!(table("a\nb c d\n"), "a\nb c d\n");
    }
}
