//! Credentials the proxy adds for a confined party that never holds them. For a host with a
//! credential, the proxy answers the party's `CONNECT` itself: it terminates TLS with a
//! certificate for that host (signed by a certificate authority the party trusts), opens its
//! own TLS connection to the real host (verified against this machine's roots), and sends the
//! request on with the credential's header filled from the operator's secret. Any other host's
//! `CONNECT` stays an untouched tunnel; plain HTTP to a credentialed host is refused, so the
//! secret never crosses a network in clear text.
//!
//! A secret's value is read at each request (so a changed secret applies at once) and never
//! reaches an event, an error or a log line: those name the secret, not its value.

use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// One host's credential.
#[derive(Clone)]
pub struct Credential {
    /// The host, lower-case (a name or an address).
    pub host: String,
    pub port: u16,
    /// The secret's name, for messages.
    pub secret: String,
    /// The header to fill, e.g. `Authorization`.
    pub header: String,
    /// The header's value with `{}` where the secret goes, e.g. `Bearer {}`.
    pub format: String,
    /// TLS toward the party: the certificate for `host`.
    pub tls: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for Credential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credential")
            .field("host", &self.host)
            .field("port", &self.port)
            .field("secret", &self.secret)
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

/// Where secrets' values come from; an error names the secret and says what to do.
pub trait Secrets: Send + Sync + 'static {
    fn value(&self, name: &str) -> Result<String, String>;
}

/// TLS toward real hosts: this machine's roots (the system store, `SSL_CERT_FILE`,
/// `SSL_CERT_DIR`).
pub fn upstream_tls() -> Result<Arc<rustls::ClientConfig>, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    for certificate in found.certs {
        let _ = roots.add(certificate);
    }
    if roots.is_empty() {
        return Err(format!(
            "no trusted root certificates found on this machine ({} error(s) reading them); \
             install the ca-certificates package or set SSL_CERT_FILE",
            found.errors.len()
        ));
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// TLS toward the party for one host: its certificate chain and key, PEM.
pub fn party_tls(chain_pem: &[u8], key_pem: &[u8]) -> Result<Arc<rustls::ServerConfig>, String> {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let chain = CertificateDer::pem_slice_iter(chain_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("the certificate: {e}"))?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| format!("the key: {e}"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The refusal for plain HTTP to a credentialed host.
pub fn clear_text_refusal(credential: &Credential) -> String {
    format!(
        "plain HTTP to {} refused: requests to it carry a credential (secret {}), which is sent \
         only over HTTPS; use https://{}",
        credential.host, credential.secret, credential.host
    )
}

/// Serves one `CONNECT` to `credential`'s host, already answered `200`: TLS from the party,
/// TLS to `upstream`, then the first request sent on with the credential and
/// `Connection: close`, and the rest piped both ways. Errors are told to the party over its TLS
/// and returned for the event (never holding the secret's value).
pub async fn serve_with_credential(
    party: TcpStream,
    upstream: TcpStream,
    credential: &Credential,
    secrets: &dyn Secrets,
    upstream_tls: Arc<rustls::ClientConfig>,
) -> Result<(), String> {
    let acceptor = tokio_rustls::TlsAcceptor::from(credential.tls.clone());
    let mut party = acceptor
        .accept(party)
        .await
        .map_err(|e| format!("TLS with the kernel for {}: {e}", credential.host))?;
    let head = match read_head(&mut party).await {
        Ok(Some(head)) => head,
        Ok(None) => return Ok(()),
        Err(why) => return tell(&mut party, 400, &why).await,
    };
    let value = match secrets.value(&credential.secret) {
        Ok(value) => value,
        Err(why) => return tell(&mut party, 502, &why).await,
    };
    let request = match with_credential(&head, &credential.header, &credential.format, &value) {
        Ok(request) => request,
        Err(why) => return tell(&mut party, 400, &why).await,
    };
    drop(value);
    let name = rustls::pki_types::ServerName::try_from(credential.host.clone())
        .map_err(|e| format!("{} is not a TLS server name: {e}", credential.host))?;
    let connector = tokio_rustls::TlsConnector::from(upstream_tls);
    let mut upstream = match connector.connect(name, upstream).await {
        Ok(stream) => stream,
        Err(e) => {
            let why = format!(
                "{} did not prove it is {} (TLS against this machine's roots: {e}); the \
                 credential was not sent",
                credential.host, credential.host
            );
            return tell(&mut party, 502, &why).await;
        }
    };
    upstream
        .write_all(&request)
        .await
        .map_err(|e| e.to_string())?;
    let _ = tokio::io::copy_bidirectional(&mut party, &mut upstream).await;
    Ok(())
}

/// The party's first request head and any body bytes after it; `None` if it closed first.
async fn read_head(stream: &mut (impl AsyncRead + Unpin)) -> Result<Option<Vec<u8>>, String> {
    let mut buffer = Vec::with_capacity(4096);
    loop {
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.map_err(|e| e.to_string())?;
        if read == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..read]);
        let mut headers = [httparse::EMPTY_HEADER; super::proxy::MAX_HEADERS];
        match httparse::Request::new(&mut headers).parse(&buffer) {
            Ok(httparse::Status::Complete(_)) => return Ok(Some(buffer)),
            Ok(httparse::Status::Partial) if buffer.len() < super::proxy::MAX_HEAD => {}
            Ok(httparse::Status::Partial) => return Err("the request head is too large".into()),
            Err(e) => return Err(format!("not an HTTP/1.1 request ({e})")),
        }
    }
}

/// `head` (a complete request head, then body bytes) with `header` set to `format` filled with
/// `value`, any copy the party sent dropped, and `Connection: close`.
fn with_credential(
    head: &[u8],
    header: &str,
    format: &str,
    value: &str,
) -> Result<Vec<u8>, String> {
    let mut headers = [httparse::EMPTY_HEADER; super::proxy::MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let length = match request.parse(head) {
        Ok(httparse::Status::Complete(length)) => length,
        _ => return Err("not a complete HTTP/1.1 request".into()),
    };
    let mut out = format!(
        "{} {} HTTP/1.1\r\n",
        request.method.unwrap_or("GET"),
        request.path.unwrap_or("/")
    )
    .into_bytes();
    for sent in request.headers.iter() {
        let name = sent.name;
        if name.eq_ignore_ascii_case(header)
            || name.eq_ignore_ascii_case("connection")
            || name.eq_ignore_ascii_case("keep-alive")
            || name.eq_ignore_ascii_case("proxy-connection")
        {
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(sent.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(format.replace("{}", value).as_bytes());
    out.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    out.extend_from_slice(&head[length..]);
    Ok(out)
}

async fn tell(party: &mut (impl AsyncWrite + Unpin), status: u16, why: &str) -> Result<(), String> {
    let body = format!("{why}\n");
    let head = format!(
        "HTTP/1.1 {status} Refused by the kernel sandbox\r\ncontent-type: text/plain; \
         charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    let _ = party.write_all(head.as_bytes()).await;
    let _ = party.write_all(body.as_bytes()).await;
    let _ = party.shutdown().await;
    Err(why.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_replaces_any_copy_the_party_sent() {
        let head = b"POST /v1/x HTTP/1.1\r\nHost: api.example.org\r\nauthorization: Bearer forged\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\nhi";
        let out = with_credential(head, "Authorization", "Bearer {}", "s3cret").unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("POST /v1/x HTTP/1.1\r\n"), "{text}");
        assert!(
            !text.contains("forged") && !text.contains("keep-alive"),
            "{text}"
        );
        assert!(
            text.ends_with("Authorization: Bearer s3cret\r\nConnection: close\r\n\r\nhi"),
            "{text}"
        );
    }
}
