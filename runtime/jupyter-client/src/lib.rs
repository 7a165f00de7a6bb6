//! A client of Jupyter Servers: REST, kernel channels (execute, interrupt, liveness, resume),
//! notebook documents (the contents API or a live collaboration room), JupyterHub, the embedded
//! server's launcher and spare kernels.
//!
//! It names nothing of MCP, the domain or wasm: what it reports about kernels goes to a
//! [`kernel::KernelObserver`] its user provides.

pub mod auth;
pub mod document;
pub mod hub;
pub mod kernel;
pub mod launcher;
pub mod private_file;
pub mod rest;
mod restarts;
pub mod spares;
pub mod websocket;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Duration;

use tokio::sync::Mutex;

use kernel::KernelObserver;
use kernel::{ExecuteError, Kernel, KernelError, Liveness};
use rest::{JupyterRest, KernelStart};
use spares::{SpareHold, SparePolicy, Spares, SpecKey};

/// How long a restarted kernel may take to answer again.
const RESTART_READY: std::time::Duration = std::time::Duration::from_secs(30);
/// What a spare kernel is called until it is handed out.
const SPARE_LABEL: &str = "spare (kernel.prewarm)";

/// One Jupyter Server and the kernels this server uses on it.
pub struct Jupyter {
    rest: JupyterRest,
    /// Our open connections, by kernel id; a gone kernel stays here so later calls say so.
    kernels: Mutex<HashMap<String, Arc<Kernel>>>,
    default_kernel: Mutex<DefaultKernel>,
    /// Kernels we started, shut down when we stop.
    started: std::sync::Mutex<HashSet<String>>,
    /// The kernelspec of kernels we started from a named one, so a replacement keeps it.
    specs: std::sync::Mutex<HashMap<String, String>>,
    observer: Arc<dyn KernelObserver>,
    /// How kernels are started here (`--kernel-env`, `--kernel-start-timeout`).
    kernel_start: KernelStart,
    /// Set when every kernel must start from a sandboxed kernelspec: how to install one.
    sandboxed_only: Option<String>,
    /// Set while `kernel.prewarm` is on.
    spares: OnceLock<Arc<Spares>>,
}

#[derive(Default)]
struct DefaultKernel {
    kernel: Option<Arc<Kernel>>,
    /// The loss of `kernel` has been reported to a caller, so the next call may replace it.
    loss_reported: bool,
}

impl std::fmt::Debug for Jupyter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Jupyter").field("rest", &self.rest).finish()
    }
}

impl Jupyter {
    pub fn new(rest: JupyterRest, observer: Arc<dyn KernelObserver>) -> Self {
        Jupyter {
            rest,
            kernels: Mutex::default(),
            default_kernel: Mutex::default(),
            started: Default::default(),
            specs: Default::default(),
            observer,
            kernel_start: KernelStart::default(),
            sandboxed_only: None,
            spares: OnceLock::new(),
        }
    }

    /// Starts kernels as `start` says (the operator's `--kernel-env`, `--kernel-start-timeout`).
    /// Every kernel this client starts comes from a sandboxed kernelspec installed on the
    /// Jupyter Server (`kernel.sandbox` on a Jupyter the user runs); `install` is the command that
    /// installs one, named when none is there.
    pub fn sandboxed_only(mut self, install: String) -> Self {
        self.sandboxed_only = Some(install);
        self
    }

    pub fn with_kernel_start(mut self, start: KernelStart) -> Self {
        self.kernel_start = start;
        self
    }

    /// Keeps spare kernels ready (`kernel.prewarm`) from now until `shutdown`.
    pub fn keep_spares(self: &Arc<Self>, policy: SparePolicy) {
        let spares = Arc::new(Spares::new(policy));
        if self.spares.set(spares.clone()).is_ok() {
            tracing::info!(
                "kernel.prewarm is on: keeping {} spare kernel(s) per kernelspec",
                policy.per_spec
            );
            tokio::spawn(keep_spares(Arc::downgrade(self), spares));
        }
    }

    /// The ids of the spare kernels ready now.
    pub fn spare_ids(&self) -> Vec<String> {
        self.spares.get().map(|s| s.ids()).unwrap_or_default()
    }

    /// While the returned hold lives no new spare is started (`None` when `kernel.prewarm` is
    /// off): a call that takes a spare holds it until it is answered.
    pub fn hold_spares(&self) -> Option<SpareHold> {
        self.spares.get().map(Spares::hold)
    }

    /// Stops spares that are gone, idle too long or no longer wanted, and starts what is missing.
    async fn tend_spares(&self, spares: &Spares) {
        let wanted = spares.wanted();
        let max_idle = spares.policy.max_idle;
        let stale = |spare: &spares::Spare| {
            spare.kernel.liveness() != Liveness::Alive || spare.since.elapsed() >= max_idle
        };
        for spare in spares.retire(&wanted, stale) {
            tracing::info!(
                kernel = %spare.kernel.id(),
                "stopping a spare kernel that is gone, idle too long or no longer wanted"
            );
            self.stop_kernel(spare.kernel.id()).await;
        }
        for spec in wanted {
            while spares.count(&spec) < spares.policy.per_spec && !spares.is_closed() {
                spares.unheld().await;
                if spares.is_closed() {
                    return;
                }
                match self.start_fresh_kernel(spec.as_deref(), SPARE_LABEL).await {
                    Ok(kernel) => {
                        // Handed out ready to run: the wait is paid here, not by the caller.
                        kernel.wait_ready(RESTART_READY).await;
                        if spares.is_closed() {
                            self.stop_kernel(kernel.id()).await;
                            return;
                        }
                        tracing::info!(kernel = %kernel.id(), "a spare kernel is ready");
                        spares.put(spec.clone(), kernel);
                    }
                    Err(e) => {
                        tracing::warn!("could not start a spare kernel ({e}); trying again later");
                        break;
                    }
                }
            }
        }
    }

    /// A spare of `spec` that is still alive (checked with Jupyter too: a culled kernel is never
    /// handed out), or `None`.
    async fn take_spare(&self, spec: &SpecKey) -> Option<Arc<Kernel>> {
        let spares = self.spares.get()?;
        while let Some(spare) = spares.take(spec) {
            let id = spare.kernel.id().to_owned();
            let alive = spare.kernel.liveness() == Liveness::Alive
                && matches!(
                    self.rest.get_kernel(&id).await,
                    Ok(model) if model.execution_state.as_deref() != Some("dead")
                );
            if alive {
                return Some(spare.kernel);
            }
            tracing::info!(kernel = %id, "a spare kernel is gone (culled or dead); not handing it out");
            self.stop_kernel(&id).await;
        }
        None
    }

    /// Tells the observer of a lifecycle change (which cannot be refused).
    async fn lifecycle(&self, event_type: &str, kernel_id: &str, kernel_name: &str) {
        if !self.observer.is_idle() {
            self.observer
                .lifecycle(event_type, kernel_id, kernel_name)
                .await;
        }
    }

    pub fn rest(&self) -> &JupyterRest {
        &self.rest
    }

    /// Our connection to a running kernel, opened on first use.
    pub async fn kernel(&self, id: &str) -> Result<Arc<Kernel>, KernelError> {
        let mut kernels = self.kernels.lock().await;
        if let Some(kernel) = kernels.get(id) {
            return Ok(kernel.clone());
        }
        if self.sandboxed_only.is_some() && !self.started_here(id) {
            self.refuse_unsandboxed(id).await?;
        }
        let kernel = self.connect(id, false).await?;
        kernels.insert(id.to_owned(), kernel.clone());
        Ok(kernel)
    }

    /// A new connection to kernel `id` (see `Kernel::connect` for `restarting`).
    async fn connect(&self, id: &str, restarting: bool) -> Result<Arc<Kernel>, KernelError> {
        Kernel::connect(
            self.rest.clone(),
            id,
            self.observer.clone(),
            self.kernel_start.timeout,
            restarting,
        )
        .await
    }

    /// The kernel `execute_code` uses when none is named: started on first use, and replaced
    /// after its loss has been reported once (so no call silently runs on an empty kernel).
    pub async fn default_kernel(&self) -> Result<Arc<Kernel>, KernelError> {
        let mut slot = self.default_kernel.lock().await;
        if let Some(kernel) = slot.kernel.clone() {
            match kernel.liveness() {
                Liveness::Alive => return Ok(kernel),
                Liveness::Gone(reason) if !slot.loss_reported => {
                    slot.loss_reported = true;
                    return Err(KernelError::Execute(ExecuteError::Gone {
                        kernel_id: kernel.id().to_owned(),
                        reason,
                    }));
                }
                Liveness::Gone(_) => {
                    // It may still exist (restarted under the same id); it is no use to us now.
                    self.stop_kernel(kernel.id()).await;
                }
            }
        }
        let kernel = self.start_kernel("default").await?;
        *slot = DefaultKernel {
            kernel: Some(kernel.clone()),
            loss_reported: false,
        };
        Ok(kernel)
    }

    /// Records that a caller was told the default kernel is gone.
    pub async fn default_kernel_loss_reported(&self, kernel_id: &str) {
        let mut slot = self.default_kernel.lock().await;
        if slot.kernel.as_ref().is_some_and(|k| k.id() == kernel_id) {
            slot.loss_reported = true;
        }
    }

    /// The default kernel if one is running (for health reports).
    pub async fn current_default_kernel(&self) -> Option<Arc<Kernel>> {
        self.default_kernel.lock().await.kernel.clone()
    }

    /// A kernel of the default spec that we own (shut down when we stop), connected: a spare
    /// when `kernel.prewarm` has one ready, else started now.
    pub async fn start_kernel(&self, label: &str) -> Result<Arc<Kernel>, KernelError> {
        self.start_kernel_of(None, label).await
    }

    /// A kernel of `spec` (the server's default when `None`) that we own, connected: a spare of
    /// that spec when `kernel.prewarm` has one ready, else started now.
    pub async fn start_kernel_of(
        &self,
        spec: Option<&str>,
        label: &str,
    ) -> Result<Arc<Kernel>, KernelError> {
        if let Some(kernel) = self.take_spare(&spec.map(str::to_owned)).await {
            kernel.set_label(label);
            tracing::info!(kernel = %kernel.id(), "handed out a spare kernel as '{label}'");
            return Ok(kernel);
        }
        self.start_fresh_kernel(spec, label).await
    }

    async fn start_fresh_kernel(
        &self,
        spec: Option<&str>,
        label: &str,
    ) -> Result<Arc<Kernel>, KernelError> {
        let sandboxed = match &self.sandboxed_only {
            Some(install) => Some(self.sandboxed_spec(spec, install).await?),
            None => None,
        };
        let spec = sandboxed.as_deref().or(spec);
        let model = self.rest.start_kernel(spec, &self.kernel_start).await?;
        self.started
            .lock()
            .expect("started lock")
            .insert(model.id.clone());
        if let Some(spec) = spec {
            self.specs
                .lock()
                .expect("specs lock")
                .insert(model.id.clone(), spec.to_owned());
        }
        tracing::info!(kernel = %model.id, "started a kernel");
        match self.kernel(&model.id).await {
            Ok(kernel) => {
                kernel.set_label(label);
                self.lifecycle("started", &model.id, label).await;
                Ok(kernel)
            }
            Err(e) => {
                self.stop_kernel(&model.id).await;
                Err(e)
            }
        }
    }

    /// A kernel someone else started (a person's, given by id, or a notebook's session) is used
    /// only when it runs a sandboxed kernelspec: the agent's code would run unconfined anywhere
    /// else.
    async fn refuse_unsandboxed(&self, id: &str) -> Result<(), KernelError> {
        let model = self.rest.get_kernel(id).await?;
        let specs = self.rest.kernelspecs().await?;
        let name = model.name;
        if specs
            .kernelspecs
            .get(&name)
            .is_some_and(|entry| entry.spec.is_sandboxed())
        {
            return Ok(());
        }
        Err(KernelError::NotSandboxed(format!(
            "kernel.sandbox is on, but kernel {id} runs the kernelspec '{name}', which is not \
             sandboxed: the agent's code would run unconfined there, so it is not used. Change \
             that notebook's kernel to a sandboxed one (e.g. \"Python 3 (sandboxed)\" in \
             JupyterLab), or shut that kernel down so the server starts a sandboxed one"
        )))
    }

    /// The sandboxed kernelspec to start in place of `asked` (the server's default when `None`):
    /// `asked` itself when it is sandboxed, else a sandboxed Python one for a Python (or
    /// unnamed) spec. Looked up at each start, so one installed meanwhile is found.
    async fn sandboxed_spec(
        &self,
        asked: Option<&str>,
        install: &str,
    ) -> Result<String, KernelError> {
        let specs = self.rest.kernelspecs().await?;
        let entry = |name: &str| specs.kernelspecs.get(name).map(|e| &e.spec);
        if let Some(name) = asked
            && entry(name).is_some_and(|spec| spec.is_sandboxed())
        {
            return Ok(name.to_owned());
        }
        let language = asked
            .and_then(entry)
            .and_then(|spec| spec.language.clone())
            .unwrap_or_else(|| "python".into());
        let found = specs
            .kernelspecs
            .iter()
            .filter(|(_, e)| e.spec.is_sandboxed())
            .find(|(_, e)| {
                e.spec
                    .language
                    .as_deref()
                    .is_none_or(|l| l.eq_ignore_ascii_case(&language))
            });
        match found {
            Some((name, _)) => Ok(name.clone()),
            None if language.eq_ignore_ascii_case("python") => {
                Err(KernelError::NotSandboxed(format!(
                    "kernel.sandbox is on, but the Jupyter Server at {} has no sandboxed kernelspec, \
                 so no kernel was started. Install one on the machine where that Jupyter runs: \
                 `{install}` (Jupyter finds it at once; then call again)",
                    rest::redacted(self.rest.base_url())
                )))
            }
            None => Err(KernelError::NotSandboxed(format!(
                "kernel.sandbox is on and only sandboxed kernels start, but the kernelspec \
                 '{}' is {language}, and the kernel sandbox wraps Python kernels only. Use a \
                 Python notebook, or turn kernel.sandbox off",
                asked.unwrap_or_default()
            ))),
        }
    }

    /// Whether this client started the kernel or is connected to it.
    pub async fn follows(&self, id: &str) -> bool {
        self.started_here(id) || self.kernels.lock().await.contains_key(id)
    }

    /// Whether we started this kernel.
    pub fn started_here(&self, id: &str) -> bool {
        self.started.lock().expect("started lock").contains(id)
    }

    /// Shuts down a kernel we started (others are left alone).
    pub async fn stop_kernel(&self, id: &str) {
        self.end_kernel(id, true).await;
    }

    /// Notes that a kernel we started has been stopped another way (deleting its Jupyter session
    /// stops it): asking Jupyter to delete it again would only log a 404 there.
    pub async fn kernel_stopped_with_session(&self, id: &str) {
        self.end_kernel(id, false).await;
    }

    /// Lets a kernel about to be shut down finish what it runs, interrupted: one shut down while
    /// it executes logs a `ZMQError` traceback, its reply meeting a closed socket. Bounded.
    pub async fn quiesce(kernel: &Kernel) {
        if kernel.connection().execution_state() != "busy" || kernel.interrupt().await.is_err() {
            return;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while kernel.connection().execution_state() == "busy"
            && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn end_kernel(&self, id: &str, delete: bool) {
        let known = self.kernels.lock().await.remove(id);
        if self.started.lock().expect("started lock").remove(id) {
            if let Some(kernel) = &known {
                if delete {
                    Self::quiesce(kernel).await;
                }
                kernel.connection().expect_shutdown();
            }
            if delete {
                match self.rest.delete_kernel(id).await {
                    Ok(()) | Err(rest::RestError::NotFound { .. }) => {}
                    Err(e) => tracing::warn!(kernel = %id, "could not shut down kernel: {e}"),
                }
            }
            let label = known.map(|k| k.label()).unwrap_or_default();
            self.lifecycle("stopped", id, &label).await;
        }
    }

    /// Whether someone besides us uses a kernel: a Jupyter session other than `our_session`
    /// references it, or it has more websocket connections than our one (e.g. JupyterLab).
    pub async fn is_shared(&self, id: &str, our_session: Option<&str>) -> bool {
        let sessions = self.rest.list_sessions().await.unwrap_or_default();
        let other_sessions = sessions
            .iter()
            .filter(|s| Some(s.id.as_str()) != our_session)
            .any(|s| s.kernel.as_ref().is_some_and(|k| k.id == id));
        let connections = self
            .rest
            .get_kernel(id)
            .await
            .ok()
            .and_then(|k| k.connections)
            .unwrap_or(0);
        other_sessions || connections > 1
    }

    /// Shuts down every kernel we started that nobody else uses; kernels we merely used, and
    /// ours that someone else now shares, are left running.
    pub async fn shutdown(&self) {
        // Spares are kernels we started: stopped below with the rest.
        if let Some(spares) = self.spares.get() {
            spares.close();
        }
        let ids: Vec<String> = self
            .started
            .lock()
            .expect("started lock")
            .iter()
            .cloned()
            .collect();
        // All at once: a client gives a stopping server about 2 s before it kills it.
        let stops = ids.iter().map(|id| async move {
            if self.is_shared(id, None).await {
                tracing::info!(kernel = %id, "leaving a kernel we started running: someone else uses it");
            } else {
                self.stop_kernel(id).await;
            }
        });
        futures_util::future::join_all(stops).await;
        self.kernels.lock().await.clear();
        *self.default_kernel.lock().await = DefaultKernel::default();
    }
}

/// Keeps the spares of one Jupyter Server topped up until it is shut down or dropped.
async fn keep_spares(jupyter: Weak<Jupyter>, spares: Arc<Spares>) {
    let check_every =
        (spares.policy.max_idle / 2).clamp(Duration::from_secs(1), Duration::from_secs(30));
    while !spares.is_closed() {
        let Some(server) = jupyter.upgrade() else {
            return;
        };
        server.tend_spares(&spares).await;
        drop(server);
        tokio::select! {
            _ = spares.wake.notified() => {}
            _ = tokio::time::sleep(check_every) => {}
        }
    }
}
