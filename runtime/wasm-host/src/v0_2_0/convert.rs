//! Conversions between the host's types and those of WIT v0.2.0, all in one place, so the rest
//! of the wasm host never names a binding type of this version. What every version converts alike is
//! in `common_convert.rs`; here, what 0.2.0 says its own way or added.

use serde_json::Value;

use super::types;
use crate::answers::AnswerContent;
use crate::answers::{PromptAnswer, ResourceAnswer, ResourceBody, Role};
use crate::distribution::manifest::{
    Listing, PromptArgumentDeclaration, PromptDeclaration, ResourceDeclaration, TemplateDeclaration,
};
use crate::host::CellAt;
use crate::host::HostCallError;
use notebook_format::notebook::Cell;
use server_core::hooks::HookEvent;

conversions_since_0_2! {
    host_error: {
        // 0.2.0 guests never call what answers these (the client and secrets came with 0.3.0).
        HostCallError::UnsupportedByClient(m) => types::HostError::NotAvailable(m),
        HostCallError::Refused(m) => types::HostError::Failed(m),
    }
    guest_error_hosts: []
    cell_fields(cell): {  }
}

/// This version's handlers answer only a context; they cannot ask for confirmation.
pub fn hook_reply(context: Option<String>) -> crate::answers::HookReply {
    crate::answers::HookReply::context(context)
}
