//! Between the trait and the generated bindings: what the export macros call.

use serde_json::{Map, Value};

use crate::bindings::jupyter_mcp::extension::types;
use crate::hooks::{HookEvent, Reply};
use crate::items::PromptArguments;
use crate::{Capability, Error, Extension, Identity, Tool};

/// A registered extension with its tools, made once per instance.
pub struct Registered<E: Extension> {
    extension: E,
    tools: Vec<Tool<E>>,
}

type GuestResult<T> = Result<T, types::GuestError>;

impl<E: Extension> Registered<E> {
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        let extension = E::new();
        let tools = extension.tools();
        Registered { extension, tools }
    }

    pub fn identity(&self, package: &str, version: &str) -> (String, String) {
        let Identity { name, version } = self
            .extension
            .identity()
            .unwrap_or_else(|| Identity::new(package, version));
        (name, version)
    }

    pub fn capabilities(&self) -> Vec<Capability> {
        self.extension.capabilities()
    }

    pub fn tools(&self) -> Vec<types::ToolSpec> {
        self.tools.iter().map(|t| t.spec.clone()).collect()
    }

    pub fn call_tool(&self, name: &str, arguments: &str) -> GuestResult<types::ToolResult> {
        let Some(tool) = self.tools.iter().find(|t| t.spec.name == name) else {
            return Err(types::GuestError::NotFound(format!(
                "this extension has no tool '{name}'"
            )));
        };
        let arguments: Value = serde_json::from_str(arguments).map_err(Error::from)?;
        Ok((tool.handler)(&self.extension, arguments)?.0)
    }

    pub fn resources(&self) -> Vec<types::ResourceSpec> {
        let list = self.extension.resources();
        list.into_iter().map(|r| r.0).collect()
    }

    pub fn resource_templates(&self) -> Vec<types::ResourceTemplate> {
        let list = self.extension.resource_templates();
        list.into_iter().map(|t| t.0).collect()
    }

    pub fn read_resource(&self, uri: &str) -> GuestResult<Vec<types::ResourceContents>> {
        let contents = self.extension.read_resource(uri)?;
        Ok(contents.into_iter().map(|c| c.0).collect())
    }

    pub fn prompts(&self) -> Vec<types::Prompt> {
        let list = self.extension.prompts();
        list.into_iter().map(|p| p.0).collect()
    }

    pub fn get_prompt(&self, name: &str, arguments: &str) -> GuestResult<types::PromptResult> {
        let object: Map<String, Value> = serde_json::from_str(arguments).map_err(Error::from)?;
        let arguments: PromptArguments = object
            .into_iter()
            .map(|(key, value)| match value {
                Value::String(text) => (key, text),
                other => (key, other.to_string()),
            })
            .collect();
        Ok(self.extension.get_prompt(name, &arguments)?.0)
    }

    pub fn propagate_errors(&self) -> bool {
        self.extension.propagate_errors()
    }

    /// One event; the context comes back only when the handler changed it, and beside it the
    /// reason to ask the person first, if the handler wants that.
    pub fn on_event(&self, event: HookEvent, context: &str) -> GuestResult<types::HookReply> {
        let before: Map<String, Value> = serde_json::from_str(context).unwrap_or_default();
        let mut after = before.clone();
        let reply = self.extension.decide(&event, &mut after)?;
        Ok(types::HookReply {
            context: (after != before).then(|| Value::Object(after).to_string()),
            confirm: match reply {
                Reply::Proceed => None,
                Reply::Confirm(reason) => Some(reason),
            },
        })
    }
}
