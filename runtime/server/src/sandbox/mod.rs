//! `kernel.sandbox` at start: the policy from the config, the machine checked (refused where
//! the confinement cannot hold), and where sandboxed kernels come from — a `python3` kernelspec
//! the embedded Jupyter is given as its only one, or, on a Jupyter the user runs, the kernelspec
//! `jupyter-mcp-server kernelspec install` put there. Also that command, and the egress events
//! the launchers send back. The confinement itself is the `kernel_sandbox` crate's.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use jupyter_client::launcher::{OwnKernelSpecs, kernel_python};
use kernel_sandbox::Policy;
use kernel_sandbox::events::{AskAnswer, EgressAsk, EgressEvent, EventSocket, SandboxEvent};
use kernel_sandbox::kernelspec::{self, EMBEDDED_NAME};
use server_core::capabilities::{Capabilities, KERNEL_SANDBOX};
use server_core::domain::Domain;
use server_core::hooks::{ExecutionNote, Hooks};

mod policy_file;

use policy_file::PolicyInputs;

use crate::RunError;
use crate::config::{Config, JupyterSource, KernelSandboxSettings, KernelspecInstallArgs};

/// The command that installs the sandboxed kernelspec in a Jupyter the user runs.
pub const INSTALL_COMMAND: &str = "jupyter-mcp-server kernelspec install --user";

/// While `kernel.sandbox` is on: where this server's kernels come from, and the socket the
/// launchers tell of egress on. What it wrote is removed when it drops.
#[derive(Debug)]
pub struct SandboxedKernels {
    /// This server's own directory (policy and kernelspec of the embedded Jupyter).
    dir: PathBuf,
    /// The embedded Jupyter's only kernelspec; `None` on a Jupyter the user runs.
    pub specs: Option<OwnKernelSpecs>,
    events: Option<EventSocket>,
    events_path: Option<PathBuf>,
    /// What remakes the policy when the config file changes, and the file it writes.
    remake: Option<(PolicyInputs, PathBuf)>,
    /// The sandbox's place (its event sockets, the launchers' reply sockets).
    place: PathBuf,
    /// The kernels' CA bundle, when there are credentials.
    bundle: Option<PathBuf>,
}

impl Drop for SandboxedKernels {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
        if let Some(bundle) = &self.bundle {
            let _ = std::fs::remove_file(bundle);
        }
        if let Some(path) = &self.events_path {
            let _ = std::fs::remove_file(path);
        }
    }
}

fn refused(why: String) -> RunError {
    RunError::KernelSandbox(why)
}

/// The sandbox's own place: the kernels' state, the servers' policies, the event sockets.
fn place() -> Result<PathBuf, String> {
    server_core::user_dirs::cache()
        .map(|cache| cache.join("kernel-sandbox"))
        .ok_or_else(|| {
            "kernel.sandbox is on, but neither XDG_CACHE_HOME nor HOME is set, so the sandbox \
             has no place for its kernels' state; set one of them"
                .into()
        })
}

/// `None` while `kernel.sandbox` is off; else where sandboxed kernels come from, once this
/// machine has shown it can confine a kernel.
pub fn prepare(
    config: &Config,
    capabilities: &Capabilities,
) -> Result<Option<SandboxedKernels>, RunError> {
    if !capabilities.enabled(KERNEL_SANDBOX) {
        return Ok(None);
    }
    let embedded_root = match &config.jupyter {
        JupyterSource::Embedded { root_dir, .. } => Some(root_dir),
        JupyterSource::Remote {
            url,
            code_sandbox: true,
            ..
        } => {
            return Err(refused(format!(
                "kernel.sandbox is on, but kernels run on a code sandbox ({url}, \
                 --code-sandbox-url): a gateway's kernels are confined by whoever runs it, not \
                 by this server. Turn kernel.sandbox off, or use --jupyter-url with a Jupyter \
                 on this machine that has the sandboxed kernelspec ({INSTALL_COMMAND})"
            )));
        }
        JupyterSource::Remote { .. } => None,
        JupyterSource::Hub(_) => {
            return Err(refused(
                "kernel.sandbox is on, but in Hub mode (--jupyterhub-url) each user's kernels run \
                 on their own single-user server, confined by the Hub's spawner, not by this \
                 server. Turn kernel.sandbox off, or confine the single-user servers"
                    .into(),
            ));
        }
    };
    if !cfg!(target_os = "linux") {
        return Err(refused(format!(
            "kernel.sandbox is on, but this machine is not Linux ({}); the sandbox needs Linux \
             namespaces, Landlock and seccomp. Turn kernel.sandbox off",
            std::env::consts::OS
        )));
    }
    let place = place().map_err(refused)?;
    let dir = place.join("servers").join(std::process::id().to_string());
    let mut kernels = SandboxedKernels {
        dir: dir.clone(),
        specs: None,
        events: None,
        events_path: None,
        remake: None,
        bundle: None,
        place: place.clone(),
    };
    let (events, events_path) = match EventSocket::bind(&place) {
        Ok(socket) => {
            let path = socket.path().to_owned();
            (Some(socket), Some(path))
        }
        Err(e) => {
            tracing::warn!("kernel.sandbox: egress will be logged by the Jupyter Server only: {e}");
            (None, None)
        }
    };
    kernels.events = events;
    kernels.events_path = events_path;
    let Some(root_dir) = embedded_root else {
        // A Jupyter the user runs: its sandboxed kernelspec carries its own policy, checked
        // where it was installed; each kernel start looks for it (see `Jupyter::sandboxed_only`).
        tracing::info!(
            "kernel.sandbox is on: every kernel is started from a sandboxed kernelspec of the \
             Jupyter Server at {} (a call is refused while it has none; install one with \
             `{INSTALL_COMMAND}`)",
            jupyter_client::rest::redacted(match &config.jupyter {
                JupyterSource::Remote { url, .. } => url,
                _ => unreachable!("only a remote Jupyter has no embedded root"),
            })
        );
        return Ok(Some(kernels));
    };
    let root = root_dir.canonicalize().unwrap_or_else(|_| root_dir.clone());
    let bundle = place
        .join("ca")
        .join(format!("server-{}.pem", std::process::id()));
    kernels.bundle = Some(bundle.clone());
    let mut inputs = PolicyInputs::new(
        root,
        config.kernel_sandbox.clone(),
        config.wasm.secrets.as_ref().map(|s| s.path().to_owned()),
        config.state.as_ref().map(|state| state.dir.clone()),
        place.clone(),
        dir.clone(),
        bundle,
        Vec::new(),
    );
    inputs.prompts = capabilities.enabled(server_core::capabilities::EGRESS_PROMPTS);
    let policy = inputs
        .make()
        .map_err(|e| refused(format!("kernel.sandbox: {e}")))?;
    let policy_file = dir.join("policy.json");
    policy
        .save(&policy_file)
        .map_err(|e| refused(format!("kernel.sandbox: {e}")))?;
    let specs = OwnKernelSpecs {
        data_dir: dir.join("jupyter"),
        only: vec![EMBEDDED_NAME.to_owned()],
    };
    let caps = check(&policy_file).map_err(refused)?;
    let launcher = std::env::current_exe()
        .map_err(|e| refused(format!("kernel.sandbox: cannot find this program: {e}")))?;
    let spec = kernelspec::kernel_json(
        &launcher,
        &policy_file,
        &kernel_python()?,
        "Python 3 (sandboxed)",
    );
    kernelspec::write(&specs.data_dir.join("kernels"), EMBEDDED_NAME, &spec)
        .map_err(|e| refused(format!("kernel.sandbox: {e}")))?;
    kernels.specs = Some(specs);
    kernels.remake = Some((inputs, policy_file));
    tracing::info!("kernel.sandbox is on: {}; {caps}", enforced(&policy));
    Ok(Some(kernels))
}

impl SandboxedKernels {
    /// Rewrites the kernels' policy whenever the config file's `hosts` or `credentials`
    /// change or `kernel.egress-prompts` is switched, until the process ends; and lets a
    /// person's "always" be written to the config when the operator allows it.
    pub fn follow_config(&mut self, domain: &Arc<Domain>) {
        let Some((inputs, policy_file)) = self.remake.take() else {
            return;
        };
        if inputs.settings.allow_always
            && let Some(config) = inputs.settings.config_file.clone()
        {
            domain
                .egress_asks
                .allow_always(Arc::new(move |host: &str, add: bool| {
                    policy_file::write_host(&config, host, add)
                }));
        }
        inputs.watch(policy_file, domain.capabilities.clone());
    }

    /// Follows the launchers' egress decisions for the kernels of `domain`: each refusal a log
    /// line and an event on the running execution's span, each allowed connection counted
    /// there; and the kernels they saw stopped at their memory cap, for the domain to say so.
    pub fn follow_egress(&mut self, domain: &Arc<Domain>, hooks: &Arc<Hooks>) {
        let Some(socket) = self.events.take() else {
            return;
        };
        let domain = domain.clone();
        let hooks = hooks.clone();
        let place = self.place.clone();
        tokio::spawn(async move {
            while let Some(event) = socket.next().await {
                let event = match event {
                    SandboxEvent::Egress(event) => event,
                    SandboxEvent::Ask(ask) => {
                        if domain.jupyter().follows(&ask.kernel).await {
                            tokio::spawn(answer_ask(domain.clone(), place.clone(), ask));
                        }
                        continue;
                    }
                    SandboxEvent::Stopped(stopped) => {
                        if domain.jupyter().follows(&stopped.kernel).await {
                            tracing::warn!(
                                kernel = %stopped.kernel,
                                "kernel.sandbox stopped a kernel at its memory cap of {} MB",
                                stopped.memory_cap_mb
                            );
                            domain
                                .kernel_endings
                                .stopped_at_memory_cap(&stopped.kernel, stopped.memory_cap_mb);
                        }
                        continue;
                    }
                };
                // Noted on the span at once: only an execution of ours on that kernel takes
                // it, and waiting for the kernel table first let an allowed connection land
                // after its execution had ended.
                let note = note_egress(&domain, &hooks, &event);
                if domain.jupyter().follows(&event.kernel).await {
                    log_egress(&event, &note);
                }
            }
        });
    }
}

/// Puts a held connection to the person behind the call running code on its kernel, and
/// answers the launcher: at once that the question is taken, then the decision.
async fn answer_ask(domain: Arc<Domain>, place: PathBuf, ask: EgressAsk) {
    let reply = |allowed: Option<bool>, why: String| {
        kernel_sandbox::events::answer(
            &place,
            &ask.reply,
            &AskAnswer {
                ask: ask.ask,
                allowed,
                why,
            },
        );
    };
    reply(None, String::new());
    let decided = domain
        .egress_asks
        .decide(&domain.capabilities, &ask.kernel, &ask.host, ask.port)
        .await;
    match decided {
        Ok(how) => reply(Some(true), how),
        Err(why) => reply(Some(false), why),
    }
}

/// Notes `event` on the running execution's span, if one of ours runs on its kernel.
fn note_egress(domain: &Domain, hooks: &Hooks, event: &EgressEvent) -> ExecutionNote {
    let notebook = event.notebook.clone().or_else(|| {
        domain
            .notebooks
            .running_on(&event.kernel)
            .map(|notebook| notebook.path.clone())
    });
    let mut attributes = vec![
        ("egress.host", event.host.clone()),
        ("egress.port", event.port.to_string()),
        ("kernel.id", event.kernel.clone()),
    ];
    attributes.extend(notebook.map(|notebook| ("notebook", notebook)));
    let note = match &event.refused {
        Some(why) => {
            attributes.push(("egress.reason", why.clone()));
            ExecutionNote {
                name: "egress.refused",
                attributes,
            }
        }
        None => ExecutionNote {
            name: "egress.allowed",
            attributes,
        },
    };
    hooks.execution_note(&event.kernel, &note);
    note
}

/// A refusal is a warning in our log; an allowed connection a debug line.
fn log_egress(event: &EgressEvent, note: &ExecutionNote) {
    let shown = note
        .attributes
        .iter()
        .find(|(key, _)| *key == "notebook")
        .map_or("-", |(_, notebook)| notebook.as_str());
    match &event.refused {
        Some(why) => tracing::warn!(
            kernel = %event.kernel,
            notebook = shown,
            "kernel.sandbox refused egress to {}:{}: {why}",
            event.host,
            event.port
        ),
        None => tracing::debug!(
            kernel = %event.kernel,
            notebook = shown,
            "kernel.sandbox allowed egress to {}:{}",
            event.host,
            event.port
        ),
    }
}

/// What the start log and the install command say is enforced.
fn enforced(policy: &Policy) -> String {
    format!(
        "kernels confined by {}; writable: {}; reads denied: {}; hosts allowed through the \
         egress proxy: {}; credentials added there, TLS terminated: {}",
        kernel_sandbox::mechanisms(),
        shown(&policy.writable),
        shown(&policy.deny_read),
        if policy.hosts.is_empty() {
            "none".to_owned()
        } else {
            policy.hosts.join(", ")
        },
        if policy.credentials.is_empty() {
            "none".to_owned()
        } else {
            policy
                .credentials
                .iter()
                .map(|c| {
                    format!(
                        "{}:{} ({} from secret {})",
                        c.host, c.port, c.header, c.secret
                    )
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    )
}

fn shown(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

/// The operator's `[kernel_sandbox]` over the defaults: the root and `write` writable; the
/// default deny list, this server's own config directory, secrets, state and config file, and
/// `deny_read` hidden.
fn policy(
    root: &Path,
    settings: &KernelSandboxSettings,
    secrets: Option<PathBuf>,
    state: Option<PathBuf>,
    place: &Path,
) -> Policy {
    let mut writable = vec![root.to_owned()];
    writable.extend(settings.write.iter().cloned());
    let mut deny_read = std::env::var_os("HOME")
        .map(|home| Policy::default_deny(Path::new(&home)))
        .unwrap_or_default();
    deny_read.extend(secrets);
    deny_read.extend(server_core::user_dirs::config());
    deny_read.extend(server_core::secrets::SecretStore::default_path());
    deny_read.extend(state);
    deny_read.extend(settings.config_file.iter().cloned());
    deny_read.extend(settings.deny_read.iter().cloned());
    deny_read.sort();
    deny_read.dedup();
    Policy {
        writable,
        deny_read,
        hosts: settings.hosts.clone(),
        never_ports: Vec::new(),
        place: place.to_owned(),
        memory_mb: settings.memory_mb,
        processes: settings.processes,
        credentials: Vec::new(),
        secrets_file: None,
        ca_bundle: None,
        egress_prompts: false,
    }
}

/// Runs this program's `kernel-sandbox check` (a fresh process: the check forks, which a
/// process with runtime threads must not).
fn check(policy_file: &Path) -> Result<String, String> {
    let program = std::env::current_exe()
        .map_err(|e| format!("kernel.sandbox: cannot find this program: {e}"))?;
    let output = std::process::Command::new(program)
        .args(["kernel-sandbox", "check", "--policy"])
        .arg(policy_file)
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| format!("kernel.sandbox: cannot run its check: {e}"))?;
    if output.status.success() {
        return Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned());
    }
    let said = String::from_utf8_lossy(&output.stderr);
    let said = said
        .trim()
        .trim_start_matches("jupyter-mcp-server: ")
        .to_owned();
    Err(format!(
        "kernel.sandbox is on, but {said}. A kernel never runs unconfined while the capability \
         says on: turn kernel.sandbox off, or run the server where {} are available",
        kernel_sandbox::mechanisms()
    ))
}

/// `jupyter-mcp-server kernelspec install`: a kernelspec wrapping a Python kernel in the sandbox,
/// with its policy beside it, for a Jupyter the user runs (a person in JupyterLab and the agent
/// then share one confined kernel). Returns what to tell the user.
pub fn install_kernelspec(args: &KernelspecInstallArgs) -> Result<String, String> {
    if !cfg!(target_os = "linux") {
        return Err(format!(
            "the kernel sandbox needs Linux namespaces, Landlock and seccomp; this machine is {}",
            std::env::consts::OS
        ));
    }
    let settings = match &args.config {
        Some(path) => KernelSandboxSettings::from_file(path).map_err(|e| e.to_string())?,
        None => KernelSandboxSettings::default(),
    };
    let python = match &args.python {
        Some(python) => python.clone(),
        None => kernel_python().map_err(|e| e.to_string())?,
    };
    let kernels = match (&args.prefix, args.user) {
        (Some(prefix), _) => prefix.join("share/jupyter/kernels"),
        (None, true) => jupyter_data_dir()?.join("kernels"),
        (None, false) => python_prefix(&python)?.join("share/jupyter/kernels"),
    };
    let root = match &args.root_dir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().map_err(|e| format!("the current directory: {e}"))?,
    };
    let root = root
        .canonicalize()
        .map_err(|e| format!("--root-dir {}: {e}", root.display()))?;
    let place = place()?;
    let dir = kernels.join(&args.name);
    // The kernelspec itself (a kernel that could rewrite it would start the next one
    // unconfined) holds the policy and the credentials' certificates.
    let mut inputs = PolicyInputs::new(
        root,
        settings,
        None,
        default_state_dir(),
        place.clone(),
        dir.clone(),
        place
            .join("ca")
            .join(format!("kernelspec-{}.pem", args.name)),
        vec![dir.clone()],
    );
    let policy = inputs.make()?;
    let policy_file = dir.join("policy.json");
    policy.save(&policy_file).map_err(|e| e.to_string())?;
    let caps = match check(&policy_file) {
        Ok(caps) => caps,
        Err(why) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(why.replacen("kernel.sandbox is on, but ", "", 1));
        }
    };
    let launcher = std::env::current_exe().map_err(|e| format!("cannot find this program: {e}"))?;
    let spec = kernelspec::kernel_json(&launcher, &policy_file, &python, &args.display_name);
    kernelspec::write(&kernels, &args.name, &spec).map_err(|e| e.to_string())?;
    Ok(format!(
        "Installed kernelspec '{}' (\"{}\") in {}: {}; {caps}",
        args.name,
        args.display_name,
        dir.display(),
        enforced(&policy)
    ))
}

/// Jupyter's per-user data directory, as `jupyter --data-dir` says without a prefix.
fn jupyter_data_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("JUPYTER_DATA_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    server_core::user_dirs::base("XDG_DATA_HOME", ".local/share")
        .map(|base| base.join("jupyter"))
        .ok_or_else(|| {
            "neither JUPYTER_DATA_DIR, XDG_DATA_HOME nor HOME is set; use --prefix".into()
        })
}

/// The environment of `python` (its `sys.prefix`), where that environment's Jupyter looks.
fn python_prefix(python: &Path) -> Result<PathBuf, String> {
    let output = std::process::Command::new(python)
        .args(["-c", "import sys; print(sys.prefix)"])
        .stdin(std::process::Stdio::null())
        .output()
        .map_err(|e| {
            format!(
                "cannot run {}: {e}; give --python, --user or --prefix",
                python.display()
            )
        })?;
    let prefix = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() || prefix.is_empty() {
        return Err(format!(
            "{} did not say its prefix; give --user or --prefix",
            python.display()
        ));
    }
    Ok(PathBuf::from(prefix))
}

fn default_state_dir() -> Option<PathBuf> {
    server_core::user_dirs::base("XDG_STATE_HOME", ".local/state")
        .map(|b| b.join("jupyter-mcp-server"))
}
