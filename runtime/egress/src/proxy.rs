//! The egress proxy a sandboxed kernel is given as `HTTP_PROXY`/`HTTPS_PROXY`: `CONNECT` tunnels
//! (HTTPS, passed through untouched) and absolute-form plain HTTP requests, each to a host the
//! operator listed. Everything else is answered `403` with a reason that names the setting.
//!
//! It is the kernel's only way out: the kernel runs in a network namespace of its own, so a
//! client that ignores the proxy variables reaches nothing at all.

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, Uri, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::ext::ReasonPhrase;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::net::{TcpListener, TcpStream};

use crate::hosts::{HostRule, default_port, is_internal};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// What the proxy lets through.
#[derive(Debug, Clone)]
pub struct ProxyPolicy {
    pub hosts: Vec<HostRule>,
    /// Ports never reached on an internal address, whatever `hosts` says: the Jupyter Server's
    /// own (from where a new, unconfined kernel or a terminal is one request away).
    pub never_ports: Vec<u16>,
    /// How refusals name the setting that would allow a host, e.g. `[kernel_sandbox] hosts`.
    pub setting: String,
}

/// Told of every connection the proxy decides on.
pub trait EgressEvents: Send + Sync + 'static {
    fn allowed(&self, host: &str, port: u16);
    fn refused(&self, host: &str, port: u16, why: &str);
}

type Body = BoxBody<Bytes, hyper::Error>;

/// Serves proxy connections on `listener` until the task is dropped.
pub async fn serve(listener: TcpListener, policy: Arc<ProxyPolicy>, events: Arc<dyn EgressEvents>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let policy = policy.clone();
        let events = events.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let policy = policy.clone();
                let events = events.clone();
                async move { Ok::<_, Infallible>(answer(request, &policy, &events).await) }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades()
                .await;
        });
    }
}

async fn answer(
    request: Request<Incoming>,
    policy: &ProxyPolicy,
    events: &Arc<dyn EgressEvents>,
) -> Response<Body> {
    let tunnel = request.method() == Method::CONNECT;
    let Some((host, port, scheme)) = destination(request.uri(), tunnel) else {
        return refusal(
            StatusCode::BAD_REQUEST,
            "Bad proxy request",
            "the kernel sandbox's proxy takes CONNECT host:port and absolute http:// URLs only"
                .into(),
        );
    };
    let stream = match open(policy, scheme, &host, port).await {
        Ok(stream) => stream,
        Err(why) => {
            events.refused(&host, port, &why);
            return refusal(
                StatusCode::FORBIDDEN,
                "Forbidden by the kernel sandbox",
                why,
            );
        }
    };
    events.allowed(&host, port);
    if tunnel {
        tokio::spawn(async move {
            if let Ok(upgraded) = hyper::upgrade::on(request).await {
                let mut client = TokioIo::new(upgraded);
                let mut server = stream;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
        });
        return Response::new(empty());
    }
    match forward(request, stream, &host, port).await {
        Ok(response) => response.map(|body| body.boxed()),
        Err(error) => refusal(
            StatusCode::BAD_GATEWAY,
            "Bad Gateway",
            format!("the kernel sandbox's proxy reached {host}:{port}, which failed: {error}"),
        ),
    }
}

/// Host, port and scheme of a proxy request: `CONNECT host:port`, or `GET http://host[:port]/…`.
fn destination(uri: &Uri, tunnel: bool) -> Option<(String, u16, &'static str)> {
    let authority = uri.authority()?;
    let host = authority
        .host()
        .trim_matches(['[', ']'])
        .to_ascii_lowercase();
    if tunnel {
        let port = authority.port_u16()?;
        let scheme = if port == 80 { "http" } else { "https" };
        return Some((host, port, scheme));
    }
    (uri.scheme_str()? == "http").then_some(())?;
    Some((host, authority.port_u16().unwrap_or(80), "http"))
}

/// The list, the addresses the host resolves to, then a connection to the first that answers.
async fn open(
    policy: &ProxyPolicy,
    scheme: &str,
    host: &str,
    port: u16,
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
    let rule = policy
        .hosts
        .iter()
        .find(|rule| rule.matches(scheme, host, port))
        .ok_or_else(|| {
            format!(
                "connection to {host}:{port} refused: '{shown}' is not in {setting}; the \
                 operator can add \"{shown}\" there and restart the server"
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
    if !is_internal(ip) {
        return Ok(());
    }
    if policy.never_ports.contains(&address.port()) {
        return Err(jupyter_port_refusal(host, address.port()));
    }
    if rule.literal() == Some(ip) {
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

/// A plain HTTP request, sent on `stream` in origin form without the proxy's own headers.
async fn forward(
    request: Request<Incoming>,
    stream: TcpStream,
    host: &str,
    port: u16,
) -> Result<Response<Incoming>, hyper::Error> {
    let (mut parts, body) = request.into_parts();
    let origin_form = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "/".into());
    parts.uri = origin_form
        .parse()
        .unwrap_or_else(|_| Uri::from_static("/"));
    for hop in ["proxy-authorization", "proxy-connection", "keep-alive"] {
        parts.headers.remove(hop);
    }
    if !parts.headers.contains_key(header::HOST) {
        let value = if port == 80 {
            host.to_owned()
        } else {
            format!("{host}:{port}")
        };
        if let Ok(value) = value.parse() {
            parts.headers.insert(header::HOST, value);
        }
    }
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    sender.send_request(Request::from_parts(parts, body)).await
}

fn empty() -> Body {
    Full::new(Bytes::new())
        .map_err(|never| match never {})
        .boxed()
}

fn refusal(status: StatusCode, reason: &'static str, why: String) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(format!("{why}\n")))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    // The reason phrase carries the why too: for a refused CONNECT it is all a client shows
    // ("Tunnel connection failed: 403 ..."), and many show no body for an HTTP error either.
    let phrase = ReasonPhrase::try_from(format!("{reason}: {why}").into_bytes())
        .unwrap_or_else(|_| ReasonPhrase::from_static(reason.as_bytes()));
    response.extensions_mut().insert(phrase);
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
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
        });
        let seen = Arc::new(Seen::default());
        tokio::spawn(serve(listener, policy, seen.clone()));
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
