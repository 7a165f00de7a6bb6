//! The kernelspec that starts a Python kernel through the sandbox's launcher.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use crate::SandboxError;

/// The name the server starts sandboxed kernels by in a Jupyter it starts itself: the usual
/// `python3`, so notebooks, spares and a person's kernels in that Jupyter all get the sandbox.
pub const EMBEDDED_NAME: &str = "python3";

/// `kernel.json` for a kernel run by `python` under `launcher` (this binary) with the policy at
/// `policy`.
pub fn kernel_json(launcher: &Path, policy: &Path, python: &Path, display_name: &str) -> Value {
    json!({
        "argv": [
            launcher,
            "kernel-sandbox",
            "run",
            "--policy",
            policy,
            "--connection-file",
            "{connection_file}",
            "--",
            python,
            "-m",
            "ipykernel_launcher",
            "-f",
            "{connection_file}",
        ],
        "display_name": display_name,
        "language": "python",
        "interrupt_mode": "signal",
        "metadata": { "jupyter_mcp_server": { "sandboxed": true } },
    })
}

/// Writes a kernelspec directory `<kernels>/<name>/kernel.json`; returns the directory.
pub fn write(kernels: &Path, name: &str, spec: &Value) -> Result<PathBuf, SandboxError> {
    let dir = kernels.join(name);
    let failed = |e: std::io::Error| SandboxError::Place {
        path: dir.clone(),
        why: e.to_string(),
    };
    std::fs::create_dir_all(&dir).map_err(failed)?;
    let text = serde_json::to_string_pretty(spec).unwrap_or_default();
    std::fs::write(dir.join("kernel.json"), text).map_err(failed)?;
    Ok(dir)
}
