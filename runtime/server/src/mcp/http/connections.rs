//! One HTTP connection's life: the listening socket (bound, or handed over by a parent), the cap
//! on connections at once, and the limits each connection is served under, HTTP/1.1 or HTTP/2.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder as ConnectionBuilder;
use tokio_util::sync::CancellationToken;

use super::HttpContext;

/// How long request headers may take to arrive (slowloris): per request over HTTP/1.1, and for
/// a connection's first request over either protocol (HTTP/2 has no per-request head timer).
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// HTTP/2 limits: streams at once on one connection, the size of a request's headers, and a
/// ping to find peers that went away without closing.
const H2_MAX_STREAMS: u32 = 128;
const H2_MAX_HEADER_BYTES: u32 = 64 * 1024;
const H2_PING_INTERVAL: Duration = Duration::from_secs(30);
const H2_PING_TIMEOUT: Duration = Duration::from_secs(10);

/// Connections served at once, whatever their protocol: a flood of idle connections past it is
/// answered 503 and closed, so it cannot take every file descriptor the kernels and notebooks
/// need. Below the descriptor limit by a margin kept for them.
pub(super) fn connection_cap() -> usize {
    let limit = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .map_or(1024, |(soft, _)| soft);
    usize::try_from(limit.saturating_sub(256))
        .unwrap_or(usize::MAX)
        .clamp(64, 4096)
}

/// The listening TCP socket a parent handed over as file descriptor `fd`: checked to be one
/// (a listening stream socket), taken over once, and closed on exec so nothing we start inherits
/// it. The one place this crate takes a raw descriptor, hence its `unsafe`.
#[allow(unsafe_code)]
pub(super) fn handed_over(fd: i32) -> std::io::Result<tokio::net::TcpListener> {
    use nix::sys::socket::{getsockopt, sockopt};
    use std::os::fd::{BorrowedFd, FromRawFd as _, OwnedFd};
    let not_a_listener = |why: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("file descriptor {fd} {why}; hand over a bound, listening TCP socket"),
        )
    };
    if fd < 3 {
        return Err(not_a_listener("is stdin, stdout or stderr"));
    }
    // SAFETY: `fd` is only borrowed for the checks; fcntl fails cleanly on a closed descriptor.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    nix::fcntl::fcntl(borrowed, nix::fcntl::FcntlArg::F_GETFD)
        .map_err(|_| not_a_listener("is not open"))?;
    if !getsockopt(&borrowed, sockopt::AcceptConn).map_err(|_| not_a_listener("is not a socket"))? {
        return Err(not_a_listener("is a socket that is not listening"));
    }
    nix::fcntl::fcntl(
        borrowed,
        nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
    )
    .map_err(std::io::Error::from)?;
    // SAFETY: the descriptor is open, a listening socket, and taken over here once, at start;
    // nothing else in this process owns it.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    let listener = std::net::TcpListener::from(owned);
    listener.set_nonblocking(true)?;
    tokio::net::TcpListener::from_std(listener)
}

/// A connection past the cap is told why before it is closed (in HTTP/1.1: an HTTP/2 client
/// sees its connection fail).
pub(super) async fn refuse_at_capacity(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt as _;
    let body = "jupyter-mcp-server: too many connections at once; close idle ones, or retry in a \
                second\n";
    let answer = format!(
        "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Type: text/plain\r\n\
         Connection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(Duration::from_secs(2), async {
        let _ = stream.write_all(answer.as_bytes()).await;
        let _ = stream.shutdown().await;
    })
    .await;
}

/// Serves one accepted connection until it ends, sends no request in time, or `stop` fires.
pub(super) async fn serve_one(
    stream: tokio::net::TcpStream,
    context: Arc<HttpContext>,
    stop: CancellationToken,
) {
    let asked = Arc::new(tokio::sync::Notify::new());
    let first_request = asked.clone();
    let service = hyper::service::service_fn(move |request| {
        let context = context.clone();
        first_request.notify_one();
        async move { Ok::<_, Infallible>(context.route(request).await) }
    });
    let mut builder = ConnectionBuilder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT);
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(H2_MAX_STREAMS)
        .max_header_list_size(H2_MAX_HEADER_BYTES)
        .keep_alive_interval(H2_PING_INTERVAL)
        .keep_alive_timeout(H2_PING_TIMEOUT);
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(stream), service);
    tokio::pin!(connection);
    // A connection whose first request has not arrived within the header timeout is
    // dropped, over HTTP/2 as over HTTP/1.1.
    let first = tokio::time::timeout(HEADER_TIMEOUT, asked.notified());
    tokio::pin!(first);
    let mut waiting_for_first = true;
    loop {
        tokio::select! {
            result = connection.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!("HTTP connection ended: {e}");
                }
                return;
            }
            arrived = first.as_mut(), if waiting_for_first => {
                if arrived.is_err() {
                    tracing::debug!(
                        "HTTP connection closed: no request within {} s",
                        HEADER_TIMEOUT.as_secs()
                    );
                    return;
                }
                waiting_for_first = false;
            }
            _ = stop.cancelled() => break,
        }
    }
    // Let the response in flight (e.g. to DELETE /api/stop) reach the client.
    connection.as_mut().graceful_shutdown();
    let _ = tokio::time::timeout(Duration::from_secs(2), connection.as_mut()).await;
}
