//! Guests loaded all at once, off any server: `load_all` waits for every guest (benchmarks and
//! tests), `compile_all` fills the compile cache ahead of a deploy (`extension compile`).

use std::sync::Arc;

use super::loading::log_loaded;
use crate::{CompileCache, HostLink, LoadError, Loaded, WasmHost, read_checked};
use server_core::extensions::WasmConfig;

/// Loads every configured guest, all at once, and keeps them in the configured order. One that
/// fails is logged with its file and reason; the others still load. Compiling can take seconds: call this off the async runtime.
pub fn load_all(config: &WasmConfig, link: Arc<HostLink>) -> Vec<Loaded> {
    if config.extensions.is_empty() {
        return Vec::new();
    }
    let host = match WasmHost::with_link(config.cache_dir.clone(), link) {
        Ok(host) => host,
        Err(e) => {
            tracing::error!("cannot start the WebAssembly runtime, so no guest is loaded: {e}");
            return Vec::new();
        }
    };
    // Compiled side by side (a cold start with two large guests takes the longer one, not the
    // sum); checked and registered in the operator's order.
    let outcomes: Vec<Result<Loaded, LoadError>> = std::thread::scope(|scope| {
        let loads: Vec<_> = config
            .extensions
            .iter()
            .map(|entry| scope.spawn(|| host.load(entry)))
            .collect();
        loads
            .into_iter()
            .zip(&config.extensions)
            .map(|(load, entry)| {
                load.join().unwrap_or_else(|_| {
                    Err(LoadError {
                        path: entry.path.clone(),
                        reason: "loading it failed (a bug in the server: please report it)".into(),
                    })
                })
            })
            .collect()
    });
    let mut loaded: Vec<Loaded> = Vec::new();
    for (entry, outcome) in config.extensions.iter().zip(outcomes) {
        match outcome {
            Ok(guest) => {
                // The name is the source of its capabilities and names it in logs: one each.
                if let Some(name) = guest.manifest.extension.as_ref().map(|e| &e.name)
                    && let Some(other) = loaded.iter().find(|l| {
                        l.manifest
                            .extension
                            .as_ref()
                            .is_some_and(|e| &e.name == name)
                    })
                {
                    tracing::error!(
                        "refused wasm guest {}: extension name '{name}' is taken by {}; the \
                         server goes on without it",
                        entry.path.display(),
                        other.guest.path.display()
                    );
                    guest.guest.stop();
                    continue;
                }
                log_loaded(entry, &guest);
                loaded.push(guest);
            }
            Err(e) => tracing::error!("{e}; the server goes on without it"),
        }
    }
    loaded
}

/// Compiles each guest into the cache (or finds it there) and checks that it links, as a start
/// would, without instantiating it: `extension compile`. One line per guest, in order.
pub fn compile_all(config: &WasmConfig) -> Result<Vec<Result<String, LoadError>>, String> {
    let host = WasmHost::new(config.cache_dir.clone().or_else(CompileCache::default_dir))
        .map_err(|e| format!("cannot start the WebAssembly runtime: {e}"))?;
    Ok(config
        .extensions
        .iter()
        .map(|entry| {
            let started = std::time::Instant::now();
            // Loaded as a start would (with its config and grants), so what it declares is
            // written down too and the next start lists its tools at once.
            let bytes = read_checked(&entry.path).map_err(|reason| LoadError {
                path: entry.path.clone(),
                reason,
            })?;
            let loaded = host.load_checked(entry, &bytes)?;
            loaded.guest.stop();
            host.cache
                .store_manifest(&bytes, &entry.config.to_string(), &loaded.manifest);
            Ok(format!(
                "{} is compiled and cached in {}, with what it declares ({:.1?})",
                entry.path.display(),
                host.cache.location(),
                started.elapsed()
            ))
        })
        .collect())
}
