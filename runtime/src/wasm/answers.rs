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
