//! A guest file checked before anything is compiled: that it is a component, and that it imports
//! nothing this host lacks.

use std::path::Path;

use wasmtime::Engine;

use crate::{API_VERSION, distribution::imports};

/// A guest file's bytes once they are known to be a component importing nothing we lack; the
/// imports are read before anything is compiled, so that refusal takes microseconds, not a
/// minute.
pub(crate) fn read_checked(path: &Path) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))?;
    check_bytes(&bytes)?;
    Ok(bytes)
}

/// [`read_checked`]'s checks of bytes from elsewhere (a registry).
pub(crate) fn check_bytes(bytes: &[u8]) -> Result<(), String> {
    check_header(bytes)?;
    imports::check(bytes, API_VERSION)
}

/// The name a guest goes by until it says its own: its file's.
pub(crate) fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "guest".into())
}

/// Says plainly what a file is when it is not a component.
pub(crate) fn check_header(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        if Engine::detect_precompiled(bytes).is_some() {
            return Err("it is a precompiled artifact; give the .wasm component instead".into());
        }
        return Err("not a WebAssembly file (it does not start with \\0asm)".into());
    }
    // Bytes 6..8 are the layer: 0 for a core module, 1 for a component.
    if bytes[6..8] == [0, 0] {
        return Err(
            "a core WebAssembly module, not a component: build it for wasm32-wasip2 (or wrap it \
             with `wasm-tools component new`)"
                .into(),
        );
    }
    Ok(())
}
