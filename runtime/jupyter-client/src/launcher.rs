//! The Jupyter Server we start ourselves when no `--jupyter-url` is given.
//!
//! It listens on loopback only, on a free port, with a generated token and a private runtime
//! directory (the data directory is left alone so the user's kernelspecs stay visible). Its output
//! comes to us on a pipe of our own and goes on to our stderr (stdout belongs to MCP), so a client
//! that vanished cannot stall it. It runs in its own process group, is stopped, kernels included,
//! whenever we stop, and is told to stop (SIGTERM) by the kernel itself when we die unasked.

use std::io::{BufRead as _, Write as _};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};
use url::Url;

use super::rest::JupyterRest;

/// How long a cold Jupyter Server may take to answer (a first start on a busy 2-core machine
/// has been measured at ~15 s).
/// How long a started server may take to answer before it is given up on.
pub const READY_TIMEOUT: Duration = Duration::from_secs(90);
/// How long the server may take to stop after asking it through its API (it closes its
/// extensions, e.g. collaboration rooms, first), and then after SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
const STOP_GRACE: Duration = Duration::from_secs(15);

#[derive(Debug, thiserror::Error)]
pub enum LaunchError {
    #[error(
        "no `jupyter` command was found on PATH, nor in {venv} (the environment runtime/serve \
         installs), so no Jupyter Server can be started. Run runtime/serve once in a terminal \
         (it installs one there), install one on PATH (`pip install jupyter-server ipykernel`), \
         or point this server at a running Jupyter with --jupyter-url and --jupyter-token",
        venv = .0.display()
    )]
    JupyterNotFound(PathBuf),
    #[error(
        "the root directory {0} does not exist or is not a directory; pass an existing --root-dir"
    )]
    BadRootDir(PathBuf),
    #[error("could not start the Jupyter Server ({command}): {source}")]
    Spawn {
        command: String,
        source: std::io::Error,
    },
    #[error(
        "the Jupyter Server exited ({status}) before it answered; its messages are above on stderr. \
         If `jupyter server` is missing, install it with `pip install jupyter-server ipykernel`"
    )]
    ExitedEarly { status: String },
    #[error("the Jupyter Server did not answer within {0:?}; its messages are above on stderr")]
    NotReady(Duration),
    #[error("could not prepare the Jupyter Server: {0}")]
    Io(#[from] std::io::Error),
}

pub struct EmbeddedJupyter {
    child: Child,
    url: Url,
    token: String,
    runtime_dir: PathBuf,
    /// The `jupyter` script it runs, whose Python says whether it has collaboration.
    jupyter: PathBuf,
    collaboration: Option<bool>,
}

impl std::fmt::Debug for EmbeddedJupyter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedJupyter")
            .field("url", &self.url.as_str())
            .finish()
    }
}

/// Finds an executable on PATH.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The environment `runtime/serve` installs Jupyter into when none is on PATH:
/// `JUPYTER_MCP_SERVE_VENV`, else `~/.cache/jupyter-mcp-server/serve-venv`.
fn serve_venv() -> PathBuf {
    match std::env::var_os("JUPYTER_MCP_SERVE_VENV").filter(|v| !v.is_empty()) {
        Some(venv) => PathBuf::from(venv),
        None => std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
            .join(".cache/jupyter-mcp-server/serve-venv"),
    }
}

/// The `jupyter` command to start: the user's own on PATH (with their kernels), else the one
/// `runtime/serve` installed, which MCP clients' minimal PATH does not reach. Returns it with
/// the directory to put first on its PATH, for the second case.
fn find_jupyter() -> Result<(PathBuf, Option<PathBuf>), LaunchError> {
    if let Some(jupyter) = find_on_path("jupyter") {
        tracing::info!("using the Jupyter on PATH: {}", jupyter.display());
        return Ok((jupyter, None));
    }
    let bin = serve_venv().join("bin");
    let jupyter = bin.join("jupyter");
    if !jupyter.is_file() {
        return Err(LaunchError::JupyterNotFound(serve_venv()));
    }
    tracing::info!(
        "no jupyter on PATH; using the one runtime/serve installed: {}",
        jupyter.display()
    );
    Ok((jupyter, Some(bin)))
}

/// Kernelspecs the embedded Jupyter is given in place of the installed ones: its data directory
/// (holding `kernels/NAME/kernel.json`) is found first, and only the names in `only` may start.
#[derive(Debug, Clone)]
pub struct OwnKernelSpecs {
    pub data_dir: PathBuf,
    pub only: Vec<String>,
}

/// The Python the embedded Jupyter runs on (its `jupyter` script's interpreter), which is what
/// its own `python3` kernelspec starts.
pub fn kernel_python() -> Result<PathBuf, LaunchError> {
    let (jupyter, _) = find_jupyter()?;
    let shebang = std::fs::read(&jupyter).ok().and_then(|bytes| {
        let line = bytes
            .split(|b| *b == b'\n')
            .next()?
            .strip_prefix(b"#!")?
            .to_vec();
        let line = String::from_utf8(line).ok()?;
        let interpreter = PathBuf::from(line.split_whitespace().next()?);
        interpreter.is_file().then_some(interpreter)
    });
    Ok(shebang
        .or_else(|| {
            let beside = jupyter.parent()?.join("python3");
            beside.is_file().then_some(beside)
        })
        .or_else(|| find_on_path("python3"))
        .unwrap_or_else(|| PathBuf::from("python3")))
}

impl EmbeddedJupyter {
    /// Starts a Jupyter Server and waits until it answers (`spawn`, then `wait_until_ready`).
    pub async fn start(
        root_dir: &Path,
        log_level: &str,
        kernels: Option<&OwnKernelSpecs>,
    ) -> Result<Self, LaunchError> {
        let mut embedded = Self::spawn(root_dir, log_level, kernels)?;
        match embedded.wait_until_ready().await {
            Ok(()) => Ok(embedded),
            Err(e) => {
                embedded.stop().await;
                Err(e)
            }
        }
    }

    /// Starts a Jupyter Server on a free loopback port and returns at once: its URL and token
    /// are known before it answers, so the MCP server can serve while it comes up.
    pub fn spawn(
        root_dir: &Path,
        log_level: &str,
        kernels: Option<&OwnKernelSpecs>,
    ) -> Result<Self, LaunchError> {
        let (jupyter, bin_dir) = find_jupyter()?;
        if !root_dir.is_dir() {
            return Err(LaunchError::BadRootDir(root_dir.to_owned()));
        }
        let root_dir = root_dir.canonicalize()?;
        let token = uuid::Uuid::new_v4().simple().to_string();
        let runtime_dir =
            std::env::temp_dir().join(format!("jupyter-mcp-{}", uuid::Uuid::new_v4().simple()));
        // 0700 from the start: Jupyter keeps its connection files and server info here.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&runtime_dir)?;
        let token_file = runtime_dir.join("token");
        crate::private_file::create(&token_file, &[token.as_bytes()])?;
        let port = free_loopback_port()?;
        let url = Url::parse(&format!("http://127.0.0.1:{port}/")).expect("valid URL");

        let (output, output_writer) = std::io::pipe()?;
        let mut command = Command::new(&jupyter);
        command
            .arg("server")
            .arg("--no-browser")
            .arg("--ip=127.0.0.1")
            .arg(format!("--port={port}"))
            .arg("--ServerApp.port_retries=0")
            // Application, not ServerApp: extensions log through loggers of their own.
            .arg(format!("--Application.log_level={log_level}"))
            .arg(format!("--ServerApp.root_dir={}", root_dir.display()))
            .env("JUPYTER_RUNTIME_DIR", &runtime_dir)
            // The token goes through a 0600 file: any local user can read a command line, and
            // kernels inherit the environment (a printed `os.environ` would land in a notebook).
            .env("JUPYTER_TOKEN_FILE", &token_file)
            .env_remove("JUPYTER_TOKEN")
            // Side files some extensions write into the working directory land in our private dir.
            .current_dir(&runtime_dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(output_writer.try_clone()?))
            .stderr(Stdio::from(output_writer))
            .process_group(0)
            .kill_on_drop(true);
        stop_with_us(&mut command);
        if nix::unistd::Uid::effective().is_root() {
            command.arg("--allow-root");
        }
        if let Some(kernels) = kernels {
            let path = std::env::var_os("JUPYTER_PATH").unwrap_or_default();
            let joined = std::env::join_paths(
                std::iter::once(kernels.data_dir.clone()).chain(std::env::split_paths(&path)),
            )
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            command.env("JUPYTER_PATH", joined);
            for name in &kernels.only {
                command.arg(format!("--KernelSpecManager.allowed_kernelspecs={name}"));
            }
        }
        // Its `jupyter-server` and its kernels' Python live beside it.
        if let Some(bin) = bin_dir {
            let path = std::env::var_os("PATH").unwrap_or_default();
            let joined =
                std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&path)))
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            command.env("PATH", joined);
        }
        tracing::info!(
            "starting an embedded Jupyter Server on {url} (root {})",
            root_dir.display()
        );
        let child = command.spawn().map_err(|source| LaunchError::Spawn {
            command: format!("{} server", jupyter.display()),
            source,
        })?;
        // Our copies of the pipe's write end go with the command, so the forwarder sees the end.
        drop(command);
        std::thread::Builder::new()
            .name("jupyter-output".into())
            .spawn(move || forward_output(output))?;
        Ok(EmbeddedJupyter {
            child,
            url,
            token,
            runtime_dir,
            jupyter,
            collaboration: None,
        })
    }

    /// Waits until the server answers (or exits, or `READY_TIMEOUT` passes). Whether it has
    /// collaboration is asked of its environment meanwhile, so that choosing a notebook backend
    /// needs no probe of a route that is missing without it (a 404 warning in its log).
    pub async fn wait_until_ready(&mut self) -> Result<(), LaunchError> {
        let jupyter = self.jupyter.clone();
        let (ready, collaboration) = tokio::join!(self.answering(), has_collaboration(&jupyter));
        ready?;
        self.collaboration = collaboration;
        self.remove_browser_page();
        Ok(())
    }

    /// Jupyter writes `jpserver-PID-open.html` (0644, token inside) with no setting to prevent
    /// it. The 0700 directory already keeps it from others; we delete it as nothing needs it.
    fn remove_browser_page(&self) {
        if let Some(pid) = self.child.id() {
            let page = self.runtime_dir.join(format!("jpserver-{pid}-open.html"));
            let _ = std::fs::remove_file(page);
        }
    }

    pub fn url(&self) -> &Url {
        &self.url
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    /// Whether its Python has real-time collaboration (`jupyter_server_ydoc`); `None` when that
    /// could not be told (a `jupyter` that is no Python script).
    pub fn has_collaboration(&self) -> Option<bool> {
        self.collaboration
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    async fn answering(&mut self) -> Result<(), LaunchError> {
        let rest = JupyterRest::new(self.url.clone(), Some(self.token.clone()));
        let started = Instant::now();
        let mut delay = Duration::from_millis(50);
        loop {
            if let Some(status) = self.child.try_wait()? {
                return Err(LaunchError::ExitedEarly {
                    status: status.to_string(),
                });
            }
            if rest.status().await.is_ok() {
                tracing::info!(
                    "embedded Jupyter Server ready after {:?}",
                    started.elapsed()
                );
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                return Err(LaunchError::NotReady(READY_TIMEOUT));
            }
            tokio::time::sleep(delay).await;
            delay = (delay * 2).min(Duration::from_millis(250));
        }
    }

    /// Shuts down every kernel of this private server, then the server and its process group.
    pub async fn stop(mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let rest = JupyterRest::new(self.url.clone(), Some(self.token.clone()));
            // Asked through its API, the server stops the way `jupyter server stop` does: its
            // kernels (all at once) and its extensions close before it exits, with no traceback.
            let asked = rest.shutdown_server().await.is_ok();
            let exited = asked
                && tokio::time::timeout(SHUTDOWN_GRACE, self.child.wait())
                    .await
                    .is_ok();
            if let Some(pid) = self.child.id().filter(|_| !exited) {
                let group = Pid::from_raw(pid as i32);
                let _ = killpg(group, Signal::SIGTERM);
                match tokio::time::timeout(STOP_GRACE, self.child.wait()).await {
                    Ok(_) => {}
                    Err(_) => {
                        tracing::warn!("the Jupyter Server ignored SIGTERM; killing it");
                        let _ = killpg(group, Signal::SIGKILL);
                        let _ = self.child.wait().await;
                    }
                }
            }
        }
        let _ = std::fs::remove_dir_all(&self.runtime_dir);
        tracing::info!("embedded Jupyter Server stopped");
    }
}

/// Asks the kernel to send the Jupyter Server SIGTERM when this process dies, however it dies
/// (SIGKILL included): Jupyter then stops its kernels and exits, instead of living on orphaned.
/// The signal follows the thread that spawned it; the server starts Jupyter from its main
/// thread (or a runtime worker), which lives as long as the process.
#[allow(unsafe_code)]
fn stop_with_us(command: &mut Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the child between fork and exec and makes only
    // async-signal-safe system calls (prctl, getppid); it allocates nothing.
    unsafe {
        command.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGTERM).map_err(std::io::Error::from)?;
            // We died between the fork and the prctl: nobody would ever signal it.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other("the server that started it is gone"));
            }
            Ok(())
        });
    }
}

/// Copies the Jupyter Server's output (and its kernels') to our stderr line by line, so its lines
/// never split ours. A failed write (the client reading our stderr is gone) drops the line: the
/// pipe keeps draining, and Jupyter never blocks on a reader that left.
fn forward_output(output: std::io::PipeReader) {
    let mut lines = std::io::BufReader::new(output);
    let mut line = Vec::new();
    loop {
        line.clear();
        match lines.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {
                let _ = std::io::stderr().write_all(&line);
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Whether the Python running a `jupyter` script can import jupyter-collaboration's server
/// extension, the way `runtime/serve` tells which backend `auto` picks.
async fn has_collaboration(jupyter: &Path) -> Option<bool> {
    let script = tokio::fs::read(jupyter).await.ok()?;
    let first = script.split(|b| *b == b'\n').next()?;
    let python = std::str::from_utf8(first.strip_prefix(b"#!")?)
        .ok()?
        .split_whitespace()
        .next()?;
    let check = Command::new(python)
        .args(["-c", "import jupyter_server_ydoc"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .status();
    let status = tokio::time::timeout(Duration::from_secs(30), check)
        .await
        .ok()?
        .ok()?;
    Some(status.success())
}

fn free_loopback_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}
