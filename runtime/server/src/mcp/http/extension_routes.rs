//! The extension management routes, which the `extension add|remove|reload|list` subcommands
//! call (`mcp::control`): `GET /api/extensions` lists, `POST /api/extensions` adds (the body is
//! an `[[extension]]` entry as JSON, `path` a file on this machine or an `oci://` reference),
//! `POST /api/extensions/NAME/reload` loads one anew, `DELETE /api/extensions/NAME` unloads one.
//! They need the server's bearer token, as `/api/stop` does (in Hub mode its own `--mcp-token`:
//! a user's Hub token gives no say over the server).

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;
use serde_json::json;

use super::super::ServerState;
use super::Body;
use super::body::json_response;
use crate::config::HttpConfig;

const PREFIX: &str = "/api/extensions";

/// Whether a path is one of these routes.
pub(super) fn handles(path: &str) -> bool {
    path == PREFIX || path.starts_with("/api/extensions/")
}

/// In Hub mode only the operator (the server's own token) manages extensions.
pub(super) fn refuse_hub_users(state: &ServerState, config: &HttpConfig) -> Option<Response<Body>> {
    (state.hub.is_some() && config.mcp_token.is_none()).then(|| {
        json_response(
            StatusCode::FORBIDDEN,
            json!({ "error": "in Hub mode the extension routes need the server's own \
                --mcp-token; start it with one to manage extensions at run time" }),
        )
    })
}

pub(super) async fn serve(
    state: &ServerState,
    request: Request<Incoming>,
    path: &str,
) -> Response<Body> {
    use http::Method;
    use wasm_host::LifecycleError;

    let extensions = &state.extensions;
    let method = request.method().clone();
    let rest = path.strip_prefix(PREFIX).unwrap_or_default();
    let outcome = match (&method, rest.trim_end_matches('/')) {
        (&Method::GET, "") => {
            return json_response(
                StatusCode::OK,
                json!({ "success": true, "extensions": extensions.list() }),
            );
        }
        (&Method::POST, "") => {
            let entry = match entry_of(state, request).await {
                Ok(entry) => entry,
                Err(refusal) => return *refusal,
            };
            extensions.add(entry).await
        }
        (&Method::POST, name) if name.ends_with("/reload") => {
            let name = name.trim_start_matches('/').trim_end_matches("/reload");
            extensions.reload(name).await
        }
        (&Method::DELETE, name) if !name.is_empty() && !name[1..].contains('/') => {
            extensions.remove(&name[1..]).await
        }
        _ => {
            return json_response(
                StatusCode::METHOD_NOT_ALLOWED,
                json!({ "error": format!(
                    "{method} {path} is no extension route: GET or POST {PREFIX}, POST \
                     {PREFIX}/NAME/reload, DELETE {PREFIX}/NAME"
                ) }),
            );
        }
    };
    match outcome {
        Ok(extension) => json_response(
            StatusCode::OK,
            json!({ "success": true, "extension": extension }),
        ),
        Err(e) => json_response(
            match &e {
                e if e.is_unknown() => StatusCode::NOT_FOUND,
                LifecycleError::Loaded { .. } => StatusCode::CONFLICT,
                LifecycleError::Stopping => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::UNPROCESSABLE_ENTITY,
            },
            json!({ "success": false, "error": e.to_string() }),
        ),
    }
}

/// The `[[extension]]` entry a POST carries, checked as the config file's are.
async fn entry_of(
    state: &ServerState,
    request: Request<Incoming>,
) -> Result<crate::config::ExtensionConfig, Box<Response<Body>>> {
    let body = super::body::read_body(request.into_body()).await?;
    let bad = |error: String| {
        Box::new(json_response(
            StatusCode::BAD_REQUEST,
            json!({ "success": false, "error": error }),
        ))
    };
    let entry: crate::config::ExtensionEntry = serde_json::from_slice(&body).map_err(|e| {
        bad(format!(
            "the body is not an [[extension]] entry ({e}); send {{\"path\": \"…\"}} with \
             optionally grants, limits, config, critical"
        ))
    })?;
    // Relative paths mean nothing to a server whose directory the caller does not know.
    let entry = entry.resolve(std::path::Path::new(""), None);
    if !crate::config::is_oci(&entry.path) && !entry.path.is_absolute() {
        return Err(bad(format!(
            "the path {} is relative; give an absolute path (the subcommand makes it so)",
            entry.path.display()
        )));
    }
    if state.hub.is_some() && !entry.grants.is_empty() {
        return Err(Box::new(json_response(
            StatusCode::FORBIDDEN,
            json!({ "success": false, "error": "grants of notebook host functions are not \
                offered in Hub mode: a guest's host functions would not know whose notebooks \
                to use; add it without grants" }),
        )));
    }
    Ok(entry)
}
