//! Tools, declared once: name, description and handler; the input schema comes from the
//! handler's argument type.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::bindings::jupyter_mcp::extension::types;
use crate::{Error, Result};

type Handler<E> = Box<dyn Fn(&E, Value) -> Result<ToolResult> + Send + Sync>;

/// A tool of extension `E`.
pub struct Tool<E> {
    pub(crate) spec: types::ToolSpec,
    pub(crate) handler: Handler<E>,
}

/// The arguments of a tool that takes none.
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
pub struct NoArguments {}

impl<E: 'static> Tool<E> {
    /// A tool whose arguments are an `A`, read from the call's JSON object (a mismatch is
    /// answered as invalid arguments without calling `handler`). The input schema is `A`'s
    /// JSON Schema; doc comments on its fields become their descriptions.
    pub fn new<A, R, F>(name: &str, description: &str, handler: F) -> Self
    where
        A: DeserializeOwned + schemars::JsonSchema,
        R: Into<ToolResult>,
        F: Fn(&E, A) -> Result<R> + Send + Sync + 'static,
    {
        let mut schema = schemars::schema_for!(A).to_value();
        if let Value::Object(object) = &mut schema {
            // The server needs an object schema and no meta-schema line.
            object.remove("$schema");
            object.remove("title");
            object.insert("type".into(), "object".into());
            object
                .entry("properties")
                .or_insert_with(|| Value::Object(Default::default()));
        }
        Tool {
            spec: types::ToolSpec {
                name: name.into(),
                description: description.into(),
                input_schema: schema.to_string(),
                output_schema: None,
                annotations: types::ToolAnnotations {
                    title: None,
                    read_only_hint: Some(false),
                    destructive_hint: Some(true),
                    idempotent_hint: None,
                    open_world_hint: Some(false),
                },
                capability: None,
            },
            handler: Box::new(move |extension, arguments| {
                let arguments: A = serde_json::from_value(arguments)?;
                handler(extension, arguments).map(Into::into)
            }),
        }
    }

    /// Tells clients the tool changes nothing.
    pub fn read_only(mut self) -> Self {
        self.spec.annotations.read_only_hint = Some(true);
        self.spec.annotations.destructive_hint = Some(false);
        self
    }

    /// Tells clients that calling it twice with the same arguments does no more than once.
    pub fn idempotent(mut self) -> Self {
        self.spec.annotations.idempotent_hint = Some(true);
        self
    }

    /// A title for people.
    pub fn title(mut self, title: &str) -> Self {
        self.spec.annotations.title = Some(title.into());
        self
    }

    /// Lists and runs the tool only while this capability is on.
    pub fn capability(mut self, name: &str) -> Self {
        self.spec.capability = Some(name.into());
        self
    }

    /// Declares its structured output: `O`'s JSON Schema. Answer with [`ToolResult::json`] of an
    /// `O`; clients check the structured content against it.
    pub fn returns<O: schemars::JsonSchema>(mut self) -> Self {
        let mut schema = schemars::schema_for!(O).to_value();
        if let Value::Object(object) = &mut schema {
            object.remove("$schema");
        }
        self.spec.output_schema = Some(schema.to_string());
        self
    }

    pub fn name(&self) -> &str {
        &self.spec.name
    }
}

/// What a tool answers.
#[derive(Debug, Clone)]
pub struct ToolResult(pub(crate) types::ToolResult);

impl ToolResult {
    pub fn text(text: impl Into<String>) -> Self {
        ToolResult(types::ToolResult {
            content: vec![types::Content::Text(text.into())],
            structured: None,
            is_error: false,
        })
    }

    /// Structured output (an object), also given as text for clients that show only text.
    pub fn json<T: serde::Serialize>(value: &T) -> Result<Self> {
        let value = serde_json::to_value(value)
            .map_err(|e| Error::failed(format!("the answer cannot be JSON: {e}")))?;
        let text = value.to_string();
        Ok(ToolResult(types::ToolResult {
            content: vec![types::Content::Text(text.clone())],
            structured: value.is_object().then_some(text),
            is_error: false,
        }))
    }

    /// The tool ran and failed; `message` should say what to do next.
    pub fn error(message: impl Into<String>) -> Self {
        ToolResult(types::ToolResult {
            content: vec![types::Content::Text(message.into())],
            structured: None,
            is_error: true,
        })
    }

    /// Adds an image (`image/png`, ...).
    pub fn with_image(mut self, data: Vec<u8>, mime_type: &str) -> Self {
        self.0.content.push(types::Content::Image(types::Image {
            data,
            mime_type: mime_type.into(),
        }));
        self
    }

    /// Adds a link to a resource, by URI.
    pub fn with_link(mut self, uri: &str) -> Self {
        self.0
            .content
            .push(types::Content::ResourceLink(uri.into()));
        self
    }
}

impl From<String> for ToolResult {
    fn from(text: String) -> Self {
        ToolResult::text(text)
    }
}

impl From<&str> for ToolResult {
    fn from(text: &str) -> Self {
        ToolResult::text(text)
    }
}
