//! What a guest answers, in host types, whatever WIT version it was built against: each
//! version's conversions produce these, and the tool table and the catalog consume them.

/// A guest tool's answer, whatever WIT version the guest was built against.
pub struct ToolAnswer {
    pub content: Vec<AnswerContent>,
    /// JSON text, parsed (and bounded) here.
    pub structured: Option<String>,
    pub is_error: bool,
}

pub enum AnswerContent {
    Text(String),
    Image {
        data: Vec<u8>,
        mime_type: String,
    },
    /// A link to a resource, by URI (WIT 0.2.0 on).
    ResourceLink(String),
}

/// One item a resource read returns, whatever WIT version the guest was built against.
pub struct ResourceAnswer {
    pub uri: String,
    pub mime_type: Option<String>,
    pub body: ResourceBody,
}

pub enum ResourceBody {
    Text(String),
    Blob(Vec<u8>),
}

#[derive(Clone, Copy)]
pub enum Role {
    User,
    Assistant,
}

/// A rendered prompt.
pub struct PromptAnswer {
    pub description: Option<String>,
    pub messages: Vec<(Role, AnswerContent)>,
}

/// A hook handler's answer to one event, whatever WIT version it was built against.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HookReply {
    /// JSON text replacing the handler's context for the pair; `None` leaves it.
    pub context: Option<String>,
    /// Asks the person before the call goes on, with this reason (WIT 0.3.0 on).
    pub confirm: Option<String>,
}

impl HookReply {
    /// What a handler of a version without confirmation answers.
    pub fn context(context: Option<String>) -> Self {
        HookReply {
            context,
            confirm: None,
        }
    }
}
