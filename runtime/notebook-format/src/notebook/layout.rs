//! JSON written as Python's `json.dump(indent=1, sort_keys=True)` writes it, which is how
//! nbformat saves a notebook: one-space indents, sorted keys, Python's float repr.

use std::io;

use serde_json::Value;
use serde_json::ser::{Formatter, PrettyFormatter};

/// `value` as Python writes it (no trailing newline).
pub(super) fn python_json(value: Value) -> String {
    let sorted = sort_keys(value);
    let mut out = Vec::new();
    let formatter = PythonJson(PrettyFormatter::with_indent(b" "));
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    serde::Serialize::serialize(&sorted, &mut serializer).expect("JSON values serialize");
    String::from_utf8(out).expect("serde_json writes UTF-8")
}

/// serde_json's pretty printer, writing floats as Python's `json.dumps` (which nbformat uses)
/// does: `1e-05`, `1e+16`, `0.0001`, `100000.0`.
struct PythonJson<'a>(PrettyFormatter<'a>);

impl Formatter for PythonJson<'_> {
    fn write_f64<W: ?Sized + io::Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(python_float(value).as_bytes())
    }

    fn begin_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_array(writer)
    }

    fn end_array<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array(writer)
    }

    fn begin_array_value<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_array_value(writer, first)
    }

    fn end_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_array_value(writer)
    }

    fn begin_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object(writer)
    }

    fn end_object<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        first: bool,
    ) -> io::Result<()> {
        self.0.begin_object_key(writer, first)
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.begin_object_value(writer)
    }

    fn end_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        self.0.end_object_value(writer)
    }
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

/// Rebuilds objects with sorted keys whatever map type serde_json was built with.
fn sort_keys(value: Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k, sort_keys(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sort_keys).collect()),
        other => other,
    }
}
