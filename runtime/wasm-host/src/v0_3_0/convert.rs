//! Conversions between the host's types and those of WIT v0.3.0, all in one place, so the rest
//! of the wasm host never names a binding type of this version. What every version converts alike is
//! in `common_convert.rs`; here, what 0.3.0 says its own way or added (as 0.2.0 did, plus cell
//! versions, the client's errors and the hook reply).

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
use server_core::domain::versions::cell_version;
use server_core::hooks::HookEvent;

conversions_since_0_2! {
    host_error: {
        HostCallError::UnsupportedByClient(m) => types::HostError::UnsupportedByClient(m),
        HostCallError::Refused(m) => types::HostError::Refused(m),
    }
    guest_error_hosts: [UnsupportedByClient, Refused]
    cell_fields(cell): { version: cell_version(cell), }
}

/// A handler's reply: its context, and maybe the reason to ask the person first.
pub fn hook_reply(reply: types::HookReply) -> crate::answers::HookReply {
    crate::answers::HookReply {
        context: reply.context,
        confirm: reply.confirm,
    }
}
