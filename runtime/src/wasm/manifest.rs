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
