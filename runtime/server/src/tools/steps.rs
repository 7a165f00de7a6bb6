//! The MCP face's words for the steps a domain error suggests: each is one of our tools.

use std::borrow::Cow;

use server_core::agent_tools;
use server_core::domain::{Error, Message, Step};

/// The tool that takes `step`.
pub fn tool_for(step: Step) -> Cow<'static, str> {
    Cow::Borrowed(agent_tools::tool_for(step))
}

/// A domain error as an agent reads it.
pub fn worded(error: &Error) -> String {
    error.worded(tool_for)
}

/// A domain message as an agent reads it.
pub fn said(message: &Message) -> String {
    message.worded(tool_for)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::builtin;

    #[test]
    fn every_step_names_a_tool_we_serve() {
        let served: Vec<String> = builtin()
            .iter()
            .map(|t| t.spec().name.to_string())
            .collect();
        for step in Step::ALL {
            let tool = tool_for(step);
            assert!(
                served.iter().any(|name| *name == tool),
                "{tool} is not a tool"
            );
        }
    }
}
