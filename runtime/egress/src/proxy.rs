//! The egress proxy a sandboxed kernel is given as `HTTP_PROXY`/`HTTPS_PROXY`: `CONNECT` tunnels
//! (HTTPS, passed through untouched) and absolute-form plain HTTP requests, each to a host the
//! operator listed. Everything else is answered `403` with a reason that names the setting. A
//! host with a credential is served by [`crate::credentials`] instead of tunnelled. The policy
//! is asked for at each connection, so a changed one applies at the next.
//!
//! It is the kernel's only way out: the kernel runs in a network namespace of its own, so a
//! client that ignores the proxy variables reaches nothing at all.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use crate::credentials::{Credential, Secrets, clear_text_refusal, serve_with_credential};
use crate::hosts::{HostRule, default_port, is_internal};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A request head larger than this is refused (no proxy request needs more).
pub(crate) const MAX_HEAD: usize = 64 * 1024;
pub(crate) const MAX_HEADERS: usize = 100;

/// What the proxy lets through.
#[derive(Clone)]
pub struct ProxyPolicy {
    pub hosts: Vec<HostRule>,
    /// Ports never reached on an internal address, whatever `hosts` says: the Jupyter Server's
    /// own (from where a new, unconfined kernel or a terminal is one request away).
    pub never_ports: Vec<u16>,
    /// How refusals name the setting that would allow a host, e.g. `[kernel_sandbox] hosts`.
    pub setting: String,
    /// Hosts whose requests get a header from a secret (each also reachable, as if listed).
    pub credentials: Vec<Credential>,
    pub secrets: Option<Arc<dyn Secrets>>,
    /// TLS toward credentialed hosts; `None` when there are none.
    pub upstream_tls: Option<Arc<rustls::ClientConfig>>,
    /// Who is asked about a host not listed (a person, through the server); `None`: refused.
    pub asker: Option<Arc<dyn Asker>>,
}

/// Asks whether a host that is not listed may be reached: `Ok` with how it was allowed, `Err`
/// with why not (words that follow "and ").
pub trait Asker: Send + Sync + 'static {
    fn ask(
        &self,
        host: &str,
        port: u16,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + '_>>;
}

impl ProxyPolicy {
    /// The credential for `host` on `port`, if any.
    fn credential(&self, host: &str, port: u16) -> Option<&Credential> {
        self.credentials
            .iter()
            .find(|c| c.host == host && c.port == port)
    }
}

/// The policy in force now: asked for at each connection.
pub trait CurrentPolicy: Send + Sync + 'static {
    fn current(&self) -> Arc<ProxyPolicy>;
}

/// A policy that never changes.
pub struct Fixed(pub Arc<ProxyPolicy>);

impl CurrentPolicy for Fixed {
    fn current(&self) -> Arc<ProxyPolicy> {
        self.0.clone()
    }
}

/// Told of every connection the proxy decides on.
pub trait EgressEvents: Send + Sync + 'static {
    fn allowed(&self, host: &str, port: u16);
    fn refused(&self, host: &str, port: u16, why: &str);
}

/// Serves proxy connections on `listener` until the task is dropped.
///
/// One request per connection: a `CONNECT` becomes a byte tunnel, a plain HTTP request is sent
/// on in origin form with `Connection: close` and the rest of the exchange is piped both ways.
/// Written over `httparse` rather than hyper's server and client, whose second instantiation for
/// these types cost the binary 0.4 MB for what is a request line, headers and two pipes.
pub async fn serve(
    listener: TcpListener,
    policy: Arc<dyn CurrentPolicy>,
    events: Arc<dyn EgressEvents>,
) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let policy = policy.current();
        let events = events.clone();
        tokio::spawn(async move {
            let _ = exchange(stream, &policy, &events).await;
        });
    }
}

/// A parsed proxy request: what it asks for, and the head to send on (plain HTTP only).
struct Asked {
    tunnel: bool,
    host: String,
    port: u16,
    scheme: &'static str,
    /// The request rewritten for the origin, then whatever body bytes came with the head.
    forward: Vec<u8>,
}

async fn exchange(
    mut client: TcpStream,
    policy: &ProxyPolicy,
    events: &Arc<dyn EgressEvents>,
) -> std::io::Result<()> {
    let mut buffer = Vec::with_capacity(4096);
    let asked = loop {
        let mut chunk = [0u8; 4096];
        let read = client.read(&mut chunk).await?;
        if read == 0 {
            return Ok(());
        }
        buffer.extend_from_slice(&chunk[..read]);
        match parse(&buffer) {
            Ok(Some(asked)) => break asked,
            Ok(None) if buffer.len() < MAX_HEAD => continue,
            Ok(None) => {
                return reply(
                    &mut client,
                    431,
                    "Request Header Fields Too Large",
                    "the request head is too large",
                )
                .await;
            }
            Err(why) => return reply(&mut client, 400, "Bad proxy request", &why).await,
        }
    };
    let credential = policy.credential(&asked.host, asked.port);
    if !asked.tunnel
        && let Some(credential) = policy
            .credentials
            .iter()
            .find(|c| c.host == asked.host && (c.port == asked.port || asked.port == 80))
    {
        let why = clear_text_refusal(credential);
        events.refused(&asked.host, asked.port, &why);
        return reply(&mut client, 403, "Forbidden by the kernel sandbox", &why).await;
    }
    let listed = credential.is_some()
        || policy
            .hosts
            .iter()
            .any(|rule| rule.matches(asked.scheme, &asked.host, asked.port));
    let mut allowed_now = None;
    if !listed && let Some(asker) = &policy.asker {
        match asker.ask(&asked.host, asked.port).await {
            Ok(_) => {
                allowed_now =
                    HostRule::parse_in("asked", &format!("{}:{}", asked.host, asked.port)).ok();
            }
            Err(why) => {
                let why = format!(
                    "connection to {}:{} refused: it is not in {}, and {why}",
                    asked.host, asked.port, policy.setting
                );
                events.refused(&asked.host, asked.port, &why);
                return reply(&mut client, 403, "Forbidden by the kernel sandbox", &why).await;
            }
        }
    }
    let opened = open(policy, asked.scheme, &asked.host, asked.port, allowed_now).await;
    let mut server = match opened {
        Ok(stream) => stream,
        Err(why) => {
            events.refused(&asked.host, asked.port, &why);
            return reply(&mut client, 403, "Forbidden by the kernel sandbox", &why).await;
        }
    };
    if let (Some(credential), Some(secrets), Some(tls)) =
        (credential, &policy.secrets, &policy.upstream_tls)
    {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
        match serve_with_credential(client, server, credential, secrets.as_ref(), tls.clone()).await
        {
            Ok(()) => events.allowed(&asked.host, asked.port),
            Err(why) => events.refused(&asked.host, asked.port, &why),
        }
        return Ok(());
    }
    events.allowed(&asked.host, asked.port);
    if asked.tunnel {
        client
            .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            .await?;
    } else {
        server.write_all(&asked.forward).await?;
    }
    tokio::io::copy_bidirectional(&mut client, &mut server).await?;
    Ok(())
}

/// `Ok(None)` while the head is incomplete.
fn parse(buffer: &[u8]) -> Result<Option<Asked>, String> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut headers);
    let head_length = match request.parse(buffer) {
        Ok(httparse::Status::Complete(length)) => length,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(error) => return Err(format!("not an HTTP request ({error})")),
    };
    let method = request.method.unwrap_or_default();
    let target = request.path.unwrap_or_default();
    let only = || {
        "the kernel sandbox's proxy takes CONNECT host:port and absolute http:// URLs only"
            .to_owned()
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let (host, port) = split_authority(target).ok_or_else(only)?;
        let port = port.ok_or_else(only)?;
        let scheme = if port == 80 { "http" } else { "https" };
        return Ok(Some(Asked {
            tunnel: true,
            host,
            port,
            scheme,
            forward: Vec::new(),
        }));
    }
    let rest = target
        .strip_prefix("http://")
        .or_else(|| target.strip_prefix("HTTP://"))
        .ok_or_else(only)?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(at) => (&rest[..at], &rest[at..]),
        None => (rest, "/"),
    };
    let path = if path.starts_with('?') {
        format!("/{path}")
    } else {
        path.to_owned()
    };
    let (host, port) = split_authority(authority).ok_or_else(only)?;
    let port = port.unwrap_or(80);
    let mut forward = format!("{method} {path} HTTP/1.1\r\n").into_bytes();
    let mut has_host = false;
    for header in request.headers.iter() {
        let name = header.name.to_ascii_lowercase();
        if matches!(
            name.as_str(),
            "proxy-authorization" | "proxy-connection" | "connection" | "keep-alive"
        ) {
            continue;
        }
        has_host |= name == "host";
        forward.extend_from_slice(header.name.as_bytes());
        forward.extend_from_slice(b": ");
        forward.extend_from_slice(header.value);
        forward.extend_from_slice(b"\r\n");
    }
    if !has_host {
        forward.extend_from_slice(format!("Host: {authority}\r\n").as_bytes());
    }
    forward.extend_from_slice(b"Connection: close\r\n\r\n");
    forward.extend_from_slice(&buffer[head_length..]);
    Ok(Some(Asked {
        tunnel: false,
        host,
        port,
        scheme: "http",
        forward,
    }))
}

/// `host`, `host:port`, `[v6]`, `[v6]:port`, the host lower-cased without brackets.
fn split_authority(text: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port.parse().ok()?)),
            None if after.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port.parse().ok()?)),
            None => (text, None),
        }
    };
    (!host.is_empty() && !host.contains(['@', '/'])).then(|| (host.to_ascii_lowercase(), port))
}

/// A refusal: the reason in the status line too, since for a refused CONNECT it is all a client
/// shows ("Tunnel connection failed: 403 ...").
async fn reply(
    client: &mut TcpStream,
    status: u16,
    reason: &str,
    why: &str,
) -> std::io::Result<()> {
    let phrase: String = format!("{reason}: {why}")
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() || c == ' ' {
                c
            } else {
                ' '
            }
        })
        .collect();
    let body = format!("{why}\n");
    let head = format!(
        "HTTP/1.1 {status} {phrase}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    client.write_all(head.as_bytes()).await?;
    client.write_all(body.as_bytes()).await?;
    client.shutdown().await
}

/// The list, the addresses the host resolves to, then a connection to the first that answers.
async fn open(
    policy: &ProxyPolicy,
    scheme: &str,
    host: &str,
    port: u16,
    allowed_now: Option<HostRule>,
) -> Result<TcpStream, String> {
    let shown = if port == default_port(scheme) {
        host.to_owned()
    } else {
        format!("{host}:{port}")
    };
    let setting = &policy.setting;
    if let Ok(ip) = host.parse::<IpAddr>()
        && is_internal(ip)
        && policy.never_ports.contains(&port)
    {
        return Err(jupyter_port_refusal(host, port));
    }
    let credentialed = policy
        .credential(host, port)
        .and_then(|c| HostRule::parse_in("credentials", &format!("{}:{}", c.host, c.port)).ok());
    let rule = policy
        .hosts
        .iter()
        .find(|rule| rule.matches(scheme, host, port))
        .or(credentialed.as_ref())
        .or(allowed_now.as_ref())
        .ok_or_else(|| {
            format!(
                "connection to {host}:{port} refused: '{shown}' is not in {setting}; the \
                 operator can add \"{shown}\" there (read again at the next connection)"
            )
        })?;
    let resolved: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((host, port))
            .await
            .map_err(|e| format!("connection to {host}:{port}: cannot resolve it ({e})"))?
            .collect(),
    };
    let mut allowed = Vec::new();
    let mut refused = None;
    for address in resolved {
        match check_address(policy, rule, host, address) {
            Ok(()) => allowed.push(address),
            Err(why) => {
                refused.get_or_insert(why);
            }
        }
    }
    if allowed.is_empty() {
        return Err(refused
            .unwrap_or_else(|| format!("connection to {host}:{port}: it resolves to nothing")));
    }
    let mut last = String::new();
    for address in allowed {
        match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(stream)) => {
                let _ = stream.set_nodelay(true);
                return Ok(stream);
            }
            Ok(Err(error)) => last = error.to_string(),
            Err(_) => last = format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
        }
    }
    Err(format!(
        "connection to {host}:{port} allowed, but it failed: {last}"
    ))
}

/// An internal address only when the entry names it literally, and never a protected port there.
fn check_address(
    policy: &ProxyPolicy,
    rule: &HostRule,
    host: &str,
    address: SocketAddr,
) -> Result<(), String> {
    let ip = address.ip();
    if is_internal(ip) && policy.never_ports.contains(&address.port()) {
        return Err(jupyter_port_refusal(host, address.port()));
    }
    if rule.reaches(ip) {
        return Ok(());
    }
    let listed = match ip {
        IpAddr::V4(v4) => format!("{v4}:{}", address.port()),
        IpAddr::V6(v6) => format!("[{v6}]:{}", address.port()),
    };
    Err(format!(
        "connection to {host} refused: it resolves to {ip}, a loopback or private address, which \
         a sandboxed kernel may reach only when {} lists that address itself (add \"{listed}\")",
        policy.setting
    ))
}

fn jupyter_port_refusal(host: &str, port: u16) -> String {
    format!(
        "connection to {host}:{port} refused: that is the Jupyter Server's own port, which a \
         sandboxed kernel may never reach (from there an unconfined kernel or a terminal is one \
         request away)"
    )
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    #[derive(Default)]
    struct Seen(Mutex<Vec<String>>);

    impl EgressEvents for Seen {
        fn allowed(&self, host: &str, port: u16) {
            self.0
                .lock()
                .unwrap()
                .push(format!("allowed {host}:{port}"));
        }
        fn refused(&self, host: &str, port: u16, _why: &str) {
            self.0
                .lock()
                .unwrap()
                .push(format!("refused {host}:{port}"));
        }
    }

    /// A one-shot HTTP server answering `hello`.
    async fn origin() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut buffer = [0u8; 1024];
                let _ = stream.read(&mut buffer).await;
                let _ = stream
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello",
                    )
                    .await;
            }
        });
        port
    }

    async fn proxy(hosts: &[String], never_ports: Vec<u16>) -> (u16, Arc<Seen>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let policy = Arc::new(ProxyPolicy {
            hosts: hosts
                .iter()
                .map(|h| HostRule::parse_in("hosts", h).unwrap())
                .collect(),
            never_ports,
            setting: "[kernel_sandbox] hosts".into(),
            credentials: Vec::new(),
            secrets: None,
            upstream_tls: None,
            asker: None,
        });
        let seen = Arc::new(Seen::default());
        tokio::spawn(serve(listener, Arc::new(Fixed(policy)), seen.clone()));
        (port, seen)
    }

    async fn ask(proxy: u16, request: String) -> String {
        let mut stream = TcpStream::connect(("127.0.0.1", proxy)).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut answer)).await;
        String::from_utf8_lossy(&answer).into_owned()
    }

    #[tokio::test]
    async fn a_listed_host_is_reached_and_others_are_refused_naming_the_setting() {
        let allowed = origin().await;
        let other = origin().await;
        let (port, seen) = proxy(&[format!("127.0.0.1:{allowed}")], vec![]).await;
        let get = |to: u16| {
            format!(
                "GET http://127.0.0.1:{to}/x HTTP/1.1\r\nhost: 127.0.0.1:{to}\r\nconnection: close\r\n\r\n"
            )
        };
        let answer = ask(port, get(allowed)).await;
        assert!(
            answer.starts_with("HTTP/1.1 200") && answer.ends_with("hello"),
            "{answer}"
        );
        let answer = ask(port, get(other)).await;
        assert!(
            answer.starts_with("HTTP/1.1 403 Forbidden by the kernel sandbox"),
            "{answer}"
        );
        assert!(
            answer.contains(&format!(
                "'127.0.0.1:{other}' is not in [kernel_sandbox] hosts"
            )),
            "{answer}"
        );
        let tunnel = ask(port, format!("CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n")).await;
        assert!(tunnel.starts_with("HTTP/1.1 403"), "{tunnel}");
        assert_eq!(
            *seen.0.lock().unwrap(),
            [
                format!("allowed 127.0.0.1:{allowed}"),
                format!("refused 127.0.0.1:{other}"),
                format!("refused 127.0.0.1:{other}")
            ]
        );
    }

    #[tokio::test]
    async fn a_protected_port_is_refused_even_when_listed() {
        let jupyter = origin().await;
        let (port, _) = proxy(&[format!("127.0.0.1:{jupyter}")], vec![jupyter]).await;
        let answer = ask(
            port,
            format!("CONNECT 127.0.0.1:{jupyter} HTTP/1.1\r\n\r\n"),
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 403") && answer.contains("Jupyter Server's own port"),
            "{answer}"
        );
    }

    #[tokio::test]
    async fn a_name_resolving_to_loopback_needs_the_address_itself() {
        let target = origin().await;
        let (port, _) = proxy(&[format!("localhost:{target}")], vec![]).await;
        let answer = ask(
            port,
            format!("GET http://localhost:{target}/ HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n"),
        )
        .await;
        assert!(
            answer.starts_with("HTTP/1.1 403") && answer.contains("loopback or private"),
            "{answer}"
        );
    }
}
