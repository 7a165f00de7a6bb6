//! Talks back to the client of the call it runs in (WIT 0.3.0 through the SDK), for the
//! end-to-end tests: `talk_ask` asks the person (elicitation), `talk_model` asks the client's
//! model (sampling), `talk_count` reports progress, `talk_secret` reads a secret; each answers
//! what it got, a host error as its case and the host's words, so the tests check both. As a
//! critical hook handler it asks the person before code that contains `%pip install` runs.

use jupyter_mcp_extension::client::{self, Answer};
use jupyter_mcp_extension::serde_json::json;
use jupyter_mcp_extension::{
    self as ext, Extension, HookEvent, HostError, NoArguments, Reply, Tool, register_extension,
    secrets,
};
use schemars::JsonSchema;
use serde::Deserialize;

/// The host error's case, as WIT names it.
fn kind(error: &HostError) -> &'static str {
    match error {
        HostError::NotGranted(_) => "not-granted",
        HostError::NotAvailable(_) => "not-available",
        HostError::NotFound(_) => "not-found",
        HostError::Conflict(_) => "conflict",
        HostError::Kernel(_) => "kernel",
        HostError::Invalid(_) => "invalid",
        HostError::UnsupportedByClient(_) => "unsupported-by-client",
        HostError::Refused(_) => "refused",
        HostError::Failed(_) => "failed",
    }
}

fn reported(error: HostError) -> String {
    format!("{}: {}", kind(&error), error.message())
}

#[derive(Deserialize, JsonSchema)]
struct AskArgs {
    /// The question put to the person.
    question: String,
}

#[derive(Deserialize, JsonSchema)]
struct ModelArgs {
    /// What to ask the model.
    prompt: String,
}

#[derive(Deserialize, JsonSchema)]
struct CountArgs {
    /// How many steps to report.
    steps: u32,
}

#[derive(Deserialize, JsonSchema)]
struct SecretArgs {
    /// The secret's name.
    name: String,
}

struct Talks;

impl Talks {
    fn talk_ask(&self, args: AskArgs) -> ext::Result<String> {
        let schema = json!({
            "type": "object",
            "properties": {"name": {"type": "string", "description": "Your name"}},
            "required": ["name"],
        });
        Ok(match client::elicit(&args.question, &schema) {
            Ok(Answer::Accept(content)) => format!("accepted: {content}"),
            Ok(Answer::Decline) => "declined".to_owned(),
            Ok(Answer::Cancel) => "cancelled".to_owned(),
            Err(error) => reported(error),
        })
    }

    fn talk_model(&self, args: ModelArgs) -> ext::Result<String> {
        Ok(match client::ask_model(&args.prompt, 50) {
            Ok(text) => format!("the model said: {text}"),
            Err(error) => reported(error),
        })
    }

    fn talk_count(&self, args: CountArgs) -> ext::Result<String> {
        let total = f64::from(args.steps);
        for step in 1..=args.steps {
            // Apart by more than the host's rate limit, so each report goes out.
            std::thread::sleep(std::time::Duration::from_millis(150));
            client::progress(f64::from(step), Some(total), Some(&format!("step {step}")));
        }
        Ok(format!("counted to {}", args.steps))
    }

    fn talk_secret(&self, args: SecretArgs) -> ext::Result<String> {
        Ok(match secrets::get(&args.name) {
            Ok(value) => {
                // The host redacts the value from this line.
                ext::log::info(&format!("talks read the secret: {value}"));
                format!("read a secret of {} characters", value.chars().count())
            }
            Err(error) => reported(error),
        })
    }

    fn talk_version(&self, _: NoArguments) -> ext::Result<String> {
        Ok(ext::host::api_version())
    }
}

impl Extension for Talks {
    fn new() -> Self {
        Talks
    }

    fn tools(&self) -> Vec<Tool<Self>> {
        vec![
            Tool::new(
                "talk_ask",
                "Asks the person a question with a form.",
                Self::talk_ask,
            ),
            Tool::new("talk_model", "Asks the client's model.", Self::talk_model),
            Tool::new(
                "talk_count",
                "Counts, reporting progress.",
                Self::talk_count,
            ),
            Tool::new("talk_secret", "Reads a secret by name.", Self::talk_secret),
            Tool::new(
                "talk_version",
                "The host's API version.",
                Self::talk_version,
            ),
        ]
    }

    fn propagate_errors(&self) -> bool {
        true
    }

    fn decide(&self, event: &HookEvent, _context: &mut ext::Context) -> ext::Result<Reply> {
        Ok(match event {
            HookEvent::BeforeExecute(before) if before.code.contains("%pip install") => {
                Reply::Confirm("the code installs packages (%pip install)".to_owned())
            }
            _ => Reply::Proceed,
        })
    }
}

register_extension!(Talks, hooks);
