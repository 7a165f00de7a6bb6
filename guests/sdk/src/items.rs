//! Resources, resource templates and prompts an extension provides, with builders over the WIT
//! records.

use std::collections::BTreeMap;

use crate::bindings::jupyter_mcp::extension::types;

/// The optional texts a listed item has: `title`, `description`, `mime_type`.
macro_rules! optional_texts {
    ($item:ty) => {
        impl $item {
            pub fn title(mut self, title: &str) -> Self {
                self.0.title = Some(title.into());
                self
            }

            pub fn description(mut self, description: &str) -> Self {
                self.0.description = Some(description.into());
                self
            }

            pub fn mime_type(mut self, mime_type: &str) -> Self {
                self.0.mime_type = Some(mime_type.into());
                self
            }
        }
    };
}

optional_texts!(Resource);
optional_texts!(ResourceTemplate);

/// A resource at a fixed URI (listed by `resources/list`).
#[derive(Debug, Clone)]
pub struct Resource(pub(crate) types::ResourceSpec);

impl Resource {
    /// `uri` should use a scheme of the extension's own (e.g. `wordcount://summary`); core
    /// schemes (`notebook://`, `capabilities://`, `ui://`) are refused.
    pub fn new(uri: &str, name: &str) -> Self {
        Resource(types::ResourceSpec {
            uri: uri.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        })
    }
}

/// A family of resources (listed by `resources/templates/list`): `{name}` stands for one path
/// segment, `{+name}` for any text.
#[derive(Debug, Clone)]
pub struct ResourceTemplate(pub(crate) types::ResourceTemplate);

impl ResourceTemplate {
    pub fn new(uri_template: &str, name: &str) -> Self {
        ResourceTemplate(types::ResourceTemplate {
            uri_template: uri_template.into(),
            name: name.into(),
            title: None,
            description: None,
            mime_type: None,
        })
    }
}

/// One item a resource read returns.
#[derive(Debug, Clone)]
pub struct ResourceContents(pub(crate) types::ResourceContents);

impl ResourceContents {
    pub fn text(uri: &str, text: impl Into<String>) -> Self {
        ResourceContents(types::ResourceContents {
            uri: uri.into(),
            mime_type: None,
            body: types::ResourceBody::Text(text.into()),
        })
    }

    /// `value` as JSON text, typed `application/json`.
    pub fn json<T: serde::Serialize>(uri: &str, value: &T) -> crate::Result<Self> {
        let text = serde_json::to_string(value)
            .map_err(|e| crate::Error::failed(format!("the resource cannot be JSON: {e}")))?;
        Ok(Self::text(uri, text).mime_type("application/json"))
    }

    pub fn blob(uri: &str, bytes: Vec<u8>) -> Self {
        ResourceContents(types::ResourceContents {
            uri: uri.into(),
            mime_type: None,
            body: types::ResourceBody::Blob(bytes),
        })
    }

    pub fn mime_type(mut self, mime_type: &str) -> Self {
        self.0.mime_type = Some(mime_type.into());
        self
    }
}

/// A prompt (listed by `prompts/list`).
#[derive(Debug, Clone)]
pub struct Prompt(pub(crate) types::Prompt);

impl Prompt {
    pub fn new(name: &str) -> Self {
        Prompt(types::Prompt {
            name: name.into(),
            title: None,
            description: None,
            arguments: Vec::new(),
        })
    }

    pub fn title(mut self, title: &str) -> Self {
        self.0.title = Some(title.into());
        self
    }

    pub fn description(mut self, description: &str) -> Self {
        self.0.description = Some(description.into());
        self
    }

    /// An argument the client fills in.
    pub fn argument(mut self, name: &str, description: &str, required: bool) -> Self {
        self.0.arguments.push(types::PromptArgument {
            name: name.into(),
            description: Some(description.into()),
            required,
        });
        self
    }
}

/// A prompt's arguments, by name (MCP sends them as strings).
pub type PromptArguments = BTreeMap<String, String>;

pub use types::Role;

/// A rendered prompt.
#[derive(Debug, Clone)]
pub struct PromptResult(pub(crate) types::PromptResult);

impl PromptResult {
    /// A prompt of one user message.
    pub fn user(text: impl Into<String>) -> Self {
        PromptResult(types::PromptResult {
            description: None,
            messages: Vec::new(),
        })
        .message(Role::User, text)
    }

    /// Adds a text message.
    pub fn message(mut self, role: Role, text: impl Into<String>) -> Self {
        self.0.messages.push(types::PromptMessage {
            role,
            content: types::Content::Text(text.into()),
        });
        self
    }

    pub fn description(mut self, description: &str) -> Self {
        self.0.description = Some(description.into());
        self
    }
}
