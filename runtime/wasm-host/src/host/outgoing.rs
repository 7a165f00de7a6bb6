//! Outgoing HTTP for guests (`wasi:http/outgoing-handler`), under the guest's policy.
//!
//! - **Slice** ([`OutgoingState`]): the `wasi:http` context and its hooks, [`OutgoingHttp`],
//!   which hold the guest's settings and the call's deadline.
//! - **Policy check** ([`check_host`], [`check_address`]): each request is checked against the
//!   current `allowed_hosts` (scheme, host, port); its host is resolved here and every address
//!   checked (loopback and private ones only when listed literally), and the connection goes to
//!   a checked address, so a name cannot be re-resolved elsewhere between check and connect.
//!   Redirects are not followed by the host: a guest's library that follows one sends a new
//!   request, checked like the first. Request and response bodies and the time of an exchange
//!   are capped by the guest's `limits`. A request in flight when its host is revoked is cut.
//! - **Linker registration** ([`link`]): `wasi:http` alone (WASI itself is common to every unit).
//! - **Spans**: one `extension.http` use per request, allowed or refused.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use http_body_util::BodyExt;
use opentelemetry::KeyValue;
use wasmtime::component::{Linker, ResourceTable};
use wasmtime_wasi::WasiCtxBuilder;
use wasmtime_wasi_http::{
    Error, RequestOptions, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

use super::unit::HostUnit;
use crate::policy::{HostRule, Policy, Snapshot, default_port};
use crate::settings::GuestSettings;
use server_core::hooks::{CallScope, GuestUse};

type WasiBody = wasmtime_wasi_http::WasiBody;
type IoFuture = Box<dyn Future<Output = Result<(), Error>> + Send>;
type Sent = Box<dyn Future<Output = Result<(http::Response<WasiBody>, IoFuture), Error>> + Send>;

/// One instance's `wasi:http` context and hooks.
pub struct OutgoingState {
    http: WasiHttpCtx,
    hooks: OutgoingHttp,
}

impl HostUnit for OutgoingState {
    fn new(settings: &Arc<GuestSettings>, _: &Snapshot, _: &mut WasiCtxBuilder) -> Self {
        OutgoingState {
            http: WasiHttpCtx::new(),
            hooks: OutgoingHttp {
                settings: settings.clone(),
                deadline: Instant::now(),
            },
        }
    }

    fn start_call(&mut self, deadline: Instant) {
        self.hooks.deadline = deadline;
    }
}

impl OutgoingState {
    /// What `WasiHttpView` answers, with the store's resource table.
    pub fn view<'a>(&'a mut self, table: &'a mut ResourceTable) -> WasiHttpCtxView<'a> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table,
            hooks: &mut self.hooks,
        }
    }
}

/// Every request goes through [`OutgoingHttp`], which refuses what the policy does not list.
pub fn link<T: WasiHttpView + 'static>(linker: &mut Linker<T>) -> wasmtime::Result<()> {
    wasmtime_wasi_http::p2::add_only_http_to_linker_sync(linker)
}

/// The `wasi:http` hooks of one instance.
pub struct OutgoingHttp {
    settings: Arc<GuestSettings>,
    /// The deadline of the call in progress: no exchange outlives it.
    deadline: Instant,
}

impl WasiHttpHooks for OutgoingHttp {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        _options: Option<RequestOptions>,
        _fut: IoFuture,
    ) -> Sent {
        // Taken on the guest's thread, inside the tool call.
        let exchange = Exchange {
            settings: self.settings.clone(),
            scope: CallScope::current(),
            deadline: self.deadline.min(
                Instant::now() + Duration::from_millis(self.settings.limits.http_ms_per_request),
            ),
            started: SystemTime::now(),
        };
        Box::new(exchange.run(request))
    }
}

/// One request, from check to the end of its response body.
#[derive(Clone)]
struct Exchange {
    settings: Arc<GuestSettings>,
    scope: Option<Arc<CallScope>>,
    deadline: Instant,
    started: SystemTime,
}

/// Where a checked request may connect.
struct Target {
    host: String,
    tls: bool,
    addresses: Vec<SocketAddr>,
}

impl Exchange {
    async fn run(
        self,
        request: http::Request<WasiBody>,
    ) -> Result<(http::Response<WasiBody>, IoFuture), Error> {
        let policy = self.settings.policy.get();
        let guest = self.settings.name().to_owned();
        let uri = request.uri().clone();
        let scheme = uri.scheme_str().unwrap_or("https").to_ascii_lowercase();
        let host = uri.host().unwrap_or_default().to_owned();
        let port = uri.port_u16().unwrap_or_else(|| default_port(&scheme));
        let shown_url = policy.redact_url(&uri.to_string());
        let method = request.method().to_string();
        let record = UseOf {
            exchange: self.clone(),
            guest: guest.clone(),
            method,
            url: shown_url,
        };
        let target = match check(&policy, &guest, &scheme, &host, port).await {
            Ok(target) => target,
            Err(Refusal(why)) => {
                // Under the guest's log budget: a loop of refused requests cannot flood the log.
                if self.settings.log_budget.take().0 {
                    tracing::warn!(guest, "{why}");
                }
                record.done(false, None, 0, Some(&why));
                return Err(Error::InternalError(Some(why)));
            }
        };
        let (parts, body) = request.into_parts();
        let request = http::Request::from_parts(parts, self.capped(body, Direction::Request));
        let mut changes = self.settings.policy.watch();
        let send = connect_and_send(target, request, self.deadline);
        tokio::pin!(send);
        // Sent under the policy as it is; cut if the host is revoked before the answer.
        let outcome = loop {
            tokio::select! {
                outcome = &mut send => break outcome,
                _ = tokio::time::sleep_until(self.deadline.into()) => break Err(Error::ConnectionTimeout),
                changed = changes.changed() => {
                    let now = self.settings.policy.get();
                    let revoked =
                        changed.is_ok() && check_host(&now, &guest, &scheme, &host, port).is_err();
                    if revoked {
                        let why = format!(
                            "HTTP request to {host} cut: the operator revoked host '{host}' of \
                             extension '{guest}' while it was in flight"
                        );
                        tracing::warn!(guest, "{why}");
                        record.done(false, None, 0, Some(&why));
                        return Err(Error::InternalError(Some(why)));
                    }
                    if changed.is_err() {
                        break send.await;
                    }
                }
            }
        };
        match outcome {
            Ok((response, io)) => {
                let status = response.status().as_u16();
                let (parts, body) = response.into_parts();
                let body = self
                    .capped(body, Direction::Response)
                    .on_end(move |received, error| {
                        record.done(true, Some(status), received, error);
                    });
                Ok((http::Response::from_parts(parts, body.boxed_unsync()), io))
            }
            Err(error) => {
                let why = format!("{error:?}");
                record.done(true, None, 0, Some(&why));
                Err(error)
            }
        }
    }

    /// A body of this exchange, cut at its direction's byte limit and at the deadline.
    fn capped<B>(&self, body: B, direction: Direction) -> Capped<B> {
        let limits = &self.settings.limits;
        let limit = match direction {
            Direction::Request => limits.http_request_bytes,
            Direction::Response => limits.http_response_bytes,
        };
        Capped::new(body, limit, direction, self.deadline)
    }
}

/// Why a request to a host is refused, in words naming the setting to change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

/// Whether a request may go to `scheme://host:port` by the list alone (addresses are
/// checked once resolved, by [`check_address`]).
pub fn check_host<'a>(
    policy: &'a Policy,
    guest: &str,
    scheme: &str,
    host: &str,
    port: u16,
) -> Result<&'a HostRule, Refusal> {
    if scheme != "http" && scheme != "https" {
        return Err(Refusal(format!(
            "'{guest}' may send only http and https requests, not {scheme}://{host}"
        )));
    }
    let host = host.to_ascii_lowercase();
    policy
        .hosts
        .iter()
        .find(|rule| rule.matches(scheme, &host, port))
        .ok_or_else(|| {
            let shown = if port == default_port(scheme) {
                host.clone()
            } else {
                format!("{host}:{port}")
            };
            Refusal(format!(
                "HTTP request to {scheme}://{shown} refused: '{shown}' is not in \
                 allowed_hosts of extension '{guest}'; the operator can add it to \
                 allowed_hosts in its [[extension]] entry, or run `jupyter-mcp-server grant \
                 {guest} host:{shown}`"
            ))
        })
}

/// A resolved address: loopback, private, link-local and other non-public addresses only
/// when the matching entry names that very address.
pub fn check_address(
    rule: &HostRule,
    guest: &str,
    host: &str,
    ip: IpAddr,
    port: u16,
) -> Result<(), Refusal> {
    if rule.reaches(ip) {
        return Ok(());
    }
    let listed = match ip {
        IpAddr::V4(v4) => format!("{v4}:{port}"),
        IpAddr::V6(v6) => format!("[{v6}]:{port}"),
    };
    Err(Refusal(format!(
        "HTTP request to {host} refused: it resolves to {ip}, a loopback or private address, \
         which extension '{guest}' may reach only when its allowed_hosts lists that address \
         itself (add \"{listed}\")"
    )))
}

/// The list, then the addresses the host resolves to.
async fn check(
    policy: &Policy,
    guest: &str,
    scheme: &str,
    host: &str,
    port: u16,
) -> Result<Target, Refusal> {
    let rule = check_host(policy, guest, scheme, host, port)?;
    let bare = host.trim_matches(['[', ']']);
    let resolved: Vec<SocketAddr> = match bare.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((bare, port))
            .await
            .map_err(|e| Refusal(format!("HTTP request to {host}: cannot resolve it ({e})")))?
            .collect(),
    };
    let mut addresses = Vec::new();
    let mut first_refusal = None;
    for address in resolved {
        match check_address(rule, guest, host, address.ip(), port) {
            Ok(()) => addresses.push(address),
            Err(refusal) => {
                first_refusal.get_or_insert(refusal);
            }
        }
    }
    if addresses.is_empty() {
        return Err(first_refusal.unwrap_or_else(|| {
            Refusal(format!("HTTP request to {host}: it resolves to no address"))
        }));
    }
    Ok(Target {
        host: bare.to_owned(),
        tls: scheme == "https",
        addresses,
    })
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static> Stream for T {}

/// Connects to a checked address (TLS with the web's roots for https) and sends the request
/// over HTTP/1.1; the connection is driven by a task of its own, bounded by the deadline.
async fn connect_and_send(
    target: Target,
    mut request: http::Request<Capped<WasiBody>>,
    deadline: Instant,
) -> Result<(http::Response<WasiBody>, IoFuture), Error> {
    let tcp = tokio::net::TcpStream::connect(&target.addresses[..])
        .await
        .map_err(Error::Connect)?;
    let _ = tcp.set_nodelay(true);
    let stream: Box<dyn Stream> = if target.tls {
        let roots = rustls::RootCertStore {
            roots: webpki_roots::TLS_SERVER_ROOTS.into(),
        };
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::InternalError(Some(e.to_string())))?
        .with_root_certificates(roots)
        .with_no_client_auth();
        let name = match target.host.parse::<IpAddr>() {
            Ok(ip) => rustls::pki_types::ServerName::from(ip),
            Err(_) => rustls::pki_types::ServerName::try_from(target.host.clone())
                .map_err(|_| Error::HttpRequestUriInvalid)?,
        };
        let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
            .connect(name, tcp)
            .await
            .map_err(Error::Tls)?;
        Box::new(tls)
    } else {
        Box::new(tcp)
    };
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .map_err(Error::from)?;
    let connection = tokio::spawn(async move {
        match tokio::time::timeout_at(deadline.into(), connection).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Error::from(e)),
            Err(_) => Err(Error::HttpResponseTimeout),
        }
    });
    // Only the path goes on the wire; the Host header says who is asked.
    let path = request
        .uri()
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    *request.uri_mut() = path.parse().map_err(|_| Error::HttpRequestUriInvalid)?;
    let response = sender.send_request(request).await.map_err(Error::from)?;
    let io: IoFuture = Box::new(async move { connection.await.unwrap_or(Ok(())) });
    Ok((response.map(|b| b.map_err(Error::from).boxed_unsync()), io))
}

#[derive(Clone, Copy)]
enum Direction {
    Request,
    Response,
}

type OnEnd = Box<dyn FnOnce(u64, Option<&str>) + Send>;

/// A body cut at a byte cap and at the exchange's deadline; at its end (or when dropped) it
/// reports what went through.
struct Capped<B> {
    inner: B,
    limit: u64,
    seen: u64,
    direction: Direction,
    deadline: Pin<Box<tokio::time::Sleep>>,
    on_end: Option<OnEnd>,
    failure: Option<String>,
}

impl<B> Capped<B> {
    fn new(inner: B, limit: u64, direction: Direction, deadline: Instant) -> Self {
        Capped {
            inner,
            limit,
            seen: 0,
            direction,
            deadline: Box::pin(tokio::time::sleep_until(deadline.into())),
            on_end: None,
            failure: None,
        }
    }

    fn on_end(mut self, report: impl FnOnce(u64, Option<&str>) + Send + 'static) -> Self {
        self.on_end = Some(Box::new(report));
        self
    }

    fn end(&mut self) {
        if let Some(report) = self.on_end.take() {
            report(self.seen, self.failure.as_deref());
        }
    }
}

impl<B> Drop for Capped<B> {
    fn drop(&mut self) {
        self.end();
    }
}

impl<B: Body<Data = Bytes, Error = Error> + Unpin> Body for Capped<B> {
    type Data = Bytes;
    type Error = Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Error>>> {
        if self.deadline.as_mut().poll(cx).is_ready() {
            self.failure = Some("the exchange took longer than limits.http_ms_per_request".into());
            self.end();
            return Poll::Ready(Some(Err(match self.direction {
                Direction::Request => Error::ConnectionWriteTimeout,
                Direction::Response => Error::HttpResponseTimeout,
            })));
        }
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    self.seen += data.len() as u64;
                    if self.seen > self.limit {
                        let limit = self.limit;
                        let (setting, error) = match self.direction {
                            Direction::Request => (
                                "limits.http_request_bytes",
                                Error::HttpRequestBodySize(Some(limit)),
                            ),
                            Direction::Response => (
                                "limits.http_response_bytes",
                                Error::HttpResponseBodySize(Some(limit)),
                            ),
                        };
                        self.failure = Some(format!("body over {limit} bytes ({setting})"));
                        self.end();
                        return Poll::Ready(Some(Err(error)));
                    }
                }
            }
            Poll::Ready(None) => self.end(),
            Poll::Ready(Some(Err(e))) => {
                self.failure = Some(format!("{e:?}"));
                self.end();
            }
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// What a span of one exchange says.
struct UseOf {
    exchange: Exchange,
    guest: String,
    method: String,
    url: String,
}

impl UseOf {
    fn done(self, allowed: bool, status: Option<u16>, received: u64, error: Option<&str>) {
        let mut attributes = vec![
            KeyValue::new("extension.name", self.guest),
            KeyValue::new("http.method", self.method),
            KeyValue::new("http.url", self.url),
            KeyValue::new("allowed", allowed),
            KeyValue::new("http.response.body.size", received as i64),
        ];
        if let Some(status) = status {
            attributes.push(KeyValue::new("http.status_code", i64::from(status)));
        }
        if let Some(error) = error {
            attributes.push(KeyValue::new("error", true));
            attributes.push(KeyValue::new("error.message", error.to_owned()));
        }
        GuestUse::ended("extension.http", self.exchange.started, attributes)
            .record(self.exchange.scope.as_ref());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::is_internal;
    use server_core::extensions::policy::PolicyEntry;

    fn policy(hosts: &[&str]) -> Policy {
        let entry = PolicyEntry {
            allowed_hosts: hosts.iter().map(|h| h.to_string()).collect(),
            ..PolicyEntry::empty()
        };
        Policy::check(Vec::new(), entry).unwrap()
    }

    #[test]
    fn hosts_match_by_scheme_name_and_port() {
        let p = policy(&[
            "api.example.org",
            "*.example.com",
            "https://secure.test",
            "127.0.0.1:8123",
        ]);
        assert!(check_host(&p, "g", "https", "api.example.org", 443).is_ok());
        assert!(check_host(&p, "g", "http", "API.example.org", 80).is_ok());
        let refused = check_host(&p, "g", "https", "api.example.org", 8443).unwrap_err();
        assert!(
            refused
                .0
                .contains("'api.example.org:8443' is not in allowed_hosts"),
            "{refused:?}"
        );
        assert!(
            refused.0.contains("grant g host:api.example.org:8443"),
            "{refused:?}"
        );
        assert!(check_host(&p, "g", "https", "a.b.example.com", 443).is_ok());
        assert!(check_host(&p, "g", "https", "example.com", 443).is_err());
        assert!(check_host(&p, "g", "https", "badexample.com", 443).is_err());
        assert!(check_host(&p, "g", "http", "secure.test", 80).is_err());
        assert!(check_host(&p, "g", "http", "127.0.0.1", 8123).is_ok());
        assert!(check_host(&p, "g", "http", "127.0.0.1", 8124).is_err());
        assert!(check_host(&p, "g", "ftp", "api.example.org", 21).is_err());
        assert!(check_host(&policy(&[]), "g", "https", "api.example.org", 443).is_err());
        assert!(HostRule::parse("a.*.org").is_err());
        assert!(HostRule::parse("host/path").is_err());
        assert!(HostRule::parse("ftp://host").is_err());
        assert!(HostRule::parse("[::1]:80").is_ok());
    }

    #[test]
    fn internal_addresses_need_the_address_itself() {
        let named = HostRule::parse("api.example.org").unwrap();
        let literal = HostRule::parse("127.0.0.1:8123").unwrap();
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        assert!(check_address(&named, "g", "api.example.org", loopback, 443).is_err());
        assert!(check_address(&literal, "g", "127.0.0.1", loopback, 8123).is_ok());
        for internal in [
            "10.1.2.3",
            "192.168.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "0.0.0.0",
            // The IPv6 translation ranges, each able to reach an internal IPv4 address.
            "::127.0.0.1",
            "::a00:1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::a00:1",
            "2002:7f00:1::1",
            "2001:0:4136:e378:8000:63bf:3fff:fdd2",
            "fec0::1",
        ] {
            assert!(is_internal(internal.parse().unwrap()), "{internal}");
        }
        for public in [
            "93.184.216.34",
            "2606:2800:220:1::1",
            "2001:db9::1",
            "2a00:1450::1",
        ] {
            assert!(!is_internal(public.parse().unwrap()), "{public}");
        }
    }
}
