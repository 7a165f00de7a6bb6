//! The settings the core reads, as its own types: the server maps its flags and config file onto
//! them.

use std::path::PathBuf;
use std::time::Duration;

/// How notebooks are read and edited (`--document-backend`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocumentBackend {
    Auto,
    File,
    Live,
}

#[derive(Debug, Clone, Copy)]
pub struct ExecutionLimits {
    pub default_timeout: Duration,
    pub max_timeout: Duration,
    /// `--progress-interval`: the longest silence towards a client that asked for progress.
    pub keepalive: Duration,
    /// `--execution-memory-mb`: the bytes of output ended execution records may hold in memory
    /// together.
    pub memory_budget: usize,
}

impl ExecutionLimits {
    /// The timeout a call gets: `0` means the configured default; anything is clamped to the maximum.
    pub fn resolve(&self, requested_secs: f64) -> Duration {
        if requested_secs.is_finite() && requested_secs > 0.0 {
            // Clamped before converting: 1e300 seconds is the maximum, not a panic.
            Duration::from_secs_f64(requested_secs.min(self.max_timeout.as_secs_f64()))
        } else {
            self.default_timeout.min(self.max_timeout)
        }
    }
}

#[derive(Debug, Clone, Copy)]
pub struct OutputLimits {
    /// 0 disables cutting.
    pub max_chars: usize,
    pub allow_images: bool,
    /// While `output.compact` is on: an image's longer side at most, in pixels.
    pub max_image_px: u32,
    /// While `output.compact` is on: an image's area at most, in megapixels.
    pub max_image_megapixels: f64,
    /// While `output.compact` is on: images per result at most.
    pub max_images: usize,
    /// `--images link`: results link each image (a resource_link) instead of carrying it.
    pub link_images: bool,
}

impl OutputLimits {
    /// These text limits with the default image bounds.
    pub fn text(max_chars: usize, allow_images: bool) -> Self {
        OutputLimits {
            max_chars,
            allow_images,
            max_image_px: 1568,
            max_image_megapixels: 1.15,
            max_images: 4,
            link_images: false,
        }
    }
}

/// The execution store's place and bounds (`--state-dir`, `--execution-retention`,
/// `--state-max-mb`).
#[derive(Debug, Clone, PartialEq)]
pub struct StateSettings {
    pub dir: PathBuf,
    pub retention: Duration,
    pub max_bytes: u64,
}

/// The Redis execution records are shared in (`--state-store`), and how to sign in: the URL never carries the password (it
/// comes from the environment, never argv).
#[derive(Debug, Clone)]
pub struct SharedStoreSettings {
    /// `redis://HOST:PORT[/DB]` or `rediss://…`, without credentials.
    pub url: url::Url,
    pub username: Option<String>,
    pub password: Option<jupyter_client::auth::Secret>,
    pub retention: Duration,
}

impl SharedStoreSettings {
    /// `HOST:PORT`, for messages.
    pub fn target(&self) -> String {
        format!(
            "{}:{}",
            self.url.host_str().unwrap_or("?"),
            self.url.port().unwrap_or(6379)
        )
    }
}

pub fn humane_duration(duration: std::time::Duration) -> String {
    let secs = duration.as_secs();
    if duration.subsec_nanos() != 0 || secs == 0 {
        return format!("{:.3}s", duration.as_secs_f64());
    }
    for (unit, size) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if secs.is_multiple_of(size) {
            return format!("{}{unit}", secs / size);
        }
    }
    format!("{secs}s")
}
