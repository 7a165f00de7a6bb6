//! `[kernel_sandbox] credentials` on both sides: the server's certificate authority, which
//! signs a certificate for each credentialed host and whose key stays in the server's memory,
//! and, in the launcher, the proxy's view of them (certificates read from the server's hidden
//! directory, values read from the operator's secrets file at each request). The kernel gets
//! only a CA bundle: the machine's roots and the authority's certificate.

use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::SandboxError;

/// One credential as the policy file carries it: no value, only the secret's name and where
/// the host's certificate and key are (in a directory no kernel sees).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PolicyCredential {
    pub host: String,
    pub port: u16,
    pub secret: String,
    pub header: String,
    pub format: String,
    pub certificate: PathBuf,
    pub key: PathBuf,
}

/// The server's certificate authority for credentialed hosts. Its key is never written.
pub struct Authority {
    key: rcgen::KeyPair,
    certificate: rcgen::Certificate,
}

impl Authority {
    pub fn new() -> Result<Self, String> {
        let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params = rcgen::CertificateParams::default();
        let mut name = rcgen::DistinguishedName::new();
        name.push(
            rcgen::DnType::CommonName,
            format!(
                "jupyter-mcp-server kernel sandbox (pid {})",
                std::process::id()
            ),
        );
        params.distinguished_name = name;
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Constrained(0));
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
        ];
        let certificate = params.self_signed(&key).map_err(|e| e.to_string())?;
        Ok(Authority { key, certificate })
    }

    pub fn certificate_pem(&self) -> String {
        self.certificate.pem()
    }

    /// A certificate for `host` (a name or an address) and its key, PEM.
    pub fn issue(&self, host: &str) -> Result<(String, String), String> {
        let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
        let mut params =
            rcgen::CertificateParams::new(vec![host.to_owned()]).map_err(|e| e.to_string())?;
        let mut name = rcgen::DistinguishedName::new();
        name.push(rcgen::DnType::CommonName, host);
        params.distinguished_name = name;
        params.use_authority_key_identifier_extension = true;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let issued = params
            .signed_by(&key, &self.certificate, &self.key)
            .map_err(|e| e.to_string())?;
        Ok((
            format!("{}{}", issued.pem(), self.certificate.pem()),
            key.serialize_pem(),
        ))
    }

    /// Writes `host`'s certificate and key (0600) into `dir`; returns their paths.
    pub fn issue_into(
        &self,
        dir: &Path,
        host: &str,
        port: u16,
    ) -> Result<(PathBuf, PathBuf), String> {
        let (chain, key) = self.issue(host)?;
        let stem = format!("{}-{port}", host.replace([':', '/'], "_"));
        let certificate = dir.join(format!("{stem}.crt"));
        let key_path = dir.join(format!("{stem}.key"));
        private_write(&certificate, chain.as_bytes()).map_err(|e| e.to_string())?;
        private_write(&key_path, key.as_bytes()).map_err(|e| e.to_string())?;
        Ok((certificate, key_path))
    }
}

/// The CA bundle a kernel trusts: the machine's roots, then `authority_pem`. Written where the
/// kernel can read it (it holds no secret).
pub fn write_bundle(path: &Path, authority_pem: &str) -> Result<(), SandboxError> {
    let failed = |e: std::io::Error| SandboxError::Place {
        path: path.to_owned(),
        why: e.to_string(),
    };
    let mut bundle = machine_roots().unwrap_or_default();
    if !bundle.is_empty() && !bundle.ends_with('\n') {
        bundle.push('\n');
    }
    bundle.push_str(authority_pem);
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(failed)?;
    }
    let temporary = path.with_extension("pem.new");
    std::fs::write(&temporary, bundle).map_err(failed)?;
    std::fs::rename(&temporary, path).map_err(failed)
}

/// The machine's root certificates as one PEM file's text: `SSL_CERT_FILE`, else the usual
/// system bundles.
fn machine_roots() -> Option<String> {
    let given = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
    given
        .into_iter()
        .chain(
            [
                "/etc/ssl/certs/ca-certificates.crt",
                "/etc/pki/tls/certs/ca-bundle.crt",
                "/etc/ssl/ca-bundle.pem",
                "/etc/ssl/cert.pem",
            ]
            .map(PathBuf::from),
        )
        .find_map(|path| std::fs::read_to_string(path).ok())
}

fn private_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let _ = std::fs::remove_file(path);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    file.write_all(bytes)
}

/// The operator's secrets file (`secret set`), read anew at each request.
pub struct SecretsFile(pub PathBuf);

#[derive(Deserialize)]
struct SecretsShape {
    #[serde(default)]
    secrets: std::collections::BTreeMap<String, String>,
}

impl egress::credentials::Secrets for SecretsFile {
    fn value(&self, name: &str) -> Result<String, String> {
        let path = &self.0;
        let unset = || {
            format!(
                "the credential's secret {name} is not set; the operator runs \
                 `jupyter-mcp-server secret set {name}`"
            )
        };
        let meta = match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(_) => return Err(unset()),
        };
        if meta.mode() & 0o077 != 0 || meta.uid() != nix::unistd::geteuid().as_raw() {
            return Err(format!(
                "the secrets file {} is readable by others or not this user's; the credential \
                 was not used (chmod 600 it)",
                path.display()
            ));
        }
        let text = std::fs::read_to_string(path).map_err(|_| unset())?;
        let shape: SecretsShape = serde_json::from_str(&text)
            .map_err(|e| format!("the secrets file {} is not valid ({e})", path.display()))?;
        shape.secrets.get(name).cloned().ok_or_else(unset)
    }
}

/// The proxy's credentials from the policy's: each host's TLS read from its files.
pub fn for_proxy(
    credentials: &[PolicyCredential],
) -> Result<Vec<egress::credentials::Credential>, String> {
    credentials
        .iter()
        .map(|c| {
            let chain = std::fs::read(&c.certificate)
                .map_err(|e| format!("{}: {e}", c.certificate.display()))?;
            let key = std::fs::read(&c.key).map_err(|e| format!("{}: {e}", c.key.display()))?;
            let tls = egress::credentials::party_tls(&chain, &key)
                .map_err(|e| format!("the certificate for {}: {e}", c.host))?;
            Ok(egress::credentials::Credential {
                host: c.host.clone(),
                port: c.port,
                secret: c.secret.clone(),
                header: c.header.clone(),
                format: c.format.clone(),
                tls,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn issued_certificates_serve_tls_for_names_and_addresses() {
        let authority = Authority::new().expect("authority");
        for host in ["api.example.org", "127.0.0.1"] {
            let (chain, key) = authority.issue(host).expect("issued");
            assert_eq!(
                chain.matches("BEGIN CERTIFICATE").count(),
                2,
                "leaf, then the authority"
            );
            egress::credentials::party_tls(chain.as_bytes(), key.as_bytes()).expect("usable");
        }
        assert!(!authority.certificate_pem().contains("PRIVATE KEY"));
    }
}
