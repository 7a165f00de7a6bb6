//! What a guest built against this version exports, called through host types only (see
//! `crate::api`, which picks the version): what every version has (`common_exports.rs`) and what
//! 0.2.0 added (resources, resource templates and prompts), which 0.3.0 keeps.

use super::{EXTENSION_EXPORT, HOOKS_EXPORT, convert, extension_export, hooks_export};
use crate::answers::{PromptAnswer, ResourceAnswer};
use crate::distribution::manifest::{PromptDeclaration, ResourceDeclaration, TemplateDeclaration};

served_guest_exports!("wit/v0.3.0");
