//! Which components may load, by signature: cosign-compatible keyed signatures (ECDSA P-256 over
//! SHA-256, DER-encoded), verified offline against the operator's `trusted_keys`.
//!
//! A component from a registry is signed the way `cosign sign --key` signs an image: a
//! simple-signing payload naming its manifest digest, pushed under the tag `sha256-<hex>.sig`
//! with the signature in the layer's `dev.cosignproject.cosign/signature` annotation
//! (`oci.rs` fetches them). A local file is signed as `cosign sign-blob --key` signs one: the
//! base64 signature in `FILE.sig` beside it.
//!
//! Verified with `ring` (already in the tree under rustls) rather than the sigstore crate: we
//! need one curve and one payload format, offline; sigstore brings TUF, Rekor and Fulcio clients
//! and their crypto stacks for keyless signing we do not do.

use std::path::{Path, PathBuf};

use base64::Engine as _;
use ring::signature::{ECDSA_P256_SHA256_ASN1, UnparsedPublicKey};
use serde_json::Value;

use server_core::extensions::ExtensionSources;

/// The DER prefix of a SubjectPublicKeyInfo holding an uncompressed P-256 point (id-ecPublicKey,
/// prime256v1): what `cosign generate-key-pair` writes, and PEM `PUBLIC KEY` of any P-256 key.
const P256_SPKI_PREFIX: [u8; 26] = [
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

/// The annotation holding a cosign signature (base64 DER) on its payload's layer.
pub const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";
/// The media type of cosign's simple-signing payload layer.
pub const SIMPLE_SIGNING: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
/// The `critical.type` of a cosign image signature payload.
const PAYLOAD_TYPE: &str = "cosign container image signature";

/// The operator's trusted keys and whether unsigned components are refused.
#[derive(Default)]
pub struct Trust {
    keys: Vec<TrustedKey>,
    require: bool,
}

struct TrustedKey {
    /// Its file, which names it in messages.
    path: PathBuf,
    /// The uncompressed point (0x04 ‖ X ‖ Y).
    point: Vec<u8>,
}

/// Why the trusted keys cannot be used: the server refuses to start (or to add a component)
/// rather than load anything unchecked.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error(
        "trusted key {path}: {reason}; give a PEM public key of an ECDSA P-256 key pair (as \
         `cosign generate-key-pair` writes cosign.pub)"
    )]
    BadKey { path: PathBuf, reason: String },
    #[error(
        "require_signatures = true needs trusted_keys: with no key nothing could ever be \
         verified; list the public keys whose signatures you trust"
    )]
    NoKeys,
}

/// A signature found for a component: what was signed and the base64 DER signature.
pub struct FoundSignature {
    pub payload: Vec<u8>,
    pub signature: String,
}

impl Trust {
    /// Reads the keys the sources name.
    pub fn load(sources: &ExtensionSources) -> Result<Trust, TrustError> {
        if sources.require_signatures && sources.trusted_keys.is_empty() {
            return Err(TrustError::NoKeys);
        }
        let keys = sources
            .trusted_keys
            .iter()
            .map(|path| {
                let bad = |reason: String| TrustError::BadKey {
                    path: path.clone(),
                    reason,
                };
                let text = std::fs::read_to_string(path)
                    .map_err(|e| bad(format!("cannot read it: {e}")))?;
                let point = p256_point(&text).map_err(bad)?;
                Ok(TrustedKey {
                    path: path.clone(),
                    point,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Trust {
            keys,
            require: sources.require_signatures,
        })
    }

    /// Whether signatures are looked at at all.
    pub fn active(&self) -> bool {
        !self.keys.is_empty()
    }

    /// The key set, for messages.
    fn key_set(&self) -> String {
        self.keys
            .iter()
            .map(|k| k.path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The trusted key that signed `message` with `signature` (base64 DER), if any.
    fn signer(&self, message: &[u8], signature: &str) -> Option<&TrustedKey> {
        let der = base64::engine::general_purpose::STANDARD
            .decode(signature.trim())
            .ok()?;
        self.keys.iter().find(|key| {
            UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, &key.point)
                .verify(message, &der)
                .is_ok()
        })
    }

    /// What is decided when a component carries no signature at all.
    fn unsigned(&self, component: &str) -> Result<Option<String>, String> {
        if self.require {
            return Err(format!(
                "{component} carries no signature, and require_signatures = true refuses \
                 unsigned components (trusted keys: {}); sign it with one of them (`cosign sign \
                 --key`, or `cosign sign-blob --key` into FILE.sig for a file)",
                self.key_set()
            ));
        }
        tracing::warn!(
            "{component} carries no signature; loading it because require_signatures is off"
        );
        Ok(None)
    }

    /// Checks a local file against `FILE.sig` (`cosign sign-blob` output); `Ok(Some(key))`
    /// names the key that signed it, `Ok(None)`: unsigned and allowed (or no keys are set).
    pub fn check_file(&self, path: &Path, bytes: &[u8]) -> Result<Option<String>, String> {
        if !self.active() {
            return Ok(None);
        }
        let mut sig_path = path.as_os_str().to_owned();
        sig_path.push(".sig");
        let component = path.display().to_string();
        let signature = match std::fs::read_to_string(&sig_path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return self.unsigned(&component);
            }
            Err(e) => return Err(format!("cannot read its signature file: {e}")),
        };
        match self.signer(bytes, &signature) {
            Some(key) => Ok(Some(key.path.display().to_string())),
            None => Err(self.no_trusted_signature(&component)),
        }
    }

    fn no_trusted_signature(&self, component: &str) -> String {
        format!(
            "{component} is signed, but no signature verifies with a trusted key (trusted keys: \
             {}); sign it with one of them, or add the key that signed it to trusted_keys",
            self.key_set()
        )
    }

    /// Checks the cosign signatures found for an artifact of manifest digest `digest`: one must
    /// verify with a trusted key and name that digest in its payload.
    pub fn check_artifact(
        &self,
        component: &str,
        digest: &str,
        found: &[FoundSignature],
    ) -> Result<Option<String>, String> {
        if !self.active() {
            return Ok(None);
        }
        if found.is_empty() {
            return self.unsigned(component);
        }
        for signature in found {
            let Some(key) = self.signer(&signature.payload, &signature.signature) else {
                continue;
            };
            if payload_names(&signature.payload, digest) {
                return Ok(Some(key.path.display().to_string()));
            }
            tracing::warn!(
                "a signature of {component} by {} verifies but is for another digest; ignored",
                key.path.display()
            );
        }
        Err(self.no_trusted_signature(component))
    }
}

/// Whether a simple-signing payload is an image signature for `digest`.
fn payload_names(payload: &[u8], digest: &str) -> bool {
    let Ok(value) = serde_json::from_slice::<Value>(payload) else {
        return false;
    };
    let critical = &value["critical"];
    critical["type"] == PAYLOAD_TYPE && critical["image"]["docker-manifest-digest"] == digest
}

/// The uncompressed point of a PEM P-256 public key.
fn p256_point(pem: &str) -> Result<Vec<u8>, String> {
    let body: String = pem
        .lines()
        .skip_while(|l| !l.starts_with("-----BEGIN PUBLIC KEY-----"))
        .skip(1)
        .take_while(|l| !l.starts_with("-----END"))
        .map(str::trim)
        .collect();
    if body.is_empty() {
        return Err("no PEM block -----BEGIN PUBLIC KEY----- in it".into());
    }
    let der = base64::engine::general_purpose::STANDARD
        .decode(body)
        .map_err(|e| format!("its PEM body is not base64 ({e})"))?;
    match der.strip_prefix(P256_SPKI_PREFIX.as_slice()) {
        Some(point) if point.len() == 65 && point[0] == 4 => Ok(point.to_vec()),
        _ => Err("not an ECDSA P-256 public key".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ring::rand::SystemRandom;
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair};

    fn key_pair() -> EcdsaKeyPair {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
        EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, pkcs8.as_ref(), &rng).unwrap()
    }

    fn pem(pair: &EcdsaKeyPair) -> String {
        let mut der = P256_SPKI_PREFIX.to_vec();
        der.extend_from_slice(pair.public_key().as_ref());
        format!(
            "-----BEGIN PUBLIC KEY-----\n{}\n-----END PUBLIC KEY-----\n",
            base64::engine::general_purpose::STANDARD.encode(der)
        )
    }

    fn sign(pair: &EcdsaKeyPair, message: &[u8]) -> String {
        let signature = pair.sign(&SystemRandom::new(), message).unwrap();
        base64::engine::general_purpose::STANDARD.encode(signature.as_ref())
    }

    fn trust(dir: &Path, pairs: &[&EcdsaKeyPair], require: bool) -> Trust {
        let keys = pairs
            .iter()
            .enumerate()
            .map(|(i, pair)| {
                let path = dir.join(format!("key{i}.pub"));
                std::fs::write(&path, pem(pair)).unwrap();
                path
            })
            .collect();
        Trust::load(&ExtensionSources {
            trusted_keys: keys,
            require_signatures: require,
            ..Default::default()
        })
        .unwrap()
    }

    #[test]
    fn artifact_signatures_verify_with_a_trusted_key_for_their_digest_only() {
        let dir = std::env::temp_dir().join(format!("jmcp-sig-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (ours, theirs) = (key_pair(), key_pair());
        let trust = trust(&dir, &[&ours], true);
        let payload = serde_json::to_vec(&serde_json::json!({"critical": {
            "identity": {"docker-reference": "127.0.0.1:5000/x"},
            "image": {"docker-manifest-digest": "sha256:aa"},
            "type": PAYLOAD_TYPE}, "optional": null}))
        .unwrap();
        let found = |pair: &EcdsaKeyPair| FoundSignature {
            signature: sign(pair, &payload),
            payload: payload.clone(),
        };
        assert!(
            trust
                .check_artifact("x", "sha256:aa", &[found(&ours)])
                .unwrap()
                .is_some()
        );
        let wrong = trust
            .check_artifact("x", "sha256:aa", &[found(&theirs)])
            .unwrap_err();
        assert!(wrong.contains("no signature verifies"), "{wrong}");
        // A valid signature of another digest does not vouch for this one.
        assert!(
            trust
                .check_artifact("x", "sha256:bb", &[found(&ours)])
                .is_err()
        );
        let unsigned = trust.check_artifact("x", "sha256:aa", &[]).unwrap_err();
        assert!(unsigned.contains("carries no signature"), "{unsigned}");
        // Without require_signatures an unsigned one passes, a wrongly signed one does not.
        let lenient = super::tests::trust(&dir, &[&ours], false);
        assert_eq!(lenient.check_artifact("x", "sha256:aa", &[]), Ok(None));
        assert!(
            lenient
                .check_artifact("x", "sha256:aa", &[found(&theirs)])
                .is_err()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn keys_that_are_not_p256_are_refused_and_require_needs_keys() {
        assert!(p256_point("hello").is_err());
        let rsa_like = "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEA\n-----END PUBLIC KEY-----\n";
        assert!(p256_point(rsa_like).is_err());
        let err = Trust::load(&ExtensionSources {
            require_signatures: true,
            ..Default::default()
        })
        .err()
        .unwrap();
        assert!(matches!(err, TrustError::NoKeys));
    }
}
