//! Websockets to a Jupyter Server (kernel channels, collaboration rooms), tuned for latency.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::handshake::client::Response;
use tokio_tungstenite::tungstenite::http::{HeaderValue, StatusCode, header};
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};
use url::Url;

use crate::rest::{JupyterRest, RestError, error_chain};

/// The largest websocket message or frame we take from Jupyter.
pub const MAX_FRAME_BYTES: usize = 128 << 20;

pub type JupyterSocket = WebSocketStream<MaybeTlsStream<QuickAck>>;

/// Why a websocket could not be opened.
#[derive(Debug)]
pub enum DialError {
    /// We offered a subprotocol and the server picked none.
    NoSubprotocol,
    /// The server answered the upgrade with this HTTP status.
    Status(StatusCode),
    /// The upgrade was not answered in time (a gateway answers it once the kernel does).
    HandshakeTimedOut(Duration),
    Other(String),
}

impl From<tungstenite::Error> for DialError {
    fn from(error: tungstenite::Error) -> Self {
        use tungstenite::error::{ProtocolError, SubProtocolError};
        match error {
            tungstenite::Error::Protocol(ProtocolError::SecWebSocketSubProtocolError(
                SubProtocolError::NoSubProtocol,
            )) => DialError::NoSubprotocol,
            tungstenite::Error::Http(response) => DialError::Status(response.status()),
            other => DialError::Other(error_chain(&other)),
        }
    }
}

impl std::fmt::Display for DialError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DialError::NoSubprotocol => write!(f, "the server refused the websocket protocol"),
            DialError::Status(status) => write!(f, "HTTP {status}"),
            DialError::HandshakeTimedOut(after) => write!(
                f,
                "the websocket handshake was not answered within {} s",
                after.as_secs()
            ),
            DialError::Other(reason) => write!(f, "{reason}"),
        }
    }
}

/// Opens a websocket to `rest`'s server with its credentials. Refused (401/403) under a
/// password login, whose session may have expired, it logs in again and tries once more.
pub async fn dial_server(
    rest: &JupyterRest,
    url: &Url,
    subprotocol: Option<&'static str>,
) -> Result<(JupyterSocket, Response), DialError> {
    dial_server_within(rest, url, subprotocol, HANDSHAKE_TIMEOUT).await
}

/// How long a websocket upgrade may take unless the caller says otherwise.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);

/// `dial_server` whose upgrade may take `handshake` (Enterprise Gateway answers a kernel's
/// upgrade only once the kernel answers `kernel_info`: on a cluster, once its pod runs).
pub async fn dial_server_within(
    rest: &JupyterRest,
    url: &Url,
    subprotocol: Option<&'static str>,
    handshake: Duration,
) -> Result<(JupyterSocket, Response), DialError> {
    let login_failed = |e: RestError| DialError::Other(e.to_string());
    let credentials = rest.credentials().await.map_err(login_failed)?;
    match dial(url, &credentials.headers, subprotocol, handshake).await {
        Err(DialError::Status(status))
            if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) =>
        {
            match rest
                .renew_credentials(&credentials)
                .await
                .map_err(login_failed)?
            {
                Some(renewed) => dial(url, &renewed.headers, subprotocol, handshake).await,
                None => Err(DialError::Status(status)),
            }
        }
        other => other,
    }
}

/// Opens a websocket with the given auth headers, TCP_NODELAY and quick ACKs (see [`QuickAck`]).
pub async fn dial(
    url: &Url,
    auth_headers: &[(&'static str, String)],
    subprotocol: Option<&'static str>,
    handshake_timeout: Duration,
) -> Result<(JupyterSocket, Response), DialError> {
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|e| DialError::Other(e.to_string()))?;
    if let Some(protocol) = subprotocol {
        request.headers_mut().insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            HeaderValue::from_static(protocol),
        );
    }
    for (name, value) in auth_headers {
        let value = HeaderValue::from_str(value).map_err(|e| DialError::Other(e.to_string()))?;
        request.headers_mut().insert(*name, value);
    }
    let host = url
        .host_str()
        .ok_or_else(|| DialError::Other("URL has no host".into()))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port_or_known_default().unwrap_or(80);
    let tcp = tokio::time::timeout(Duration::from_secs(10), TcpStream::connect((host, port)))
        .await
        .map_err(|_| DialError::Other(format!("timed out connecting to {host}:{port}")))?
        .map_err(|e| DialError::Other(format!("{host}:{port}: {e}")))?;
    // Jupyter leaves Nagle on for its websockets; see `QuickAck`.
    tcp.set_nodelay(true)
        .map_err(|e| DialError::Other(e.to_string()))?;
    // A kernel flushing a flood of output sends frames of many MiB (tungstenite's default frame
    // cap, 16 MiB, would drop the connection); the cap still bounds what one frame can cost.
    let config = WebSocketConfig::default()
        .max_message_size(Some(MAX_FRAME_BYTES))
        .max_frame_size(Some(MAX_FRAME_BYTES));
    let handshake = tokio_tungstenite::client_async_tls_with_config(
        request,
        QuickAck::new(tcp),
        Some(config),
        None,
    );
    let (ws, response) = tokio::time::timeout(handshake_timeout, handshake)
        .await
        .map_err(|_| DialError::HandshakeTimedOut(handshake_timeout))??;
    Ok((ws, response))
}

/// A TCP stream that acknowledges every read at once.
///
/// One execution makes the server send several small frames; with Nagle on the server (Jupyter
/// never sets `TCP_NODELAY` on kernel sockets) and delayed ACK here, each round trip stalls for
/// ~40 ms. Re-arming `TCP_QUICKACK` after each read (Linux clears it by itself) removes the stall.
pub struct QuickAck {
    inner: TcpStream,
}

impl QuickAck {
    fn new(inner: TcpStream) -> Self {
        let quick = QuickAck { inner };
        quick.rearm();
        quick
    }

    #[cfg(target_os = "linux")]
    fn rearm(&self) {
        let _ = socket2::SockRef::from(&self.inner).set_tcp_quickack(true);
    }

    #[cfg(not(target_os = "linux"))]
    fn rearm(&self) {}
}

impl AsyncRead for QuickAck {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.rearm();
        }
        polled
    }
}

impl AsyncWrite for QuickAck {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
