//! Compiled components on disk, keyed by the component's content and the engine's compatibility,
//! so each component is compiled once per engine build and never on a request path.
//!
//! A compiled artifact is native code that wasmtime loads without checking it, so a file planted
//! in the cache would run as our user. The cache therefore lives only in a directory of our own
//! (never a shared temp dir; refused when another user owns it or may write to it), artifacts are
//! written with exclusive create, no symlink followed, then renamed into place, and each carries an
//! HMAC-SHA256 of its bytes under a per-user key (`key`, 0600, in the cache directory). A file
//! whose tag does not verify is never deserialized: the component is compiled afresh.

use std::hash::Hash;
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use wasmtime::Engine;
use wasmtime::component::Component;

use super::manifest::Manifest;
use server_core::private_file;

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

/// What starts every artifact we write: a format marker, then the 32-byte tag.
const MAGIC: &[u8; 8] = b"JMCPC01\n";
const TAG_LEN: usize = 32;
const KEY_FILE: &str = "key";

/// A directory of ours and the key that authenticates what we wrote into it.
#[derive(Clone)]
struct Disk {
    dir: PathBuf,
    key: [u8; 32],
}

#[derive(Clone)]
pub struct CompileCache {
    /// `None`: compiled code is kept in memory only (no safe directory).
    disk: Option<Disk>,
}

impl std::fmt::Debug for CompileCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CompileCache")
            .field("dir", &self.disk.as_ref().map(|d| &d.dir))
            .finish()
    }
}

impl CompileCache {
    /// The cache in `dir` (default: `default_dir`), or memory only when there is no directory
    /// we can trust; the reason is logged.
    pub fn new(dir: Option<PathBuf>) -> Self {
        let Some(dir) = dir.or_else(Self::default_dir) else {
            tracing::warn!(
                "neither XDG_CACHE_HOME nor HOME is set, so compiled guests are kept in memory \
                 only (set cache_dir in the config file to keep them across starts)"
            );
            return CompileCache { disk: None };
        };
        match open_private_dir(&dir) {
            Ok(key) => CompileCache {
                disk: Some(Disk { dir, key }),
            },
            Err(reason) => {
                tracing::warn!(
                    "not using {} as the compile cache: {reason}; compiled guests are kept in \
                     memory only",
                    dir.display()
                );
                CompileCache { disk: None }
            }
        }
    }

    /// Where compiled guests are kept, for messages: the directory, or that there is none.
    pub fn location(&self) -> String {
        match &self.disk {
            Some(disk) => disk.dir.display().to_string(),
            None => "memory only (no safe cache directory)".into(),
        }
    }

    /// `$XDG_CACHE_HOME/jupyter-mcp-server/wasm`, else `~/.cache/...`; never a shared directory.
    pub fn default_dir() -> Option<PathBuf> {
        server_core::user_dirs::cache().map(|dir| dir.join("wasm"))
    }

    fn key(engine: &Engine, bytes: &[u8]) -> String {
        let mut hasher = ShaHasher(Sha256::new());
        engine.precompile_compatibility_hash().hash(&mut hasher);
        hasher.0.update(b"\0component\0");
        hasher.0.update(bytes);
        notebook_format::hex::lower_hex(&hasher.0.finalize())
    }

    /// The component, from the cache when we compiled it before, else compiled and stored.
    /// Cache write failures cost only speed (logged).
    pub fn load(&self, engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
        let Some(disk) = &self.disk else {
            return compile(engine, bytes);
        };
        let path = disk.dir.join(format!("{}.cwasm", Self::key(engine, bytes)));
        match disk.read_authentic(&path) {
            Ok(Some(artifact)) => match deserialize_authentic(engine, &artifact) {
                Ok(component) => return Ok(component),
                Err(e) => tracing::warn!(
                    "ignoring the unusable cached component {}: {e}",
                    path.display()
                ),
            },
            Ok(None) => {}
            Err(reason) => tracing::warn!(
                "refusing the cached component {}: {reason}; compiling it afresh",
                path.display()
            ),
        }
        let component = compile(engine, bytes)?;
        if let Err(e) = disk.store(&path, &component) {
            tracing::warn!(
                "could not cache the compiled component in {}: {e}; it will be compiled again next start",
                disk.dir.display()
            );
        }
        Ok(component)
    }
}

impl CompileCache {
    /// Where the manifest of a component run with `config` is kept: it depends on both (a
    /// guest's tools may depend on its config), not on the engine.
    fn manifest_path(disk: &Disk, bytes: &[u8], config: &str) -> PathBuf {
        let mut hasher = Sha256::new();
        hasher.update(b"manifest\0");
        hasher.update((bytes.len() as u64).to_le_bytes());
        hasher.update(bytes);
        hasher.update(config.as_bytes());
        let key = notebook_format::hex::lower_hex(&hasher.finalize());
        disk.dir.join(format!("{key}.manifest.json"))
    }

    /// What the component declared when it last loaded with this config, if we wrote that down.
    pub fn manifest(&self, bytes: &[u8], config: &str) -> Option<Manifest> {
        let disk = self.disk.as_ref()?;
        let path = Self::manifest_path(disk, bytes, config);
        match disk.read_authentic(&path) {
            Ok(Some(text)) => serde_json::from_slice(&text)
                .inspect_err(|e| {
                    tracing::warn!("ignoring the unreadable manifest {}: {e}", path.display())
                })
                .ok(),
            Ok(None) => None,
            Err(reason) => {
                tracing::warn!("refusing the manifest {}: {reason}", path.display());
                None
            }
        }
    }

    /// Writes down what the component declared; a failure costs only the next start's speed.
    pub fn store_manifest(&self, bytes: &[u8], config: &str, manifest: &Manifest) {
        let Some(disk) = &self.disk else { return };
        let path = Self::manifest_path(disk, bytes, config);
        let text = serde_json::to_vec(manifest).expect("a manifest serializes");
        if let Err(e) = disk.store_bytes(&path, &text) {
            tracing::warn!(
                "could not cache what a guest declared in {}: {e}",
                disk.dir.display()
            );
        }
    }
}

fn compile(engine: &Engine, bytes: &[u8]) -> wasmtime::Result<Component> {
    let started = std::time::Instant::now();
    let component = Component::from_binary(engine, bytes)?;
    tracing::info!("compiled a component in {:.1?}", started.elapsed());
    Ok(component)
}

impl Disk {
    /// The tag covers the file's name (its cache key) too, so an artifact of ours moved under
    /// another component's key is refused as well.
    fn tag(&self, path: &Path, bytes: &[u8]) -> Hmac<Sha256> {
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.key).expect("any key length works");
        let name = path.file_name().unwrap_or_default().as_encoded_bytes();
        mac.update(&(name.len() as u64).to_le_bytes());
        mac.update(name);
        mac.update(bytes);
        mac
    }

    /// The artifact's bytes if the file exists and we wrote it; `Err` says why it is refused.
    fn read_authentic(&self, path: &Path) -> Result<Option<Vec<u8>>, String> {
        let Some(mut file) = open_existing(path).map_err(|e| format!("cannot open it ({e})"))?
        else {
            return Ok(None);
        };
        let mut contents = Vec::new();
        file.read_to_end(&mut contents)
            .map_err(|e| format!("cannot read it ({e})"))?;
        let Some(rest) = contents.strip_prefix(MAGIC.as_slice()) else {
            return Err("it was not written by this server (no authentication tag)".into());
        };
        if rest.len() < TAG_LEN {
            return Err("it is cut short".into());
        }
        let (tag, artifact) = rest.split_at(TAG_LEN);
        self.tag(path, artifact).verify_slice(tag).map_err(|_| {
            "it was not written by this server (its authentication tag does not match)".to_owned()
        })?;
        Ok(Some(artifact.to_vec()))
    }

    fn store(&self, path: &Path, component: &Component) -> Result<(), String> {
        let bytes = component.serialize().map_err(|e| e.to_string())?;
        self.store_bytes(path, &bytes)
    }

    fn store_bytes(&self, path: &Path, bytes: &[u8]) -> Result<(), String> {
        let tag = self.tag(path, bytes).finalize().into_bytes();
        // Written aside and renamed, so a concurrent start never reads half a file; the aside
        // name is new (exclusive create, no symlink followed), and rename replaces whatever
        // sits at the final name without following it.
        let partial = path.with_extension(format!(
            "{}.{}.partial",
            std::process::id(),
            uuid::Uuid::new_v4().simple()
        ));
        let written = private_file::create(&partial, &[MAGIC.as_slice(), &tag, bytes])
            .and_then(|()| std::fs::rename(&partial, path));
        if let Err(e) = written {
            let _ = std::fs::remove_file(&partial);
            return Err(e.to_string());
        }
        Ok(())
    }
}

/// Creates the cache directory (0700) if needed, checks it is ours alone, and returns the key
/// kept in it (made on first use).
fn open_private_dir(dir: &Path) -> Result<[u8; 32], String> {
    private_file::dir(dir, false)?;
    let uid = nix::unistd::Uid::effective().as_raw();
    let key_path = dir.join(KEY_FILE);
    // Two servers starting at once: one creates the key, the other may find it still empty.
    for _ in 0..50 {
        if let Some(key) = read_key(&key_path, uid)? {
            return Ok(key);
        }
        let mut key = [0u8; 32];
        std::fs::File::open("/dev/urandom")
            .and_then(|mut random| random.read_exact(&mut key))
            .map_err(|e| format!("cannot make a key ({e})"))?;
        match private_file::create(&key_path, &[&key]) {
            Ok(()) => return Ok(key),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            Err(e) => return Err(format!("cannot write its key ({e})")),
        }
    }
    Err(format!("its key {} stays incomplete", key_path.display()))
}

/// A file for reading, never through a symbolic link; `None` when it does not exist.
fn open_existing(path: &Path) -> std::io::Result<Option<std::fs::File>> {
    match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)
    {
        Ok(file) => Ok(Some(file)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The key, `None` when absent (or not yet complete), `Err` when it is not safely ours.
fn read_key(path: &Path, uid: u32) -> Result<Option<[u8; 32]>, String> {
    let Some(mut file) = open_existing(path).map_err(|e| format!("cannot open its key ({e})"))?
    else {
        return Ok(None);
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot inspect its key ({e})"))?;
    if meta.uid() != uid || meta.mode() & 0o077 != 0 {
        return Err(format!(
            "its key {} is not ours alone (owner {}, mode {:o})",
            path.display(),
            meta.uid(),
            meta.mode() & 0o7777
        ));
    }
    let mut key = [0u8; 32];
    let mut read = Vec::new();
    file.read_to_end(&mut read)
        .map_err(|e| format!("cannot read its key ({e})"))?;
    if read.len() != key.len() {
        return Ok(None);
    }
    key.copy_from_slice(&read);
    Ok(Some(key))
}

/// Loads an artifact whose tag we verified.
#[allow(unsafe_code)]
fn deserialize_authentic(engine: &Engine, artifact: &[u8]) -> wasmtime::Result<Component> {
    // SAFETY: wasmtime does not validate precompiled code. These bytes carry a valid HMAC under
    // a key only this user can read, so this program wrote them from a component it compiled;
    // a guest's own file is always compiled from its wasm, never loaded as precompiled code.
    unsafe { Component::deserialize(engine, artifact) }
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

    #[test]
    fn only_authentic_artifacts_are_read() {
        let dir = std::env::temp_dir().join(format!("jmcp-cache-{}", uuid::Uuid::new_v4()));
        let key = open_private_dir(&dir).unwrap();
        assert_eq!(open_private_dir(&dir).unwrap(), key, "the key is kept");
        let disk = Disk {
            dir: dir.clone(),
            key,
        };
        let path = dir.join("x.cwasm");
        let tag = disk.tag(&path, b"code").finalize().into_bytes();
        private_file::create(&path, &[MAGIC.as_slice(), &tag, b"code"]).unwrap();
        assert_eq!(disk.read_authentic(&path).unwrap().unwrap(), b"code");
        let moved = dir.join("y.cwasm");
        std::fs::copy(&path, &moved).unwrap();
        assert!(
            disk.read_authentic(&moved).is_err(),
            "the tag binds the name"
        );
        std::fs::remove_file(&path).unwrap();
        private_file::create(&path, &[MAGIC.as_slice(), &tag, b"evil"]).unwrap();
        assert!(disk.read_authentic(&path).is_err());
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(dir.join(KEY_FILE), &path).unwrap();
        assert!(
            disk.read_authentic(&path).is_err(),
            "symlinks are not followed"
        );
        std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777))
            .unwrap();
        assert!(open_private_dir(&dir).unwrap_err().contains("other users"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
