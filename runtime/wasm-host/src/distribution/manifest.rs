//! What a guest declared when it last loaded (its name, whether it handles hooks and asks to be
//! critical, its capabilities, tools, resources and prompts), kept beside its compiled code so a
//! later start lists its tools and capabilities before the guest is ready.
//!
//! Keyed by the component's bytes and its config (its tools may depend on the config), and
//! authenticated like compiled code, so a planted file cannot add tools to a guest.

use serde::{Deserialize, Serialize};

use server_core::capabilities::Declaration;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Set when it exports `hooks`: whether it asked to be critical (`propagate-errors`).
    pub hooks: Option<bool>,
    /// Set when it exports `extension-api`.
    pub extension: Option<ExtensionManifest>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExtensionManifest {
    pub name: String,
    /// Its capability declarations, or why they failed.
    pub capabilities: Result<Vec<CapabilityDeclaration>, String>,
    pub tools: Vec<ToolDeclaration>,
    /// Flattened: its lists stand beside the fields above in the JSON, as they always have.
    #[serde(flatten)]
    pub served: Served,
}

/// What an extension serves besides tools (WIT 0.2.0 on; none for a 0.1.0 guest). Each list
/// defaults to empty, which keeps a manifest written before they existed readable.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Served {
    pub resources: Vec<ResourceDeclaration>,
    pub resource_templates: Vec<TemplateDeclaration>,
    pub prompts: Vec<PromptDeclaration>,
}

impl Served {
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty() && self.resource_templates.is_empty() && self.prompts.is_empty()
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilityDeclaration {
    pub name: String,
    pub description: String,
    pub enabled: bool,
}

/// A tool as a guest declares it, whatever WIT version it was built against.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolDeclaration {
    pub name: String,
    pub description: String,
    /// JSON text, checked when the tool is registered.
    pub input_schema: String,
    pub read_only: bool,
    pub capability: Option<String>,
    /// JSON text of the schema its structured output follows (WIT 0.2.0 on).
    pub output_schema: Option<String>,
}

/// What MCP lists about a resource, a resource template or a prompt besides its address.
/// Flattened into each, so the JSON keeps its fields beside the address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
}

/// A resource an extension serves at a fixed URI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceDeclaration {
    pub uri: String,
    #[serde(flatten)]
    pub listing: Listing,
    pub mime_type: Option<String>,
}

/// A family of resources an extension serves: an RFC 6570 URI template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateDeclaration {
    pub uri_template: String,
    #[serde(flatten)]
    pub listing: Listing,
    pub mime_type: Option<String>,
}

/// A prompt an extension renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptDeclaration {
    #[serde(flatten)]
    pub listing: Listing,
    pub arguments: Vec<PromptArgumentDeclaration>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptArgumentDeclaration {
    pub name: String,
    pub description: Option<String>,
    pub required: bool,
}

impl ExtensionManifest {
    /// Its declarations as the capability registry takes them.
    pub fn declarations(&self) -> (String, Result<Vec<Declaration>, String>) {
        let declarations = self
            .capabilities
            .as_ref()
            .map_err(Clone::clone)
            .map(|list| {
                list.iter()
                    .map(|c| Declaration {
                        name: c.name.clone(),
                        description: c.description.clone(),
                        enabled: c.enabled,
                    })
                    .collect()
            });
        (self.name.clone(), declarations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listing(name: &str, title: Option<&str>, description: Option<&str>) -> Listing {
        Listing {
            name: name.into(),
            title: title.map(Into::into),
            description: description.map(Into::into),
        }
    }

    /// A manifest declaring one of everything.
    fn full() -> Manifest {
        Manifest {
            hooks: Some(true),
            extension: Some(ExtensionManifest {
                name: "demo".into(),
                capabilities: Ok(vec![CapabilityDeclaration {
                    name: "demo.x".into(),
                    description: "X".into(),
                    enabled: false,
                }]),
                tools: vec![ToolDeclaration {
                    name: "t".into(),
                    description: "T".into(),
                    input_schema: "{}".into(),
                    read_only: true,
                    capability: None,
                    output_schema: Some("{}".into()),
                }],
                served: Served {
                    resources: vec![ResourceDeclaration {
                        uri: "demo://r".into(),
                        listing: listing("r", Some("R"), None),
                        mime_type: Some("text/plain".into()),
                    }],
                    resource_templates: vec![TemplateDeclaration {
                        uri_template: "demo://{x}".into(),
                        listing: listing("x", None, Some("by x")),
                        mime_type: None,
                    }],
                    prompts: vec![PromptDeclaration {
                        listing: listing("p", None, Some("P")),
                        arguments: vec![PromptArgumentDeclaration {
                            name: "a".into(),
                            description: None,
                            required: true,
                        }],
                    }],
                },
            }),
        }
    }

    /// The JSON manifests are cached as: a change of shape would make every cached one unreadable.
    const FULL_JSON: &str = concat!(
        r#"{"hooks":true,"extension":{"name":"demo","#,
        r#""capabilities":{"Ok":[{"name":"demo.x","description":"X","enabled":false}]},"#,
        r#""tools":[{"name":"t","description":"T","input_schema":"{}","read_only":true,"#,
        r#""capability":null,"output_schema":"{}"}],"#,
        r#""resources":[{"uri":"demo://r","name":"r","title":"R","description":null,"#,
        r#""mime_type":"text/plain"}],"#,
        r#""resource_templates":[{"uri_template":"demo://{x}","name":"x","title":null,"#,
        r#""description":"by x","mime_type":null}],"#,
        r#""prompts":[{"name":"p","title":null,"description":"P","#,
        r#""arguments":[{"name":"a","description":null,"required":true}]}]}}"#,
    );

    #[test]
    fn a_manifest_is_cached_as_the_same_json_and_read_back() {
        assert_eq!(serde_json::to_string(&full()).unwrap(), FULL_JSON);
        let read: Manifest = serde_json::from_str(FULL_JSON).unwrap();
        assert_eq!(read, full());
    }

    #[test]
    fn a_manifest_written_before_resources_and_prompts_still_reads() {
        let old =
            r#"{"hooks":null,"extension":{"name":"old","capabilities":{"Err":"why"},"tools":[]}}"#;
        let read: Manifest = serde_json::from_str(old).unwrap();
        let extension = read.extension.unwrap();
        assert_eq!(extension.capabilities, Err("why".into()));
        assert_eq!(extension.served, Served::default());
    }
}
