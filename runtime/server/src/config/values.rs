//! How flag and environment values are read: durations, booleans as the Python server reads
//! them, http(s) URLs, sizes, backend names and secrets, each refused with what to write instead.

use url::Url;

use jupyter_client::auth::Secret;

use super::DocumentBackend;

pub(super) fn parse_secret(value: &str) -> Result<Secret, String> {
    Ok(Secret::new(value.to_owned()))
}

/// A duration as people write it: a number and a unit (`s`, `m`, `h`, `d`; bare: seconds),
/// more than zero.
pub fn parse_duration(value: &str) -> Result<std::time::Duration, String> {
    let value = value.trim();
    let split = value
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(value.len());
    let (number, unit) = value.split_at(split);
    let unit_secs = match unit.trim() {
        "" | "s" | "sec" | "secs" => 1.0,
        "m" | "min" | "mins" => 60.0,
        "h" | "hour" | "hours" => 3600.0,
        "d" | "day" | "days" => 86_400.0,
        other => {
            return Err(format!(
                "unknown unit {other:?} in {value:?}: write a number with s, m, h or d (24h, 90m, \
                 3600s)"
            ));
        }
    };
    let number: f64 = number.parse().map_err(|_| {
        format!("{value:?} is not a duration: write a number with s, m, h or d (24h, 90m, 3600s)")
    })?;
    let secs = number * unit_secs;
    if !(secs.is_finite() && secs > 0.0 && secs <= 100.0 * 365.0 * 86_400.0) {
        return Err(format!(
            "{value:?} must be more than zero and at most 100 years"
        ));
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Booleans as the Python server reads them.
pub fn parse_bool(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" | "on" => Ok(true),
        "0" | "false" | "f" | "no" | "n" | "off" => Ok(false),
        _ => Err(format!(
            "'{value}' is not a boolean; use true/false, yes/no, on/off or 1/0"
        )),
    }
}

pub(super) fn parse_http_url(value: &str) -> Result<Url, String> {
    let url = Url::parse(value).map_err(|e| format!("'{value}' is not a URL ({e})"))?;
    match url.scheme() {
        "http" | "https" => Ok(url),
        other => Err(format!(
            "'{value}' uses the scheme '{other}'; give an http:// or https:// URL"
        )),
    }
}

/// `--max-image-megapixels`: a positive number.
pub(super) fn positive_megapixels(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(value) if value.is_finite() && value >= 0.001 => Ok(value),
        _ => Err(format!(
            "'{text}' is not a size in megapixels; give a number of at least 0.001, e.g. 1.15"
        )),
    }
}

/// `--document-backend`'s names for the core's [`DocumentBackend`].
pub(super) fn document_backends() -> impl clap::builder::TypedValueParser<Value = DocumentBackend> {
    use clap::builder::TypedValueParser as _;
    clap::builder::PossibleValuesParser::new(["auto", "file", "live"]).map(|name| {
        match name.as_str() {
            "file" => DocumentBackend::File,
            "live" => DocumentBackend::Live,
            _ => DocumentBackend::Auto,
        }
    })
}
