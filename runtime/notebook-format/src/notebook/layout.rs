//! JSON written as Python's `json.dump(indent=1, sort_keys=True)` writes it, which is how
//! nbformat saves a notebook: one-space indents, sorted keys, Python's float repr. Written by
//! hand rather than through serde_json's pretty printer so a part (one cell) can be written
//! alone at the depth it has in the whole, and reused there.

use serde_json::Value;

/// Appends `value` as Python writes it (no trailing newline), nested `depth` levels deep: its
/// inner lines are indented for that depth, so a piece written alone fits where a whole write
/// would put it.
pub(super) fn write_value(out: &mut String, value: &Value, depth: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(true) => out.push_str("true"),
        Value::Bool(false) => out.push_str("false"),
        Value::Number(number) => match number.as_f64().filter(|_| number.is_f64()) {
            Some(float) => out.push_str(&python_float(float)),
            None => out.push_str(&number.to_string()),
        },
        Value::String(text) => write_string(out, text),
        Value::Array(items) => {
            write_items(out, depth, '[', ']', items.iter(), |out, item, depth| {
                write_value(out, item, depth)
            });
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
            write_items(
                out,
                depth,
                '{',
                '}',
                entries.into_iter(),
                |out, (key, value), depth| {
                    write_string(out, key);
                    out.push_str(": ");
                    write_value(out, value, depth);
                },
            );
        }
    }
}

/// A JSON string, escaped as serde_json (and Python with `ensure_ascii=False`) escape it.
pub(super) fn write_string(out: &mut String, text: &str) {
    out.push_str(&serde_json::to_string(text).expect("strings serialize"));
}

/// A list or object with one item a line, one space of indent a level, as `json.dump(indent=1)`
/// writes them; empty ones stay on one line.
pub(super) fn write_items<T>(
    out: &mut String,
    depth: usize,
    open: char,
    close: char,
    items: impl Iterator<Item = T>,
    mut write: impl FnMut(&mut String, T, usize),
) {
    out.push(open);
    let mut any = false;
    for item in items {
        out.push_str(if any { ",\n" } else { "\n" });
        indent(out, depth + 1);
        write(out, item, depth + 1);
        any = true;
    }
    if any {
        out.push('\n');
        indent(out, depth);
    }
    out.push(close);
}

fn indent(out: &mut String, depth: usize) {
    out.extend(std::iter::repeat_n(' ', depth));
}

/// A float as Python's `repr` writes it: the shortest digits that read back the same (as Rust's
/// own formatting finds them), in exponent form below 1e-4 and from 1e16 on.
pub(super) fn python_float(value: f64) -> String {
    let exponential = format!("{value:e}");
    let (mantissa, exponent) = exponential
        .split_once('e')
        .expect("Rust writes an exponent");
    let exponent: i32 = exponent.parse().expect("Rust writes an integer exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(positive) => ("-", positive),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    // Where the decimal point goes, counted in digits from the first.
    let point = exponent + 1;
    let count = digits.len() as i32;
    if point <= -4 || point > 16 {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let exponent_sign = if exponent < 0 { '-' } else { '+' };
        format!(
            "{sign}{first}{dot}{rest}e{exponent_sign}{:02}",
            exponent.unsigned_abs()
        )
    } else if point <= 0 {
        format!(
            "{sign}0.{}{digits}",
            "0".repeat(point.unsigned_abs() as usize)
        )
    } else if count <= point {
        format!("{sign}{digits}{}.0", "0".repeat((point - count) as usize))
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        format!("{sign}{whole}.{fraction}")
    }
}
