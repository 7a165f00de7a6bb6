//! What a guest declared when it last loaded (its name, whether it handles hooks and asks to be
//! critical, its capabilities and tools), kept beside its compiled code so a later start lists
//! its tools and capabilities before the guest is ready.
//!
//! Keyed by the component's bytes and its config (its tools may depend on the config), and
//! authenticated like compiled code, so a planted file cannot add tools to a guest.

use serde::{Deserialize, Serialize};

use crate::capabilities::Declaration;

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
    /// What it serves besides tools (WIT 0.2.0 on; none for a 0.1.0 guest). Defaults keep a
    /// manifest written before they existed readable.
    #[serde(default)]
    pub resources: Vec<ResourceDeclaration>,
    #[serde(default)]
    pub resource_templates: Vec<TemplateDeclaration>,
    #[serde(default)]
    pub prompts: Vec<PromptDeclaration>,
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

/// A resource an extension serves at a fixed URI.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResourceDeclaration {
    pub uri: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// A family of resources an extension serves: an RFC 6570 URI template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateDeclaration {
    pub uri_template: String,
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
    pub mime_type: Option<String>,
}

/// A prompt an extension renders.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PromptDeclaration {
    pub name: String,
    pub title: Option<String>,
    pub description: Option<String>,
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
                resources: vec![ResourceDeclaration {
                    uri: "demo://r".into(),
                    name: "r".into(),
                    title: Some("R".into()),
                    description: None,
                    mime_type: Some("text/plain".into()),
                }],
                resource_templates: vec![TemplateDeclaration {
                    uri_template: "demo://{x}".into(),
                    name: "x".into(),
                    title: None,
                    description: Some("by x".into()),
                    mime_type: None,
                }],
                prompts: vec![PromptDeclaration {
                    name: "p".into(),
                    title: None,
                    description: Some("P".into()),
                    arguments: vec![PromptArgumentDeclaration {
                        name: "a".into(),
                        description: None,
                        required: true,
                    }],
                }],
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
        assert!(extension.resources.is_empty());
        assert!(extension.resource_templates.is_empty());
        assert!(extension.prompts.is_empty());
    }
}
