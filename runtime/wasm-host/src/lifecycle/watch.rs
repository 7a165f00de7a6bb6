//! The watched folder (`--extensions-dir`): a component (`*.wasm`) added there is loaded, one
//! replaced is reloaded, one removed is unloaded, through the same [`Extensions`] operations as
//! the management routes. The folder is polled (no inotify: it works the same on every file
//! system, network mounts included); a file is taken only once it has stayed the same size and
//! modification time for one poll, so a copy still being written is not loaded half-way. A
//! file that fails to load is logged and tried again only when it changes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::extensions::Extensions;
use server_core::extensions::ExtensionConfig;

/// How often the folder is looked at.
const POLL: Duration = Duration::from_millis(500);

/// What a file looked like: its size and modification time.
type Stamp = (u64, Option<SystemTime>);

/// What the watcher knows of one file.
struct Seen {
    /// Its stamp at the last poll.
    stamp: Stamp,
    /// The stamp it had when it was last acted on (loaded, reloaded, or refused).
    done: Option<Stamp>,
    /// The extension it became, when it loaded.
    name: Option<String>,
}

/// Watches `dir` until the process ends. The components there at start are loaded at once.
pub fn watch_folder(dir: PathBuf, extensions: Arc<Extensions>) {
    tracing::info!(
        "watching {} for components (.wasm) to load, reload and unload",
        dir.display()
    );
    tokio::spawn(async move {
        let mut seen: BTreeMap<PathBuf, Seen> = BTreeMap::new();
        let mut warned = false;
        loop {
            match scan(&dir).await {
                Ok(now) => {
                    warned = false;
                    settle(&extensions, &mut seen, now).await;
                }
                Err(e) if !warned => {
                    warned = true;
                    tracing::warn!(
                        "cannot read the extensions folder {}: {e}; looking again",
                        dir.display()
                    );
                }
                Err(_) => {}
            }
            tokio::time::sleep(POLL).await;
        }
    });
}

/// The components in the folder now, with their stamps.
async fn scan(dir: &Path) -> std::io::Result<BTreeMap<PathBuf, Stamp>> {
    let dir = dir.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut found = BTreeMap::new();
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_none_or(|e| e != "wasm") {
                continue;
            }
            // A file gone between the listing and here is simply not there.
            if let Ok(meta) = std::fs::metadata(&path)
                && meta.is_file()
            {
                found.insert(path, (meta.len(), meta.modified().ok()));
            }
        }
        Ok(found)
    })
    .await
    .map_err(std::io::Error::other)?
}

/// Acts on what changed since the last poll: files steady for one poll are loaded or reloaded,
/// files gone are unloaded.
async fn settle(
    extensions: &Extensions,
    seen: &mut BTreeMap<PathBuf, Seen>,
    now: BTreeMap<PathBuf, Stamp>,
) {
    let gone: Vec<PathBuf> = seen
        .keys()
        .filter(|path| !now.contains_key(*path))
        .cloned()
        .collect();
    for path in gone {
        if let Some(Seen {
            name: Some(name), ..
        }) = seen.remove(&path)
        {
            // A name another source took over in the meantime is not ours to remove.
            if extensions.loaded_from(&path).as_deref() == Some(name.as_str())
                && let Err(e) = extensions.remove(&name).await
            {
                tracing::warn!("unloading {} failed: {e}", path.display());
            }
        }
    }
    for (path, stamp) in now {
        // New or changed since the last poll: not steady yet.
        let steady = seen.get(&path).is_some_and(|s| s.stamp == stamp);
        let entry = seen.entry(path.clone()).or_insert(Seen {
            stamp,
            done: None,
            name: None,
        });
        entry.stamp = stamp;
        if !steady || entry.done == Some(stamp) {
            continue;
        }
        entry.done = Some(stamp);
        let outcome = match &entry.name {
            Some(name) if extensions.loaded_from(&path).as_deref() == Some(name.as_str()) => {
                extensions.reload(name).await
            }
            _ => {
                extensions
                    .add(ExtensionConfig::with_defaults(path.clone()))
                    .await
            }
        };
        match outcome {
            Ok(summary) => {
                entry.name = summary["name"].as_str().map(str::to_owned);
            }
            Err(e) => tracing::error!(
                "the component {} in the extensions folder was not loaded: {e}; fix or replace \
                 the file",
                path.display()
            ),
        }
    }
}
