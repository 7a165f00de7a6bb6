//! `kernel.egress-prompts` (off by default): a sandboxed kernel's connection to a host the
//! operator did not list is held while the person is asked, through the MCP client whose call
//! is running the code, naming the host, the port, the notebook and the code's first line. They
//! allow it for this run, for this session, or (when the operator sets `allow_always`) always:
//! written to `[kernel_sandbox] hosts`. No answer before the call's deadline, a decline, a
//! client without elicitation, or no call running (a background run after its call ended, a
//! person's own run): refused as without the capability, saying which.
//!
//! The domain registers each run of code on a kernel while it runs ([`EgressAsks::running`]);
//! the server's sandbox events ask [`EgressAsks::decide`] when a launcher holds a connection.
//! What the person allowed is listed and revoked by the management routes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};

use crate::capabilities::{Capabilities, EGRESS_PROMPTS};
use crate::client_link::{self, ClientLink, Elicitation, Session, Unreached};

/// Adds a host to the operator's `[kernel_sandbox] hosts` (`true`) or takes one out (`false`):
/// the server crate's, which owns the config file.
pub type WriteHost = Arc<dyn Fn(&str, bool) -> Result<(), String> + Send + Sync>;

/// A run of code on a kernel, while it runs.
struct RunningCall {
    run: u64,
    link: Option<Arc<dyn ClientLink>>,
    notebook: Option<String>,
    first_line: String,
    deadline: Instant,
}

/// How long a person's allowance lasts.
#[derive(Clone)]
enum Hold {
    Run(u64),
    Session {
        id: u64,
        session: Weak<Session>,
    },
    /// Written to the config's hosts.
    Always,
}

#[derive(Clone)]
struct Allowed {
    /// `host:port`, as asked.
    host: String,
    kernel: String,
    notebook: Option<String>,
    hold: Hold,
    when: SystemTime,
}

impl Allowed {
    fn holds(&self) -> bool {
        match &self.hold {
            Hold::Run(_) | Hold::Always => true,
            Hold::Session { session, .. } => session.strong_count() > 0,
        }
    }
}

/// The runs on sandboxed kernels and what people allowed them.
#[derive(Default)]
pub struct EgressAsks {
    running: Mutex<HashMap<String, Vec<RunningCall>>>,
    allowed: Mutex<Vec<Allowed>>,
    next_run: AtomicU64,
    /// Set by the server when the operator allows "always" (`[grant_prompts] allow_always`).
    always: OnceLock<WriteHost>,
}

impl std::fmt::Debug for EgressAsks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EgressAsks").finish_non_exhaustive()
    }
}

/// Unregisters its run when dropped (and forgets what was allowed for it alone).
pub struct RunningGuard<'a> {
    asks: &'a EgressAsks,
    kernel: String,
    run: u64,
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        if let Some(runs) = self
            .asks
            .running
            .lock()
            .expect("runs lock")
            .get_mut(&self.kernel)
        {
            runs.retain(|r| r.run != self.run);
        }
        self.asks
            .allowed
            .lock()
            .expect("allowed lock")
            .retain(|a| !matches!(a.hold, Hold::Run(run) if run == self.run));
    }
}

impl EgressAsks {
    /// Lets the person answer "always", which `write` makes last.
    pub fn allow_always(&self, write: WriteHost) {
        let _ = self.always.set(write);
    }

    /// Registers a run of `code` on `kernel_id` until the guard drops, asking through the
    /// current call's client (none in a background run: nobody to ask).
    pub fn running(
        &self,
        kernel_id: &str,
        code: &str,
        timeout: Duration,
        notebook: Option<&str>,
    ) -> RunningGuard<'_> {
        let run = self.next_run.fetch_add(1, Ordering::Relaxed);
        let first_line = code
            .lines()
            .map(str::trim)
            .find(|line| !line.is_empty())
            .unwrap_or("")
            .chars()
            .take(200)
            .collect();
        self.running
            .lock()
            .expect("runs lock")
            .entry(kernel_id.to_owned())
            .or_default()
            .push(RunningCall {
                run,
                link: client_link::current(),
                notebook: notebook.map(str::to_owned),
                first_line,
                // A moment before the run's own timeout, so the refusal reaches the code
                // before the kernel is interrupted.
                deadline: Instant::now() + timeout - (timeout / 4).min(Duration::from_secs(1)),
            });
        RunningGuard {
            asks: self,
            kernel: kernel_id.to_owned(),
            run,
        }
    }

    /// Whether kernel `kernel_id` may connect to `host:port`: `Ok` with how it was allowed,
    /// `Err` with why not, in words that follow "refused: ".
    pub async fn decide(
        &self,
        capabilities: &Capabilities,
        kernel_id: &str,
        host: &str,
        port: u16,
    ) -> Result<String, String> {
        if !capabilities.enabled(EGRESS_PROMPTS) {
            return Err("kernel.egress-prompts is off, so the person is not asked".into());
        }
        let asked = format!("{host}:{port}");
        let (run, link, notebook, first_line, deadline) = {
            let running = self.running.lock().expect("runs lock");
            let Some(call) = running.get(kernel_id).and_then(|runs| runs.last()) else {
                return Err(
                    "no call of this server is running code on the kernel now (a background \
                     run after its call ended, or code a person ran), so there was nobody to \
                     ask"
                    .into(),
                );
            };
            (
                call.run,
                call.link.clone(),
                call.notebook.clone(),
                call.first_line.clone(),
                call.deadline,
            )
        };
        let session = link.as_ref().and_then(|l| l.session());
        if let Some(how) = self.already(&asked, run, session.as_ref()) {
            return Ok(how);
        }
        let Some(link) = link else {
            return Err(
                "the code runs in the background after the call that started it ended, so \
                 there was nobody to ask"
                    .into(),
            );
        };
        let question = format!(
            "Code running in a sandboxed kernel wants to connect to {host} (port {port}), which \
             the operator did not list.\nNotebook: {}\nCode: {first_line}\nAllow the connection?",
            notebook
                .as_deref()
                .unwrap_or("- (execute_code, no notebook)")
        );
        let always = self.always.get().cloned();
        let wait = deadline.saturating_duration_since(Instant::now());
        let answer =
            tokio::time::timeout(wait, link.elicit(&question, schema(always.is_some()))).await;
        let choice = match answer {
            Err(_) => {
                return Err(format!(
                    "the person did not answer before the call's deadline ({} s)",
                    wait.as_secs()
                ));
            }
            Ok(Err(
                Unreached::Unsupported(why) | Unreached::Invalid(why) | Unreached::Failed(why),
            )) => {
                return Err(format!("the person could not be asked: {why}"));
            }
            Ok(Ok(Elicitation::Declined | Elicitation::Cancelled)) => {
                return Err("the person declined it when asked".into());
            }
            Ok(Ok(Elicitation::Accepted(content))) => content
                .get("allow")
                .and_then(Value::as_str)
                .unwrap_or("run")
                .to_owned(),
        };
        let mut hold = match (choice.as_str(), &session) {
            ("session" | "always", Some(session)) => Hold::Session {
                id: session.id(),
                session: Arc::downgrade(session),
            },
            _ => Hold::Run(run),
        };
        if choice == "always"
            && let Some(write) = always
        {
            match write(&asked, true) {
                Ok(()) => hold = Hold::Always,
                Err(why) => tracing::warn!(
                    "kernel.egress-prompts: the person allowed {asked} always, but it could not \
                     be written to the config ({why}); it holds for this session"
                ),
            }
        }
        let how = match hold {
            Hold::Run(_) => "allowed by the person for this run",
            Hold::Session { .. } => "allowed by the person for this session",
            Hold::Always => "allowed by the person for good (added to [kernel_sandbox] hosts)",
        };
        tracing::info!(
            kernel = kernel_id,
            notebook = notebook.as_deref().unwrap_or("-"),
            "kernel.egress-prompts: {asked} {how}"
        );
        self.allowed.lock().expect("allowed lock").push(Allowed {
            host: asked,
            kernel: kernel_id.to_owned(),
            notebook,
            hold,
            when: SystemTime::now(),
        });
        Ok(how.to_owned())
    }

    /// An earlier answer that still covers `asked` in this run or session.
    fn already(&self, asked: &str, run: u64, session: Option<&Arc<Session>>) -> Option<String> {
        let mut allowed = self.allowed.lock().expect("allowed lock");
        allowed.retain(Allowed::holds);
        allowed.iter().find_map(|a| {
            if a.host != asked {
                return None;
            }
            match &a.hold {
                Hold::Run(r) if *r == run => Some("allowed by the person earlier in this run"),
                Hold::Session { id, .. } if session.is_some_and(|s| s.id() == *id) => {
                    Some("allowed by the person earlier in this session")
                }
                _ => None,
            }
            .map(str::to_owned)
        })
    }

    /// What people allowed that still holds, for the management routes.
    pub fn list(&self) -> Vec<Value> {
        let mut allowed = self.allowed.lock().expect("allowed lock");
        allowed.retain(Allowed::holds);
        allowed
            .iter()
            .map(|a| {
                json!({
                    "host": a.host,
                    "kernel": a.kernel,
                    "notebook": a.notebook,
                    "for": match a.hold {
                        Hold::Run(_) => "run",
                        Hold::Session { .. } => "session",
                        Hold::Always => "always",
                    },
                    "since": a.when.duration_since(SystemTime::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0),
                })
            })
            .collect()
    }

    /// Takes back every allowance for `host` (`host` or `host:port`), an "always" one from the
    /// config's hosts too; how many there were. A connection already open stays open; the
    /// next one is asked again.
    pub fn revoke(&self, host: &str) -> Result<usize, String> {
        let taken: Vec<Allowed> = {
            let mut allowed = self.allowed.lock().expect("allowed lock");
            let (taken, kept) = allowed.drain(..).partition(|a: &Allowed| {
                a.host == host || a.host.rsplit_once(':').map(|(h, _)| h) == Some(host)
            });
            *allowed = kept;
            taken
        };
        if let Some(write) = self.always.get() {
            for always in taken.iter().filter(|a| matches!(a.hold, Hold::Always)) {
                write(&always.host, false)?;
            }
        }
        Ok(taken.len())
    }
}

fn schema(allow_always: bool) -> Value {
    let mut choices = vec![
        json!({"const": "run", "title": "For this run only"}),
        json!({"const": "session", "title": "For the rest of this session"}),
    ];
    if allow_always {
        choices.push(json!({"const": "always", "title": "Always (added to the server's config)"}));
    }
    json!({
        "type": "object",
        "properties": {
            "allow": {
                "type": "string",
                "title": "Allow it",
                "description": "How long the kernel may connect to this host",
                "oneOf": choices,
                "default": "run",
            }
        },
        "required": ["allow"],
    })
}
