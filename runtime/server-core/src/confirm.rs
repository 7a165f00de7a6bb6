//! Asking the person before code runs: the shared service behind the `execution.confirm`
//! capability and behind hook handlers that want a person's yes for a call they guard.
//!
//! The domain (and the hooks bus) only ask a question and read the answer; who asks is the
//! transport's business. `mcp` puts a [`Confirmer`] around each tool call ([`asking`]) that
//! sends MCP elicitation to the client; a call with none around it (nobody to ask) is answered
//! [`Answer::Unavailable`], so code never runs unapproved because the question could not be put.
//!
//! The operator's [`Rules`] (`[execution_confirm]`) say which code needs asking.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use regex::Regex;

/// How long a question waits for the person before the code is refused unrun.
pub const ANSWER_WAIT: Duration = Duration::from_secs(600);

/// The longest code a question shows, in lines and in characters; the rest is named, not shown.
const SHOWN_LINES: usize = 40;
const SHOWN_CHARS: usize = 4000;

/// What the person (or their client) answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Accepted,
    Declined,
    Cancelled,
    /// No answer within [`ANSWER_WAIT`].
    Unanswered,
    /// The question could not be put; the text says why (the client lacks elicitation, ...).
    Unavailable(String),
    /// The question went back to the client with the call's answer, as an input request
    /// (MCP 2026-07-28's multi round-trip requests): the call stops here, and the client calls
    /// again with the person's answer.
    Deferred,
}

pub type AnswerFuture<'a> = Pin<Box<dyn Future<Output = Answer> + Send + 'a>>;

/// Whoever can put a question to the person behind a call.
pub trait Confirmer: Send + Sync {
    /// Asks `message` (plain text a person reads) and waits for the answer.
    fn ask<'a>(&'a self, message: &'a str) -> AnswerFuture<'a>;

    /// Whether a question of this call was deferred to the client's retry ([`Answer::Deferred`]):
    /// work the call did before its gate should then be undone, as the retry does it again.
    fn deferred(&self) -> bool {
        false
    }
}

tokio::task_local! {
    static CONFIRMER: Arc<dyn Confirmer>;
}

/// Runs `work` with `confirmer` as the one who asks for every question raised inside it (the
/// guests' host functions included: they run on the caller's thread).
pub async fn asking<F: Future>(confirmer: Arc<dyn Confirmer>, work: F) -> F::Output {
    CONFIRMER.scope(confirmer, work).await
}

/// The confirmer of the current call, for work it spawns that must still ask its person.
pub fn current() -> Option<Arc<dyn Confirmer>> {
    CONFIRMER.try_with(Arc::clone).ok()
}

/// Whether the current call's question went back to the client, to be answered on its retry.
pub fn deferred() -> bool {
    CONFIRMER.try_with(|c| c.deferred()).unwrap_or(false)
}

/// Puts `message` to the person behind the current call, waiting at most [`ANSWER_WAIT`].
pub async fn ask(message: &str) -> Answer {
    let Ok(confirmer) = CONFIRMER.try_with(Arc::clone) else {
        return Answer::Unavailable(
            "this call came from no MCP client that could be asked".to_owned(),
        );
    };
    tokio::time::timeout(ANSWER_WAIT, confirmer.ask(message))
        .await
        .unwrap_or(Answer::Unanswered)
}

/// What the caller is told when `answer` is no yes (`None` on a yes): `nothing` says what did
/// not happen ("Nothing ran in kernel 1a2b"), `asked_by` who wanted the person's yes, and
/// `stop_asking` the other way out when no question can be put.
pub fn refusal(
    answer: &Answer,
    nothing: &str,
    asked_by: &str,
    stop_asking: &str,
) -> Option<String> {
    Some(match answer {
        Answer::Accepted => return None,
        Answer::Declined => format!(
            "{nothing}: the person declined ({asked_by} asked them first). Ask them what they \
             want changed, or do something else."
        ),
        Answer::Cancelled => format!(
            "{nothing}: the person cancelled the question ({asked_by} asked them first). Ask \
             them before trying again."
        ),
        Answer::Unanswered => format!(
            "{nothing}: the person did not answer within {} minutes ({asked_by} asked them \
             first). Call again when they are there.",
            ANSWER_WAIT.as_secs() / 60
        ),
        Answer::Unavailable(why) => format!(
            "{nothing}: {asked_by} needs a person's yes before code runs, and {why}. Connect \
             with a client that supports MCP elicitation (form mode), or {stop_asking}."
        ),
        Answer::Deferred => format!(
            "{nothing} yet: {asked_by} needs a person's yes before code runs, asked of the client \
             as an input request; call again with their answer (inputResponses)."
        ),
    })
}

/// `code` cut to a readable length (the first 40 lines, at most 4,000 characters), with a line
/// saying what was left out.
pub fn shown(code: &str) -> String {
    let mut kept = String::new();
    // Bytes of `code` shown, and whole lines among them.
    let (mut offset, mut lines) = (0, 0);
    for piece in code.split_inclusive('\n') {
        if lines == SHOWN_LINES || offset + piece.len() > SHOWN_CHARS {
            break;
        }
        kept.push_str(piece);
        offset += piece.len();
        lines += 1;
    }
    if lines == 0 && !code.is_empty() {
        // A first line longer than the bound: cut inside it, on a character boundary.
        offset = SHOWN_CHARS.min(code.len());
        while !code.is_char_boundary(offset) {
            offset -= 1;
        }
        kept.push_str(&code[..offset]);
    }
    if !kept.ends_with('\n') {
        kept.push('\n');
    }
    let rest = &code[offset..];
    if !rest.is_empty() {
        kept.push_str(&format!(
            "[… not shown: {} more lines, {} more characters]\n",
            rest.lines().count(),
            rest.chars().count()
        ));
    }
    kept
}

/// Whether code needs asking when `execution.confirm` is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Ask {
    /// Every execution.
    #[default]
    Always,
    /// Only code matching one of the patterns.
    Matching,
}

/// The operator's rules: `[execution_confirm] ask = "always" | "matching"`, `patterns = [...]`.
#[derive(Debug, Clone)]
pub struct Rules {
    pub ask: Ask,
    patterns: Vec<Regex>,
}

/// The patterns `matching` uses when the operator names none: code that reaches the shell or
/// installs packages (IPython's `!` lines and magics, Python's process functions).
pub const DEFAULT_PATTERNS: [&str; 6] = [
    r"(?m)^\s*!",
    r"(?m)^\s*[\w.]+\s*=\s*!",
    r"(?m)^\s*%{1,2}(pip|conda|mamba|micromamba|uv)\b",
    r"(?m)^\s*%{1,2}(bash|sh|script|system|sx|writefile)\b",
    r"\bsubprocess\b",
    r"\bos\s*\.\s*(system|popen|exec\w*|spawn\w*|fork\w*)\b",
];

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum RulesError {
    #[error("pattern {pattern:?} is not a valid regular expression: {reason}")]
    BadPattern { pattern: String, reason: String },
    #[error(
        "ask = \"matching\" with an empty patterns list would never ask; give patterns, or drop \
         the list to use the defaults"
    )]
    NoPatterns,
}

impl Default for Rules {
    fn default() -> Self {
        Rules::new(Ask::Always, None).expect("the default patterns compile")
    }
}

impl Rules {
    /// `patterns`: the operator's, or `None` for [`DEFAULT_PATTERNS`].
    pub fn new(ask: Ask, patterns: Option<Vec<String>>) -> Result<Self, RulesError> {
        let written =
            patterns.unwrap_or_else(|| DEFAULT_PATTERNS.iter().map(|p| (*p).to_owned()).collect());
        if ask == Ask::Matching && written.is_empty() {
            return Err(RulesError::NoPatterns);
        }
        let patterns = written
            .into_iter()
            .map(|pattern| {
                Regex::new(&pattern).map_err(|e| RulesError::BadPattern {
                    reason: e.to_string(),
                    pattern,
                })
            })
            .collect::<Result<_, _>>()?;
        Ok(Rules { ask, patterns })
    }

    /// Why `code` needs asking (the patterns it matches, or the rule that asks always); `None`
    /// when it may run unasked.
    pub fn reason(&self, code: &str) -> Option<String> {
        match self.ask {
            Ask::Always => Some("every execution is asked (ask = \"always\")".to_owned()),
            Ask::Matching => {
                let matched: Vec<String> = self
                    .patterns
                    .iter()
                    .filter_map(|p| p.find(code))
                    .map(|m| format!("{:?}", m.as_str().trim()))
                    .collect();
                (!matched.is_empty()).then(|| format!("the code contains {}", matched.join(", ")))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn matching() -> Rules {
        Rules::new(Ask::Matching, None).unwrap()
    }

    #[test]
    fn the_default_patterns_catch_shell_and_installs_and_leave_plain_code() {
        let rules = matching();
        for code in [
            "!ls -la",
            "x = 1\n  !rm -rf /tmp/x",
            "files = !ls",
            "%pip install requests",
            "%%bash\necho hi",
            "import subprocess\nsubprocess.run(['ls'])",
            "import os; os.system('id')",
            "os.popen('id')",
        ] {
            assert!(rules.reason(code).is_some(), "{code:?} should be asked");
        }
        for code in [
            "print(1 != 2)",
            "x = 3 # not !ls",
            "import os\nos.path.join('a')",
            "a = b != c",
        ] {
            assert_eq!(rules.reason(code), None, "{code:?} should run unasked");
        }
        assert!(
            Rules::default().reason("1").is_some(),
            "always asks everything"
        );
    }

    #[test]
    fn bad_rules_are_refused_with_the_pattern_named() {
        let bad = Rules::new(Ask::Matching, Some(vec!["(".into()])).unwrap_err();
        assert!(bad.to_string().contains("\"(\""), "{bad}");
        assert_eq!(
            Rules::new(Ask::Matching, Some(vec![])).unwrap_err(),
            RulesError::NoPatterns
        );
        let own = Rules::new(Ask::Matching, Some(vec![r"\brm\b".into()])).unwrap();
        assert!(own.reason("rm('x')").is_some());
        assert_eq!(
            own.reason("%pip install x"),
            None,
            "own patterns replace the defaults"
        );
    }

    #[test]
    fn long_code_is_cut_and_the_cut_said() {
        let short = "a = 1\nb = 2";
        assert_eq!(shown(short), "a = 1\nb = 2\n");
        let long: String = (0..100).map(|i| format!("x{i} = {i}\n")).collect();
        let cut = shown(&long);
        assert_eq!(cut.lines().filter(|l| l.starts_with('x')).count(), 40);
        assert!(cut.contains("60 more lines"), "{cut}");
        let wide = "é".repeat(5000);
        let cut = shown(&wide);
        assert!(
            cut.len() < 4200 && cut.contains("not shown"),
            "{}",
            cut.len()
        );
    }

    #[tokio::test]
    async fn without_a_confirmer_nothing_is_approved() {
        assert!(matches!(ask("run?").await, Answer::Unavailable(_)));
        struct Yes;
        impl Confirmer for Yes {
            fn ask<'a>(&'a self, _: &'a str) -> AnswerFuture<'a> {
                Box::pin(async { Answer::Accepted })
            }
        }
        let answer = asking(Arc::new(Yes), ask("run?")).await;
        assert_eq!(answer, Answer::Accepted);
    }
}
