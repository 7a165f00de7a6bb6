//! An extension's resources, resource templates and prompts in the server's catalog: listed
//! beside the core ones, served by calling the guest (the way a tool is, on the caller's thread
//! without holding up the async runtime, under a tool call's limits).

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use serde_json::{Map, Value, json};
use wasmtime::Store;

use super::answers::{AnswerContent, ResourceAnswer, ResourceBody, Role};
use super::api::Api;
use super::distribution::manifest::{ExtensionManifest, Listing};
use super::guest::CallKind;
use super::host::GuestState;
use super::slot::GuestSlot;
use server_core::catalog::{Catalog, CatalogFuture, Listed, Provider, Refused, ServeError};

/// An extension as the catalog reaches it.
pub struct GuestProvider {
    guest: Arc<GuestSlot>,
    /// How long a read waits for a guest still loading: its limit for a tool call.
    wait: Duration,
    extension: String,
}

impl GuestProvider {
    /// Calls the guest once it is ready, under a tool call's limits.
    async fn ask<R: Send + 'static>(
        &self,
        call: impl FnOnce(&Api, &mut Store<GuestState>) -> wasmtime::Result<R> + Send + 'static,
    ) -> Result<R, ServeError> {
        let guest = self
            .guest
            .wait(self.wait)
            .await
            .map_err(|e| ServeError::Failed(e.to_string()))?;
        guest
            .call(CallKind::Tool, call)
            .await
            .map_err(|e| self.failed(e.to_string()))
    }

    fn failed(&self, message: String) -> ServeError {
        ServeError::Failed(format!("extension '{}' failed: {message}", self.extension))
    }
}

impl Provider for GuestProvider {
    fn owner(&self) -> &str {
        &self.extension
    }

    fn read(&self, uri: String) -> CatalogFuture<'_, Value> {
        Box::pin(async move {
            let asked = uri.clone();
            let answer = self
                .ask(move |api, store| api.read_resource(store, &asked))
                .await?;
            let contents = answer.map_err(|message| ServeError::NotFound {
                message: format!(
                    "extension '{}' did not read '{uri}': {message}",
                    self.extension
                ),
                uri: uri.clone(),
            })?;
            let contents: Vec<Value> = contents.into_iter().map(resource_json).collect();
            Ok(json!({ "contents": contents }))
        })
    }

    fn prompt(&self, name: String, arguments: Map<String, Value>) -> CatalogFuture<'_, Value> {
        Box::pin(async move {
            let arguments = Value::Object(arguments).to_string();
            let answer = self
                .ask(move |api, store| api.get_prompt(store, &name, &arguments))
                .await?;
            let prompt = answer.map_err(|message| {
                ServeError::Refused(format!(
                    "extension '{}' refused the prompt: {message}",
                    self.extension
                ))
            })?;
            let messages: Vec<Value> = prompt
                .messages
                .into_iter()
                .map(|(role, content)| {
                    let role = match role {
                        Role::User => "user",
                        Role::Assistant => "assistant",
                    };
                    json!({ "role": role, "content": content_json(content) })
                })
                .collect();
            let mut result = json!({ "resultType": "complete", "messages": messages });
            if let Some(description) = prompt.description {
                result["description"] = Value::String(description);
            }
            Ok(result)
        })
    }
}

fn resource_json(answer: ResourceAnswer) -> Value {
    let mut item = json!({ "uri": answer.uri });
    match answer.body {
        ResourceBody::Text(text) => item["text"] = Value::String(text),
        ResourceBody::Blob(bytes) => {
            item["blob"] = Value::String(base64::engine::general_purpose::STANDARD.encode(bytes))
        }
    }
    if let Some(mime) = answer.mime_type {
        item["mimeType"] = Value::String(mime);
    }
    item
}

fn content_json(content: AnswerContent) -> Value {
    match content {
        AnswerContent::Text(text) => json!({ "type": "text", "text": text }),
        AnswerContent::Image { data, mime_type } => json!({
            "type": "image",
            "data": base64::engine::general_purpose::STANDARD.encode(data),
            "mimeType": mime_type,
        }),
        AnswerContent::ResourceLink(uri) => {
            json!({ "type": "resource_link", "uri": uri, "name": uri })
        }
    }
}

/// Adds what an extension serves to the catalog, in the order it declared it; an entry whose
/// URI or name is the core's or another extension's is refused and logged, never shadowing.
pub fn register_served(
    catalog: &Catalog,
    extension: &ExtensionManifest,
    slot: &Arc<GuestSlot>,
    wait: Duration,
) {
    let served = &extension.served;
    if served.is_empty() {
        return;
    }
    let provider: Arc<dyn Provider> = Arc::new(GuestProvider {
        guest: slot.clone(),
        wait,
        extension: extension.name.clone(),
    });
    let extension_name = extension.name.as_str();
    for r in &served.resources {
        let item = listed(&r.listing, json!({"uri": r.uri, "mimeType": r.mime_type}));
        add(extension_name, "resource", &r.uri, item, |item| {
            catalog.add_resource(item, provider.clone())
        });
    }
    for t in &served.resource_templates {
        let item = listed(
            &t.listing,
            json!({"uriTemplate": t.uri_template, "mimeType": t.mime_type}),
        );
        add(
            extension_name,
            "resource template",
            &t.uri_template,
            item,
            |item| catalog.add_template(item, provider.clone()),
        );
    }
    for p in &served.prompts {
        let arguments: Vec<Value> = p
            .arguments
            .iter()
            .map(|a| json!({"name": a.name, "description": a.description, "required": a.required}))
            .collect();
        let item = listed(&p.listing, json!({ "arguments": arguments }));
        add(extension_name, "prompt", &p.listing.name, item, |item| {
            catalog.add_prompt(item, provider.clone())
        });
    }
}

/// An item as MCP lists it: what its declaration lists, and the `fields` of its kind.
fn listed(listing: &Listing, fields: Value) -> Listed {
    let Value::Object(mut fields) = fields else {
        return Listed::new();
    };
    let Listing {
        name,
        title,
        description,
    } = listing;
    fields.insert("name".into(), json!(name));
    fields.insert("title".into(), json!(title));
    fields.insert("description".into(), json!(description));
    fields
}

/// Adds one declared entry (as MCP JSON) with `add`, or logs why not.
fn add(
    extension: &str,
    what: &str,
    name: &str,
    item: Listed,
    add: impl FnOnce(Listed) -> Result<(), Refused>,
) {
    if let Err(why) = add(item) {
        tracing::error!(
            extension,
            "refused {what} '{name}' of extension '{extension}': {why}"
        );
    }
}
