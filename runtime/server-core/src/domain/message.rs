//! An error's message with the next steps it suggests kept typed. The domain says "open the
//! notebook first"; each face names that step in its own words when it shows the message: the
//! MCP tools by a tool's name, a wasm guest by its host function or the agent's tool. So an
//! operation's errors are written once and fit every caller.

use std::borrow::Cow;
use std::fmt;

use serde::{Deserialize, Serialize};

/// Something a caller can do next, as the domain knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    /// Open (or create) a notebook and make it the current one.
    OpenNotebook,
    /// See which notebooks are open.
    ListNotebooks,
    /// Read a notebook's cells.
    ReadNotebook,
    /// Read one cell.
    ReadCell,
    /// Restart a notebook's kernel.
    RestartNotebook,
    /// Run code in a kernel without a notebook.
    ExecuteCode,
    /// Interrupt a busy kernel.
    InterruptKernel,
    /// Read the variables of a notebook's kernel.
    InspectVariables,
    /// See the running kernels.
    ListKernels,
    /// See the kernelspecs the server offers.
    ListKernelspecs,
    /// See the files of the Jupyter root.
    ListFiles,
    /// Read a plain file.
    ReadFile,
    /// Write a plain file.
    WriteFile,
}

impl Step {
    pub const ALL: [Step; 13] = [
        Step::OpenNotebook,
        Step::ListNotebooks,
        Step::ReadNotebook,
        Step::ReadCell,
        Step::RestartNotebook,
        Step::ExecuteCode,
        Step::InterruptKernel,
        Step::InspectVariables,
        Step::ListKernels,
        Step::ListKernelspecs,
        Step::ListFiles,
        Step::ReadFile,
        Step::WriteFile,
    ];

    /// The step as a log line names it, where no face words it.
    pub fn neutral(self) -> &'static str {
        match self {
            Step::OpenNotebook => "<open-notebook>",
            Step::ListNotebooks => "<list-notebooks>",
            Step::ReadNotebook => "<read-notebook>",
            Step::ReadCell => "<read-cell>",
            Step::RestartNotebook => "<restart-notebook>",
            Step::ExecuteCode => "<execute-code>",
            Step::InterruptKernel => "<interrupt-kernel>",
            Step::InspectVariables => "<inspect-variables>",
            Step::ListKernels => "<list-kernels>",
            Step::ListKernelspecs => "<list-kernelspecs>",
            Step::ListFiles => "<list-files>",
            Step::ReadFile => "<read-file>",
            Step::WriteFile => "<write-file>",
        }
    }
}

/// How a face names the steps it shows.
pub type StepNames = fn(Step) -> Cow<'static, str>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Part {
    Text(String),
    Step(Step),
}

impl From<&str> for Part {
    fn from(text: &str) -> Part {
        Part::Text(text.to_owned())
    }
}

impl From<String> for Part {
    fn from(text: String) -> Part {
        Part::Text(text)
    }
}

impl From<Step> for Part {
    fn from(step: Step) -> Part {
        Part::Step(step)
    }
}

/// A message: text with typed steps in it. Stored (in execution records) as its parts; a
/// record written before messages had parts is read as its text.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "Stored")]
pub struct Message(Vec<Part>);

#[derive(Deserialize)]
#[serde(untagged)]
enum Stored {
    Text(String),
    Parts(Vec<Part>),
}

impl From<Stored> for Message {
    fn from(stored: Stored) -> Message {
        match stored {
            Stored::Text(text) => Message::from(text),
            Stored::Parts(parts) => Message(parts),
        }
    }
}

/// Builds a [`Message`] from text and [`Step`]s:
/// `say!["No notebook is in use. Call ", Step::OpenNotebook, " first."]`.
#[macro_export]
macro_rules! say {
    ($($part:expr),+ $(,)?) => {
        $crate::domain::message::Message::from_parts(vec![
            $($crate::domain::message::Part::from($part)),+
        ])
    };
}

impl Message {
    pub fn from_parts(parts: Vec<Part>) -> Message {
        Message(parts)
    }

    /// The text, each step named by `names`.
    pub fn worded(&self, names: StepNames) -> String {
        let mut text = String::new();
        for part in &self.0 {
            match part {
                Part::Text(t) => text.push_str(t),
                Part::Step(step) => text.push_str(&names(*step)),
            }
        }
        text
    }

    /// The steps the message suggests, in order.
    pub fn steps(&self) -> impl Iterator<Item = Step> + '_ {
        self.0.iter().filter_map(|part| match part {
            Part::Step(step) => Some(*step),
            Part::Text(_) => None,
        })
    }

    /// This message with `more` after it.
    pub fn then(mut self, more: impl Into<Part>) -> Message {
        self.0.push(more.into());
        self
    }

    /// This message with `first` before it.
    pub fn after(mut self, first: impl Into<Part>) -> Message {
        self.0.insert(0, first.into());
        self
    }
}

impl From<String> for Message {
    fn from(text: String) -> Message {
        Message(vec![Part::Text(text)])
    }
}

impl From<&str> for Message {
    fn from(text: &str) -> Message {
        Message::from(text.to_owned())
    }
}

impl PartialEq<&str> for Message {
    fn eq(&self, other: &&str) -> bool {
        self.worded(|step| Cow::Borrowed(step.neutral())) == *other
    }
}

/// Steps in their neutral names (`<open-notebook>`): for logs. A face words a message with
/// [`Message::worded`].
impl fmt::Display for Message {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.worded(|step| Cow::Borrowed(step.neutral())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tools(step: Step) -> Cow<'static, str> {
        Cow::Borrowed(match step {
            Step::OpenNotebook => "use_notebook",
            _ => "other",
        })
    }

    #[test]
    fn a_face_names_the_steps() {
        let message = say!["Call ", Step::OpenNotebook, " first."];
        assert_eq!(message.worded(tools), "Call use_notebook first.");
        assert_eq!(message.to_string(), "Call <open-notebook> first.");
        assert_eq!(message.steps().collect::<Vec<_>>(), [Step::OpenNotebook]);
    }

    #[test]
    fn stored_parts_and_old_plain_texts_both_read_back() {
        let message = say!["Call ", Step::RestartNotebook, "."];
        let stored = serde_json::to_string(&message).unwrap();
        assert_eq!(serde_json::from_str::<Message>(&stored).unwrap(), message);
        let old: Message = serde_json::from_str("\"the kernel died\"").unwrap();
        assert_eq!(old.worded(tools), "the kernel died");
    }
}
