//! Components from OCI registries, published as wasm OCI artifacts (the layout `wkg` /
//! wasm-pkg-tools push: an image manifest whose one layer is `application/wasm`). Pulled with
//! oci-client; the manifest and the layer are checked against their digests and kept in the
//! cache by digest, so a later start reads them offline. A tag is resolved once: the digest it
//! named is written to the lock file and logged, and later starts use that digest (an
//! `extension reload` resolves it again). A registry on a loopback address is reached over plain
//! HTTP, others over TLS unless listed in `insecure_registries`. Credentials come from the
//! environment or a docker-style config and are never logged.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};

use super::signatures::{FoundSignature, SIGNATURE_ANNOTATION, SIMPLE_SIGNING, Trust};
use server_core::extensions::ExtensionSources;

/// Layer media types of a wasm component artifact: the CNCF wasm artifact layout (wkg), and
/// the older wasm-to-oci one.
const WASM_LAYERS: [&str; 2] = [
    "application/wasm",
    "application/vnd.wasm.content.layer.v1+wasm",
];
/// The largest component pulled (the CPython guests are ~40 MB).
const MAX_COMPONENT_BYTES: i64 = 256 << 20;
/// The largest signature payload read.
const MAX_PAYLOAD_BYTES: i64 = 64 << 10;
/// Environment variables with registry credentials (for every registry).
pub const USERNAME_ENV: &str = "JUPYTER_MCP_REGISTRY_USERNAME";
pub const PASSWORD_ENV: &str = "JUPYTER_MCP_REGISTRY_PASSWORD";

/// A component pulled (or found in the cache) and checked.
pub struct Pulled {
    /// What the operator wrote, `oci://…`.
    pub reference: String,
    /// The manifest digest its bytes are pinned to.
    pub digest: String,
    pub bytes: Vec<u8>,
    /// Where its bytes are kept (the cache).
    pub path: PathBuf,
    /// The trusted key that signed it, when one did.
    pub signed_by: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error(
        "'{reference}' is not an OCI reference ({reason}); write oci://REGISTRY/REPOSITORY:TAG or \
         oci://REGISTRY/REPOSITORY@sha256:DIGEST"
    )]
    BadReference { reference: String, reason: String },
    #[error("{reference}: the registry {registry} answered: {reason}")]
    Registry {
        reference: String,
        registry: String,
        reason: String,
    },
    #[error("{reference}: {reason}")]
    Artifact { reference: String, reason: String },
    #[error("{reference}: refused: {reason}")]
    Signature { reference: String, reason: String },
    #[error(
        "{reference}: there is no cache directory to keep pulled components in; set cache_dir \
         in the config file (or HOME / XDG_CACHE_HOME)"
    )]
    NoCache { reference: String },
    #[error("{reference}: cannot keep it in the cache {dir}: {reason}")]
    Cache {
        reference: String,
        dir: PathBuf,
        reason: String,
    },
}

/// Where pulled components are kept, how registries are reached, and the lock file.
pub struct Registries {
    /// `blobs/` and `manifests/` by digest, and the lock file when there is no config; none
    /// without a cache directory (never a shared temporary one).
    dir: Option<PathBuf>,
    lock_file: Option<PathBuf>,
    insecure: Vec<String>,
}

/// The lock file: the digest each tag resolved to.
#[derive(Default, serde::Serialize, serde::Deserialize)]
struct Lock {
    #[serde(default, rename = "component")]
    components: Vec<Locked>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Locked {
    reference: String,
    digest: String,
}

impl Registries {
    /// `cache_dir`: the compile cache's directory (pulled components go to `oci/` in it; the
    /// per-user default when unset).
    pub fn new(sources: &ExtensionSources, cache_dir: Option<PathBuf>) -> Self {
        let dir = cache_dir
            .or_else(super::cache::CompileCache::default_dir)
            .map(|dir| dir.join("oci"));
        Registries {
            lock_file: sources
                .lock_file
                .clone()
                .or_else(|| dir.as_ref().map(|dir| dir.join("extensions.lock"))),
            dir,
            insecure: sources.insecure_registries.clone(),
        }
    }

    /// The component a reference names, from the cache when its digest is known and there,
    /// else from the registry; its signature checked with `trust`. `resolve`: ask the registry
    /// what a tag names now, even when the lock file knows.
    pub async fn pull(
        &self,
        reference: &str,
        trust: &Trust,
        resolve: bool,
    ) -> Result<Pulled, OciError> {
        let parsed = parse(reference)?;
        let (Some(dir), Some(lock_file)) = (&self.dir, &self.lock_file) else {
            return Err(OciError::NoCache {
                reference: reference.to_owned(),
            });
        };
        let client = self.client(&parsed);
        let auth = credentials(parsed.resolve_registry());
        let registry_error = |e: oci_client::errors::OciDistributionError| OciError::Registry {
            reference: reference.to_owned(),
            registry: parsed.resolve_registry().to_owned(),
            reason: e.to_string(),
        };
        let artifact = |reason: String| OciError::Artifact {
            reference: reference.to_owned(),
            reason,
        };
        let digest = match (parsed.digest(), locked(lock_file, reference)) {
            (Some(digest), _) => digest.to_owned(),
            (None, Some(locked)) if !resolve => locked,
            (None, _) => {
                let digest = client
                    .fetch_manifest_digest(&parsed, &auth)
                    .await
                    .map_err(registry_error)?;
                tracing::info!("{reference} resolved to {digest}");
                lock(lock_file, reference, &digest);
                digest
            }
        };
        let pinned = Reference::with_digest(
            parsed.registry().to_owned(),
            parsed.repository().to_owned(),
            digest.clone(),
        );
        let (bytes, path) = match cached(dir, &digest) {
            Some(found) => found,
            None => {
                let (raw, _) = client
                    .pull_manifest_raw(&pinned, &auth, &[OCI_IMAGE_MEDIA_TYPE])
                    .await
                    .map_err(registry_error)?;
                if sha256(&raw) != digest {
                    return Err(artifact(format!(
                        "the registry's manifest does not match the digest {digest}; it was \
                         refused"
                    )));
                }
                let layer = wasm_layer(&raw).map_err(artifact)?;
                let mut bytes = Vec::with_capacity(layer.size.max(0) as usize);
                client
                    .pull_blob(&pinned, &layer, &mut bytes)
                    .await
                    .map_err(registry_error)?;
                if sha256(&bytes) != layer.digest {
                    return Err(artifact(format!(
                        "the component's bytes do not match their digest {}; they were refused",
                        layer.digest
                    )));
                }
                let path = keep(dir, &digest, &raw, &layer.digest, &bytes).map_err(|e| {
                    OciError::Cache {
                        reference: reference.to_owned(),
                        dir: dir.clone(),
                        reason: e.to_string(),
                    }
                })?;
                tracing::info!(
                    "pulled {reference} ({digest}, {} bytes) into {}",
                    bytes.len(),
                    path.display()
                );
                (bytes, path)
            }
        };
        let signed_by = if trust.active() {
            let found = signatures(&client, &auth, &parsed, &digest)
                .await
                .map_err(registry_error)?;
            trust
                .check_artifact(reference, &digest, &found)
                .map_err(|reason| OciError::Signature {
                    reference: reference.to_owned(),
                    reason,
                })?
        } else {
            None
        };
        Ok(Pulled {
            reference: reference.to_owned(),
            digest,
            bytes,
            path,
            signed_by,
        })
    }

    fn client(&self, reference: &Reference) -> Client {
        let registry = reference.resolve_registry().to_owned();
        let plain = is_loopback(&registry) || self.insecure.contains(&registry);
        Client::new(ClientConfig {
            protocol: if plain {
                ClientProtocol::HttpsExcept(vec![registry])
            } else {
                ClientProtocol::Https
            },
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            ..Default::default()
        })
    }
}

/// The digest the lock file holds for a reference.
fn locked(lock_file: &Path, reference: &str) -> Option<String> {
    let text = std::fs::read_to_string(lock_file).ok()?;
    let lock: Lock = toml::from_str(&text)
        .inspect_err(|e| {
            tracing::warn!(
                "the lock file {} is unreadable ({e}); tags are resolved again",
                lock_file.display()
            )
        })
        .ok()?;
    lock.components
        .into_iter()
        .find(|l| l.reference == reference)
        .map(|l| l.digest)
}

/// Writes down what a tag resolved to (replacing the file whole, so a reader never sees half
/// of it).
fn lock(lock_file: &Path, reference: &str, digest: &str) {
    let mut lock: Lock = std::fs::read_to_string(lock_file)
        .ok()
        .and_then(|text| toml::from_str(&text).ok())
        .unwrap_or_default();
    lock.components.retain(|l| l.reference != reference);
    lock.components.push(Locked {
        reference: reference.to_owned(),
        digest: digest.to_owned(),
    });
    let text = format!(
        "# Written by jupyter-mcp-server: the digest each OCI tag resolved to, used by later \
         starts.\n# Delete an entry (or run `extension reload`) to resolve its tag again.\n{}",
        toml::to_string(&lock).unwrap_or_default()
    );
    let written = lock_file
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            let temporary = lock_file.with_extension("lock.tmp");
            std::fs::write(&temporary, text)?;
            std::fs::rename(&temporary, lock_file)
        });
    match written {
        Ok(()) => tracing::info!(
            "wrote {reference} = {digest} to the lock file {}",
            lock_file.display()
        ),
        Err(e) => tracing::warn!(
            "cannot write the lock file {} ({e}); the next start resolves {reference} again",
            lock_file.display()
        ),
    }
}

fn manifest_path(dir: &Path, digest: &str) -> PathBuf {
    dir.join("manifests").join(file_name(digest, "json"))
}

fn blob_path(dir: &Path, digest: &str) -> PathBuf {
    dir.join("blobs").join(file_name(digest, "wasm"))
}

/// A component in the cache, when its manifest and bytes still match their digests.
fn cached(dir: &Path, digest: &str) -> Option<(Vec<u8>, PathBuf)> {
    let raw = std::fs::read(manifest_path(dir, digest)).ok()?;
    let layer = wasm_layer(&raw).ok()?;
    let path = blob_path(dir, &layer.digest);
    let bytes = std::fs::read(&path).ok()?;
    if sha256(&raw) != digest || sha256(&bytes) != layer.digest {
        tracing::warn!("the cached copy of {digest} was changed on disk; pulling it again");
        return None;
    }
    Some((bytes, path))
}

/// Keeps a checked component: its bytes under their digest, its manifest under its own.
fn keep(
    dir: &Path,
    digest: &str,
    manifest: &[u8],
    layer: &str,
    bytes: &[u8],
) -> std::io::Result<PathBuf> {
    let path = blob_path(dir, layer);
    for (file, content) in [(&path, bytes), (&manifest_path(dir, digest), manifest)] {
        let folder = file.parent().expect("a cache file has a folder");
        std::fs::create_dir_all(folder)?;
        let temporary = file.with_extension("part");
        std::fs::write(&temporary, content)?;
        std::fs::rename(&temporary, file)?;
    }
    Ok(path)
}

/// `oci://REGISTRY/REPO:TAG` (or `@sha256:…`) as oci-client's reference.
fn parse(reference: &str) -> Result<Reference, OciError> {
    let bad = |reason: &str| OciError::BadReference {
        reference: reference.to_owned(),
        reason: reason.to_owned(),
    };
    let rest = reference
        .strip_prefix("oci://")
        .ok_or_else(|| bad("it does not start with oci://"))?;
    // A reference without a registry would silently mean Docker Hub.
    let registry = rest.split('/').next().unwrap_or_default();
    if !rest.contains('/')
        || !(registry.contains('.') || registry.contains(':') || registry == "localhost")
    {
        return Err(bad("it names no registry host"));
    }
    let parsed: Reference = rest.parse().map_err(|e| bad(&format!("{e}")))?;
    if parsed.digest().is_none() && !rest.rsplit('/').next().unwrap_or("").contains(':') {
        return Err(bad("it names neither a tag nor a digest"));
    }
    Ok(parsed)
}

/// The one wasm layer of an image manifest.
fn wasm_layer(raw: &[u8]) -> Result<OciDescriptor, String> {
    let manifest: OciImageManifest = serde_json::from_slice(raw)
        .map_err(|e| format!("its manifest is not an OCI image manifest ({e})"))?;
    let mut layers = manifest
        .layers
        .into_iter()
        .filter(|l| WASM_LAYERS.contains(&l.media_type.as_str()));
    let layer = layers.next().ok_or_else(|| {
        format!(
            "it is no wasm component artifact: no layer of type {} (publish it with `wkg oci \
             push`)",
            WASM_LAYERS[0]
        )
    })?;
    if layers.next().is_some() {
        return Err("it has more than one wasm layer; publish one component per artifact".into());
    }
    if layer.size > MAX_COMPONENT_BYTES {
        return Err(format!(
            "its component is {} bytes, over the limit of {} MiB",
            layer.size,
            MAX_COMPONENT_BYTES >> 20
        ));
    }
    Ok(layer)
}

/// The cosign signatures stored for a manifest digest (`sha256-<hex>.sig`); none when that tag
/// does not exist.
async fn signatures(
    client: &Client,
    auth: &RegistryAuth,
    image: &Reference,
    digest: &str,
) -> Result<Vec<FoundSignature>, oci_client::errors::OciDistributionError> {
    let tag = format!("{}.sig", digest.replacen(':', "-", 1));
    let signature_ref = Reference::with_tag(
        image.registry().to_owned(),
        image.repository().to_owned(),
        tag,
    );
    let raw = match client
        .pull_manifest_raw(&signature_ref, auth, &[OCI_IMAGE_MEDIA_TYPE])
        .await
    {
        Ok((raw, _)) => raw,
        Err(e) if not_found(&e) => return Ok(Vec::new()),
        Err(e) => return Err(e),
    };
    let Ok(manifest) = serde_json::from_slice::<OciImageManifest>(&raw) else {
        return Ok(Vec::new());
    };
    let mut found = Vec::new();
    for layer in manifest.layers {
        let Some(signature) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
            .cloned()
        else {
            continue;
        };
        if layer.media_type != SIMPLE_SIGNING || layer.size > MAX_PAYLOAD_BYTES {
            continue;
        }
        let mut payload = Vec::new();
        client
            .pull_blob(&signature_ref, &layer, &mut payload)
            .await?;
        found.push(FoundSignature { payload, signature });
    }
    Ok(found)
}

fn not_found(error: &oci_client::errors::OciDistributionError) -> bool {
    use oci_client::errors::OciDistributionError as E;
    match error {
        E::ImageManifestNotFoundError(_) => true,
        E::RegistryError { envelope, .. } => envelope
            .errors
            .iter()
            .any(|e| matches!(e.code, oci_client::errors::OciErrorCode::ManifestUnknown)),
        E::ServerError { code, .. } => *code == 404,
        _ => false,
    }
}

/// Credentials for a registry: the environment's, else a docker-style config's
/// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`), else none.
fn credentials(registry: &str) -> RegistryAuth {
    if let (Ok(user), Ok(password)) = (std::env::var(USERNAME_ENV), std::env::var(PASSWORD_ENV)) {
        return RegistryAuth::Basic(user, password);
    }
    let config = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".docker")))
        .map(|dir| dir.join("config.json"));
    let auths: Option<BTreeMap<String, serde_json::Value>> = config
        .and_then(|path| std::fs::read(path).ok())
        .and_then(|bytes| serde_json::from_slice::<serde_json::Value>(&bytes).ok())
        .and_then(|config| serde_json::from_value(config.get("auths")?.clone()).ok());
    let entry = auths.and_then(|auths| {
        auths
            .into_iter()
            .find(|(key, _)| {
                let key = key
                    .trim_start_matches("https://")
                    .trim_start_matches("http://");
                key.split('/').next() == Some(registry)
            })
            .map(|(_, entry)| entry)
    });
    let Some(entry) = entry else {
        return RegistryAuth::Anonymous;
    };
    use base64::Engine as _;
    let decoded = entry["auth"]
        .as_str()
        .and_then(|auth| base64::engine::general_purpose::STANDARD.decode(auth).ok())
        .and_then(|bytes| String::from_utf8(bytes).ok());
    match decoded.as_deref().and_then(|pair| pair.split_once(':')) {
        Some((user, password)) => RegistryAuth::Basic(user.to_owned(), password.to_owned()),
        None => match (entry["username"].as_str(), entry["password"].as_str()) {
            (Some(user), Some(password)) => {
                RegistryAuth::Basic(user.to_owned(), password.to_owned())
            }
            _ => RegistryAuth::Anonymous,
        },
    }
}

/// Whether a registry (`host[:port]`) is on this machine.
fn is_loopback(registry: &str) -> bool {
    let host = match registry.strip_prefix('[') {
        Some(bracketed) => bracketed.split(']').next().unwrap_or_default(),
        None => registry.rsplit_once(':').map_or(registry, |(host, _)| host),
    };
    host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
}

fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", notebook_format::hex::sha256(bytes))
}

/// A cache file name for a digest: `sha256-HEX.EXT` (only the digest's safe characters).
fn file_name(digest: &str, extension: &str) -> String {
    let safe: String = digest
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{safe}.{extension}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_name_a_registry_and_a_tag_or_digest() {
        let ok = parse("oci://127.0.0.1:5000/ext/hello:1.0").unwrap();
        assert_eq!(ok.resolve_registry(), "127.0.0.1:5000");
        assert_eq!(ok.repository(), "ext/hello");
        assert_eq!(ok.tag(), Some("1.0"));
        let digest = format!("sha256:{}", "a".repeat(64));
        let pinned = parse(&format!("oci://registry.example.com/acme/ext@{digest}")).unwrap();
        assert_eq!(pinned.digest(), Some(digest.as_str()));
        for bad in [
            "registry.example.com/acme/ext:1",
            "oci://acme/ext:1",
            "oci://registry.example.com/acme/ext",
            "oci://registry.example.com",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn loopback_registries_are_recognised() {
        for host in [
            "127.0.0.1:5000",
            "localhost:5000",
            "[::1]:5000",
            "127.0.0.2",
        ] {
            assert!(is_loopback(host), "{host}");
        }
        for host in [
            "registry.example.com",
            "10.0.0.1:5000",
            "registry.local:443",
        ] {
            assert!(!is_loopback(host), "{host}");
        }
    }
}
