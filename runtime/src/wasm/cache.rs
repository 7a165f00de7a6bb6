//! Compiled components on disk, keyed by the component's content and the engine's compatibility,
//! so each component is compiled once per engine build and never on a request path.

use std::hash::Hash;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

/// Feeds `Hash` into SHA-256: `precompile_compatibility_hash` is only `impl Hash`, and std's
/// hashers are not stable across toolchains.
struct ShaHasher(Sha256);

impl std::hash::Hasher for ShaHasher {
    fn finish(&self) -> u64 {
        0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }
}

#[derive(Debug, Clone)]
pub struct CompileCache {
    dir: PathBuf,
}

impl CompileCache {
    pub fn new(dir: PathBuf) -> Self {
        CompileCache { dir }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `$XDG_CACHE_HOME/jupyter-mcp-server/wasm`, else `~/.cache/...`, else the temp dir.
    pub fn default_dir() -> PathBuf {
        let base = std::env::var_os("XDG_CACHE_HOME")
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
            .unwrap_or_else(std::env::temp_dir);
        base.join("jupyter-mcp-server").join("wasm")
    }

    fn key(engine: &Engine, bytes: &[u8]) -> String {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        hasher.0.update(b"\0component\0");
        hasher.0.update(bytes);
        hasher
            .0
            .finalize()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// The component, from the cache when we compiled it before, else compiled and stored.
    /// Cache write failures cost only speed (logged).
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
        let path = self.dir.join(format!("{}.cwasm", Self::key(engine, bytes)));
        if path.is_file() {
            match deserialize_own_artifact(engine, &path) {
                Ok(component) => return Ok(component),
                Err(e) => tracing::warn!(
                    "ignoring the unusable cached component {}: {e}",
                    path.display()
                ),
            }
        }
        let started = std::time::Instant::now();
        let component = Component::from_binary(engine, bytes)?;
        tracing::info!("compiled a component in {:.1?}", started.elapsed());
        if let Err(e) = self.store(&path, &component) {
            tracing::warn!(
                "could not cache the compiled component in {}: {e}; it will be compiled again next start",
                self.dir.display()
            );
        }
        Ok(component)
    }

    fn store(&self, path: &Path, component: &Component) -> Result<(), String> {
        let bytes = component.serialize().map_err(|e| e.to_string())?;
        std::fs::create_dir_all(&self.dir).map_err(|e| e.to_string())?;
        // Written aside and renamed, so a concurrent start never reads half a file.
        let partial = path.with_extension(format!("{}.partial", std::process::id()));
        std::fs::write(&partial, bytes).map_err(|e| e.to_string())?;
        std::fs::rename(&partial, path).map_err(|e| e.to_string())
    }
}

/// Loads an artifact from our cache directory, named by the hash of its source and of this
/// engine's settings.
#[allow(unsafe_code)]
fn deserialize_own_artifact(engine: &Engine, path: &Path) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime does not validate precompiled code. The only files we deserialize are
    // ones this program wrote (named by a hash of the source and engine), in a directory the
    // operator chose for it; a guest's own file is always compiled from its wasm, never loaded
    // as precompiled code.
    unsafe { Component::deserialize_file(engine, path) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_depends_on_content_and_engine() {
        let engine = Engine::default();
        let a = CompileCache::key(&engine, b"a");
        assert_eq!(a, CompileCache::key(&engine, b"a"));
        assert_ne!(a, CompileCache::key(&engine, b"b"));
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let other = Engine::new(&config).unwrap();
        assert_ne!(a, CompileCache::key(&other, b"a"));
    }
}
