//! Request bodies read within bounds, and JSON responses.

use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use serde_json::{Value, json};

use super::Body;

/// How long a request body may take to arrive (slow-body attacks hold a connection otherwise).
const BODY_TIMEOUT: Duration = Duration::from_secs(30);

pub(super) fn json_response(status: StatusCode, body: Value) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())).boxed())
        .expect("valid response")
}

pub(super) fn unauthorized(message: &str) -> Response<Body> {
    let mut response = json_response(StatusCode::UNAUTHORIZED, json!({ "error": message }));
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer realm=\"jupyter-mcp-server\""),
    );
    response
}

/// A request body, refused when over `MAX_REQUEST_BYTES` (413) or slower than `BODY_TIMEOUT`
/// (408); the same limits on every route.
pub(super) async fn read_body(body: Incoming) -> Result<Bytes, Box<Response<Body>>> {
    let refusal = match tokio::time::timeout(BODY_TIMEOUT, collect_within_limit(body)).await {
        Ok(Ok(Some(body))) => return Ok(body),
        Ok(Ok(None)) => json_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            json!({ "error": format!(
                "the request is larger than {} bytes; send less at once",
                crate::mcp::MAX_REQUEST_BYTES
            ) }),
        ),
        Ok(Err(e)) => json_response(
            StatusCode::BAD_REQUEST,
            json!({ "error": format!("cannot read the body: {e}") }),
        ),
        Err(_) => json_response(
            StatusCode::REQUEST_TIMEOUT,
            json!({ "error": format!(
                "the request body did not arrive within {}s",
                BODY_TIMEOUT.as_secs()
            ) }),
        ),
    };
    Err(Box::new(refusal))
}

/// The body, or `None` when it is over the limit. The rest of an oversized body is read and
/// dropped (up to as much again) before we answer: closing on unread data resets the connection,
/// and the client would lose our 413 and see only a broken pipe.
async fn collect_within_limit(mut body: Incoming) -> Result<Option<Bytes>, hyper::Error> {
    let mut collected = Vec::new();
    let mut over = 0usize;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        if over > 0 || collected.len() + data.len() > crate::mcp::MAX_REQUEST_BYTES {
            collected = Vec::new();
            over += data.len();
            if over > crate::mcp::MAX_REQUEST_BYTES {
                break;
            }
            continue;
        }
        collected.extend_from_slice(&data);
    }
    Ok((over == 0).then(|| Bytes::from(collected)))
}
