//! Dialling a kernel's channels: which websocket protocol the server speaks (v1 binary frames,
//! or the legacy JSON), the session id a socket is opened under, and how a refused dial reads.

use std::time::Duration;

use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::http::{StatusCode, header};

use super::codec::{self, V1_SUBPROTOCOL, WireMessage};
use super::connection::ConnectError;
use crate::rest::JupyterRest;
use crate::websocket::{self, DialError, JupyterSocket};

/// An open websocket and the protocol it speaks.
pub(super) struct Socket {
    pub(super) ws: JupyterSocket,
    pub(super) v1: bool,
}

impl Socket {
    /// The first socket of a connection, and the session id it was opened under: v1 when the
    /// server picks it, else the legacy protocol under a *fresh* session id (the refused
    /// socket was opened on the first one, and a gateway takes a second socket on a session
    /// for a replacement of the first, stalling it for most of a minute).
    pub(super) async fn open(
        rest: &JupyterRest,
        kernel_id: &str,
        within: Duration,
    ) -> Result<(Self, String), ConnectError> {
        let session_id = uuid::Uuid::new_v4().to_string();
        match Self::connect_with(rest, kernel_id, &session_id, true, within).await {
            Err(DialError::NoSubprotocol) => {
                let session_id = uuid::Uuid::new_v4().to_string();
                Self::connect(rest, kernel_id, &session_id, false, within)
                    .await
                    .map(|socket| (socket, session_id))
            }
            other => other
                .map(|socket| (socket, session_id))
                .map_err(|e| e.into_connect_error(kernel_id)),
        }
    }

    pub(super) async fn connect(
        rest: &JupyterRest,
        kernel_id: &str,
        session_id: &str,
        v1: bool,
        within: Duration,
    ) -> Result<Self, ConnectError> {
        Self::connect_with(rest, kernel_id, session_id, v1, within)
            .await
            .map_err(|e| e.into_connect_error(kernel_id))
    }

    async fn connect_with(
        rest: &JupyterRest,
        kernel_id: &str,
        session_id: &str,
        offer_v1: bool,
        within: Duration,
    ) -> Result<Self, DialError> {
        let url = rest
            .kernel_channels_url(kernel_id, session_id)
            .map_err(|e| DialError::Other(e.to_string()))?;
        let subprotocol = offer_v1.then_some(V1_SUBPROTOCOL);
        let (ws, response) = websocket::dial_server_within(rest, &url, subprotocol, within).await?;
        let v1 = response
            .headers()
            .get(header::SEC_WEBSOCKET_PROTOCOL)
            .is_some_and(|p| p.as_bytes() == V1_SUBPROTOCOL.as_bytes());
        Ok(Socket { ws, v1 })
    }

    pub(super) fn encode(&self, message: &WireMessage) -> Message {
        if self.v1 {
            Message::Binary(codec::encode_v1(message).into())
        } else {
            Message::Text(codec::encode_json(message).into())
        }
    }

    pub(super) fn decode(&self, frame: Message) -> Result<Option<WireMessage>, codec::CodecError> {
        match frame {
            Message::Binary(bytes) if self.v1 => codec::decode_v1(&bytes).map(Some),
            Message::Binary(bytes) => codec::decode_json_binary(&bytes).map(Some),
            Message::Text(text) => codec::decode_json_text(&text).map(Some),
            _ => Ok(None),
        }
    }
}

impl DialError {
    fn into_connect_error(self, kernel_id: &str) -> ConnectError {
        match self {
            DialError::Status(StatusCode::NOT_FOUND) => {
                ConnectError::NotFound(kernel_id.to_owned())
            }
            DialError::Status(StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED) => {
                ConnectError::Forbidden(kernel_id.to_owned())
            }
            DialError::Status(status) => ConnectError::Failed {
                kernel_id: kernel_id.to_owned(),
                reason: format!("HTTP {status}"),
            },
            DialError::HandshakeTimedOut(after) => ConnectError::NotAnswering {
                kernel_id: kernel_id.to_owned(),
                seconds: after.as_secs(),
            },
            DialError::NoSubprotocol => ConnectError::Failed {
                kernel_id: kernel_id.to_owned(),
                reason: "the server refused both websocket protocols".into(),
            },
            DialError::Other(reason) => ConnectError::Failed {
                kernel_id: kernel_id.to_owned(),
                reason,
            },
        }
    }
}
