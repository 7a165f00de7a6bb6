//! The user's own folders as the XDG base-directory spec names them: the variable when it is set
//! to an absolute path, else its default under HOME. `None` when neither is set (a service with no
//! HOME): callers then say where to point instead of guessing a shared place.

use std::path::PathBuf;

/// `$VAR`, else `$HOME/home_default` (e.g. `XDG_CACHE_HOME`, `.cache`).
pub fn base(var: &str, home_default: &str) -> Option<PathBuf> {
    base_in(&|key| std::env::var(key).ok(), var, home_default)
}

/// [`base`] with the environment given (for tests and resolved configs). A relative `$VAR` is
/// ignored, as the XDG spec says.
pub fn base_in(
    env: &impl Fn(&str) -> Option<String>,
    var: &str,
    home_default: &str,
) -> Option<PathBuf> {
    env(var)
        .filter(|v| v.starts_with('/'))
        .map(PathBuf::from)
        .or_else(|| {
            env("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(home_default))
        })
}

/// `jupyter-mcp-server`'s folder under `$XDG_CONFIG_HOME` (else `~/.config`).
pub fn config() -> Option<PathBuf> {
    base("XDG_CONFIG_HOME", ".config").map(|b| b.join("jupyter-mcp-server"))
}

/// `jupyter-mcp-server`'s folder under `$XDG_CACHE_HOME` (else `~/.cache`).
pub fn cache() -> Option<PathBuf> {
    base("XDG_CACHE_HOME", ".cache").map(|b| b.join("jupyter-mcp-server"))
}
