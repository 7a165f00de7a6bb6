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
        return Err(format!(
            "connection to {host}:{} refused: that is the Jupyter Server's own port, which a \
             sandboxed kernel may never reach",
            address.port()
        ));
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
    response
        .extensions_mut()
        .insert(ReasonPhrase::from_static(reason.as_bytes()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}
