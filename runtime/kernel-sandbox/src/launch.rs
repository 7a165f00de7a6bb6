//! The launcher a sandboxed kernelspec runs: `jupyter-mcp-server kernel-sandbox run --policy P
//! --connection-file F -- KERNEL ARGV…`. Three processes, all in the process group Jupyter
//! signals (so an interrupt or a kill reaches the kernel as it would unsandboxed):
//!
//! - the **outer** one (the pid Jupyter started) stays outside every namespace. It listens on the
//!   connection file's ports where Jupyter expects the kernel and bridges each connection into
//!   the sandbox, and it serves the egress proxy, which connects out on the kernel's behalf.
//! - the **inner** one enters the namespaces ([`confine::enter_namespaces`]), then only hands the
//!   outer one sockets made inside the sandbox's network (the proxy's listener, a connection to
//!   each kernel port) and waits for the kernel.
//! - the **kernel**, the inner one's child: Landlock, capabilities and seccomp on itself
//!   ([`confine::restrict_self`]), then `exec`.
//!
//! Each dies with its parent (`PR_SET_PDEATHSIG`), so a killed launcher leaves nothing behind.
//! The inner one joins the kernel's memory cgroup before it enters the namespaces, and the
//! kernel is the first process of its PID namespace: whatever it started (a server, a `nohup`
//! job, a double-forked daemon) is killed by Linux when it ends, however it ends.

use std::ffi::{CString, OsString};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::{AsFd as _, AsRawFd as _};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nix::sys::signal::Signal;
use nix::sys::wait::waitpid;
use nix::unistd::{ForkResult, Pid};
use serde_json::Value;

use crate::caps::KernelCaps;
use crate::channel::{bridge, control_pair, exit_code, recv_fd, send_fd, serve_sockets};
use crate::confine::{self, Failed};
use crate::egress_log::EgressLog;
pub(crate) use crate::layout::Layout;
use crate::policy::Policy;
use crate::{SandboxError, sys};

/// The signals Jupyter sends the process group, meant for the kernel alone.
const FOR_THE_KERNEL: [Signal; 4] = [
    Signal::SIGINT,
    Signal::SIGTERM,
    Signal::SIGHUP,
    Signal::SIGQUIT,
];

/// The connection file's port keys.
const CHANNELS: [&str; 5] = [
    "shell_port",
    "iopub_port",
    "stdin_port",
    "control_port",
    "hb_port",
];

/// Set (to any value) to make this machine count as unable to enforce the sandbox: the way to
/// see the refusal where it can.
pub const FORCE_UNAVAILABLE: &str = "JUPYTER_MCP_KERNEL_SANDBOX_UNAVAILABLE";

/// Refuses when [`FORCE_UNAVAILABLE`] is set.
pub(crate) fn forced_off() -> Result<(), SandboxError> {
    match std::env::var_os(FORCE_UNAVAILABLE) {
        Some(reason) => Err(SandboxError::Unavailable(format!(
            "forced off by {FORCE_UNAVAILABLE}={}",
            reason.to_string_lossy()
        ))),
        None => Ok(()),
    }
}

/// Runs a kernel in the sandbox; returns the exit code to leave with.
pub fn run(policy_file: &Path, connection_file: &Path, argv: &[OsString]) -> i32 {
    match prepare(policy_file, connection_file, argv) {
        Ok(prepared) => prepared.start(),
        Err(error) => {
            eprintln!("jupyter-mcp-server kernel sandbox: {error}");
            1
        }
    }
}

/// Everything the launcher needs, read and made before it forks.
struct Prepared {
    policy: Policy,
    layout: Layout,
    kernel_id: String,
    /// Where Jupyter expects the kernel (the connection file's `ip`) and its ports.
    outside_ip: IpAddr,
    ports: Vec<u16>,
    argv: Vec<CString>,
    /// The egress proxy's policy, re-read when the policy file changes.
    proxy: Arc<crate::proxied::FromPolicyFile>,
    /// Where the kernel starts when Jupyter started it in a place the sandbox hides (a kernel
    /// started without a notebook runs in the Jupyter Server's working directory).
    workdir: Option<PathBuf>,
    /// Its cgroups are removed when the launcher ends.
    caps: KernelCaps,
}

fn prepare(
    policy_file: &Path,
    connection_file: &Path,
    argv: &[OsString],
) -> Result<Prepared, SandboxError> {
    forced_off()?;
    let mut policy = Policy::load(policy_file)?;
    let connection = read_connection(connection_file)?;
    let transport = connection["transport"].as_str().unwrap_or("tcp");
    if transport != "tcp" {
        return Err(SandboxError::Connection(format!(
            "transport '{transport}' is not supported in the sandbox; Jupyter must use tcp"
        )));
    }
    let outside_ip: IpAddr = connection["ip"]
        .as_str()
        .unwrap_or("127.0.0.1")
        .parse()
        .map_err(|e| SandboxError::Connection(format!("its ip: {e}")))?;
    let ports = CHANNELS
        .iter()
        .map(|key| {
            connection[*key]
                .as_u64()
                .and_then(|port| u16::try_from(port).ok())
                .filter(|port| *port != 0)
                .ok_or_else(|| SandboxError::Connection(format!("no {key}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let kernel_id = connection_file
        .file_stem()
        .and_then(|stem| stem.to_str())
        .map(|stem| stem.trim_start_matches("kernel-").to_owned())
        .filter(|id| !id.is_empty() && !id.contains('/'))
        .unwrap_or_else(|| std::process::id().to_string());
    let mut layout = Layout::create(&policy, &policy.private(&kernel_id))?;
    layout.jupyter_runtime = connection_file
        .parent()
        .map(Path::to_owned)
        .filter(|dir| !dir.as_os_str().is_empty() && !layout.private.starts_with(dir));
    // The kernel reads its own copy, bound to loopback inside its network namespace.
    let mut inside = connection.clone();
    inside["ip"] = Value::from("127.0.0.1");
    let copy = layout.private.join("connection.json");
    std::fs::write(&copy, inside.to_string()).map_err(|e| SandboxError::Place {
        path: copy.clone(),
        why: e.to_string(),
    })?;
    let argv = argv
        .iter()
        .map(|arg| {
            let arg = if Path::new(arg) == connection_file {
                copy.as_os_str()
            } else {
                arg.as_os_str()
            };
            CString::new(arg.as_bytes())
                .map_err(|_| SandboxError::Connection("a kernel argument holds a NUL".into()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    if argv.is_empty() {
        return Err(SandboxError::Connection(
            "no kernel command after --".into(),
        ));
    }
    policy.never_ports.extend(parent_listening_ports());
    let proxy = Arc::new(
        crate::proxied::FromPolicyFile::new(policy_file.to_owned(), &policy, kernel_id.clone())
            .map_err(SandboxError::Hosts)?,
    );
    let hidden = layout.deny_read(&policy);
    let workdir = std::env::current_dir()
        .ok()
        .filter(|cwd| hidden.iter().any(|path| cwd.starts_with(path)))
        .and_then(|_| policy.writable.first().cloned());
    let caps = KernelCaps::create(
        &format!("jupyter-mcp-kernel-{kernel_id}-{}", std::process::id()),
        policy.memory_mb,
        policy.processes,
    );
    Ok(Prepared {
        caps,
        workdir,
        policy,
        layout,
        kernel_id,
        outside_ip,
        ports,
        argv,
        proxy,
    })
}

fn read_connection(path: &Path) -> Result<Value, SandboxError> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| SandboxError::Connection(format!("{}: {e}", path.display())))?;
    serde_json::from_str(&text)
        .map_err(|e| SandboxError::Connection(format!("{}: {e}", path.display())))
}

/// The TCP ports the process that started us (the Jupyter Server) listens on: never to be
/// reached through the proxy, whatever the host list says.
fn parent_listening_ports() -> Vec<u16> {
    let parent = std::os::unix::process::parent_id();
    let mut inodes = std::collections::HashSet::new();
    if let Ok(entries) = std::fs::read_dir(format!("/proc/{parent}/fd")) {
        for entry in entries.flatten() {
            if let Ok(target) = std::fs::read_link(entry.path())
                && let Some(inode) = target
                    .to_str()
                    .and_then(|t| t.strip_prefix("socket:["))
                    .and_then(|t| t.strip_suffix(']'))
            {
                inodes.insert(inode.to_owned());
            }
        }
    }
    let mut ports = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            // local_address, state 0A (LISTEN), inode
            if fields.len() > 9
                && fields[3] == "0A"
                && inodes.contains(fields[9])
                && let Some(port) = fields[1]
                    .rsplit_once(':')
                    .and_then(|(_, hex)| u16::from_str_radix(hex, 16).ok())
            {
                ports.push(port);
            }
        }
    }
    ports
}

impl Prepared {
    fn start(self) -> i32 {
        sys::ignore(&FOR_THE_KERNEL);
        let (outer_end, inner_end) = match control_pair() {
            Ok(pair) => pair,
            Err(error) => {
                eprintln!("jupyter-mcp-server kernel sandbox: {error}");
                return 1;
            }
        };
        let outer_pid = std::process::id();
        match sys::fork_single_threaded() {
            Err(error) => {
                eprintln!("jupyter-mcp-server kernel sandbox: fork: {error}");
                1
            }
            Ok(ForkResult::Child) => {
                drop(outer_end);
                std::process::exit(self.inner(inner_end, outer_pid));
            }
            Ok(ForkResult::Parent { child }) => {
                drop(inner_end);
                let code = self.outer(outer_end, child);
                let _ = std::fs::remove_dir_all(&self.layout.private);
                code
            }
        }
    }

    /// Inside the namespaces: the proxy's listener handed out, the kernel started, then
    /// sockets made on request until the kernel ends.
    fn inner(&self, control: UnixDatagram, outer_pid: u32) -> i32 {
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
        if std::os::unix::process::parent_id() != outer_pid {
            return 1;
        }
        let refuse = |failed: Failed| {
            let _ = control.send(format!("E{failed}").as_bytes());
            1
        };
        if let Err(error) = self.caps.join() {
            return refuse(Failed {
                step: "joining the kernel's cgroups",
                error: error.to_string(),
            });
        }
        if let Err(failed) = confine::enter_namespaces(
            &self.layout.deny_read(&self.policy),
            &self.layout.empty_file,
        ) {
            return refuse(failed);
        }
        let listener = match TcpListener::bind((Ipv4Addr::LOCALHOST, 0)) {
            Ok(listener) => listener,
            Err(error) => {
                return refuse(Failed {
                    step: "listening for the proxy",
                    error: error.to_string(),
                });
            }
        };
        let proxy_port = listener.local_addr().map(|a| a.port()).unwrap_or(0);
        // Its write end lives as long as this process: how the kernel, which cannot see its
        // parent from inside its PID namespace, knows it is still there.
        let (parent_alive, alive_while_open) =
            match nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC) {
                Ok(pipe) => pipe,
                Err(error) => {
                    return refuse(Failed {
                        step: "making a pipe",
                        error: error.to_string(),
                    });
                }
            };
        let kernel = match sys::fork_single_threaded() {
            Ok(ForkResult::Child) => {
                drop(listener);
                drop(control);
                drop(alive_while_open);
                self.exec_kernel(proxy_port, parent_alive)
            }
            Ok(ForkResult::Parent { child }) => {
                drop(parent_alive);
                std::mem::forget(alive_while_open);
                child
            }
            Err(error) => {
                return refuse(Failed {
                    step: "fork",
                    error: error.to_string(),
                });
            }
        };
        if send_fd(&control, b"O", listener.as_fd().as_raw_fd()).is_err() {
            let _ = nix::sys::signal::kill(kernel, Signal::SIGKILL);
            return 1;
        }
        drop(listener);
        serve_sockets(&control, kernel)
    }

    /// The kernel's process: confined, then replaced by the kernel.
    fn exec_kernel(&self, proxy_port: u16, parent_alive: std::os::fd::OwnedFd) -> ! {
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
        if sys::closed_by_writer(&parent_alive) {
            // The inner process died before the death signal was set.
            std::process::exit(1);
        }
        drop(parent_alive);
        sys::default_action(&FOR_THE_KERNEL);
        let proxy = format!("http://127.0.0.1:{proxy_port}");
        let site_packages = self.policy.state("site-packages");
        let python_path = match std::env::var_os("PYTHONPATH") {
            Some(existing) if !existing.is_empty() => {
                let mut joined = site_packages.clone().into_os_string();
                joined.push(":");
                joined.push(existing);
                joined
            }
            _ => site_packages.clone().into_os_string(),
        };
        // Passed to exec whole; this process's own environment is left alone.
        let environment: Vec<(&str, OsString)> = vec![
            ("TMPDIR", self.layout.tmp.clone().into()),
            ("JUPYTER_RUNTIME_DIR", self.layout.runtime.clone().into()),
            ("IPYTHONDIR", self.policy.state("ipython").into()),
            ("MPLCONFIGDIR", self.policy.state("matplotlib").into()),
            ("XDG_CACHE_HOME", self.policy.state("cache").into()),
            (
                "PIP_CACHE_DIR",
                self.policy.state("cache").join("pip").into(),
            ),
            // `%pip install` lands where the kernel may write, and is importable at once.
            ("PIP_TARGET", site_packages.into()),
            ("PYTHONPATH", python_path),
            ("HTTP_PROXY", proxy.clone().into()),
            ("HTTPS_PROXY", proxy.clone().into()),
            ("ALL_PROXY", proxy.clone().into()),
            ("http_proxy", proxy.clone().into()),
            ("https_proxy", proxy.clone().into()),
            ("all_proxy", proxy.into()),
            ("JUPYTER_MCP_KERNEL_SANDBOX", "1".into()),
        ];
        // With credentials the proxy answers for their hosts with certificates of the server's
        // authority: every TLS client the kernel runs trusts the bundle that holds it.
        let mut environment = environment;
        if let Some(bundle) = &self.policy.ca_bundle {
            for name in [
                "SSL_CERT_FILE",
                "REQUESTS_CA_BUNDLE",
                "CURL_CA_BUNDLE",
                "PIP_CERT",
                "GIT_SSL_CAINFO",
                "NODE_EXTRA_CA_CERTS",
            ] {
                environment.push((name, bundle.clone().into()));
            }
        }
        let ours: Vec<&str> = environment.iter().map(|(name, _)| *name).collect();
        let mut env: Vec<CString> = std::env::vars_os()
            .filter(|(name, _)| {
                let name = name.to_string_lossy();
                !ours.iter().any(|ours| *ours == name) && !name.eq_ignore_ascii_case("no_proxy")
            })
            .chain(environment.into_iter().map(|(n, v)| (n.into(), v)))
            .filter_map(|(name, value)| {
                let mut pair = name.into_vec();
                pair.push(b'=');
                pair.extend(value.into_vec());
                CString::new(pair).ok()
            })
            .collect();
        env.shrink_to_fit();
        if let Some(dir) = &self.workdir {
            let _ = std::env::set_current_dir(dir);
        }
        if let Err(failed) = confine::own_proc() {
            eprintln!(
                "jupyter-mcp-server kernel sandbox: kernel {} sees the machine's /proc: {failed}",
                self.kernel_id
            );
        }
        let memory = self
            .caps
            .memory_per_process()
            .then(|| self.policy.memory_mb.saturating_mul(1 << 20));
        let processes = self
            .caps
            .processes_by_rlimit()
            .then_some(self.policy.processes);
        if let Err(failed) = confine::cap_processes(processes, memory)
            .and_then(|()| confine::restrict_self(&self.layout.writable(&self.policy)))
        {
            eprintln!(
                "jupyter-mcp-server kernel sandbox: kernel {} not started: {failed}",
                self.kernel_id
            );
            std::process::exit(126);
        }
        let error = nix::unistd::execvpe(&self.argv[0], &self.argv, &env).unwrap_err();
        eprintln!(
            "jupyter-mcp-server kernel sandbox: cannot start {}: {error}",
            self.argv[0].to_string_lossy()
        );
        std::process::exit(127)
    }

    /// Outside: the bridges and the proxy, until the sandbox ends.
    fn outer(&self, control: UnixDatagram, inner: Pid) -> i32 {
        let mut buffer = [0u8; 4096];
        let (said, fd) = match recv_fd(&control, &mut buffer) {
            Ok(got) => got,
            Err(error) => {
                eprintln!("jupyter-mcp-server kernel sandbox: {error}");
                return exit_code(waitpid(inner, None));
            }
        };
        let proxy_listener = match (buffer.first(), fd) {
            (Some(b'O'), Some(fd)) => TcpListener::from(fd),
            _ => {
                let why = String::from_utf8_lossy(&buffer[1..said]).into_owned();
                eprintln!(
                    "jupyter-mcp-server kernel sandbox: kernel {} not started: {why}",
                    self.kernel_id
                );
                let _ = waitpid(inner, None);
                return 1;
            }
        };
        let runtime = match tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
        {
            Ok(runtime) => runtime,
            Err(error) => {
                eprintln!("jupyter-mcp-server kernel sandbox: {error}");
                let _ = nix::sys::signal::kill(inner, Signal::SIGKILL);
                return exit_code(waitpid(inner, None));
            }
        };
        let control = Arc::new(std::sync::Mutex::new(control));
        let code = runtime.block_on(async {
            let _ = proxy_listener.set_nonblocking(true);
            let policy: Arc<dyn egress::proxy::CurrentPolicy> = self.proxy.clone();
            let events: Arc<dyn egress::proxy::EgressEvents> = Arc::new(EgressLog::new(
                self.policy.place.clone(),
                self.kernel_id.clone(),
                std::env::var("JPY_SESSION_NAME").ok(),
            ));
            if let Ok(listener) = tokio::net::TcpListener::from_std(proxy_listener) {
                tokio::spawn(egress::proxy::serve(listener, policy, events));
            }
            for &port in &self.ports {
                let address = SocketAddr::new(self.outside_ip, port);
                match std::net::TcpListener::bind(address) {
                    Ok(listener) => {
                        let _ = listener.set_nonblocking(true);
                        if let Ok(listener) = tokio::net::TcpListener::from_std(listener) {
                            tokio::spawn(bridge(listener, port, control.clone()));
                        }
                    }
                    Err(error) => {
                        eprintln!(
                            "jupyter-mcp-server kernel sandbox: cannot listen on {address} for \
                             kernel {}: {error}",
                            self.kernel_id
                        );
                    }
                }
            }
            let status = tokio::task::spawn_blocking(move || waitpid(inner, None));
            tokio::select! {
                status = status => match status {
                    Ok(status) => exit_code(status),
                    Err(_) => 1,
                },
                () = parent_gone() => {
                    // The Jupyter Server died without stopping its kernel: the sandbox goes too.
                    let _ = nix::sys::signal::kill(inner, Signal::SIGKILL);
                    1
                }
            }
        });
        if self.caps.killed_at_cap() {
            eprintln!(
                "jupyter-mcp-server kernel sandbox: kernel {} was stopped at its memory cap of \
                 {} MB",
                self.kernel_id, self.policy.memory_mb
            );
            crate::events::announce(
                &self.policy.place,
                &crate::events::SandboxEvent::Stopped(crate::events::KernelStopped {
                    kernel: self.kernel_id.clone(),
                    memory_cap_mb: self.policy.memory_mb,
                }),
            );
        }
        code
    }
}

/// Resolves once the process that started the launcher (the Jupyter Server) is gone. Polled, as
/// ipykernel polls its parent: a parent-death signal would follow the Jupyter thread that
/// started us, not the process.
async fn parent_gone() {
    let parent = std::os::unix::process::parent_id();
    loop {
        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        if std::os::unix::process::parent_id() != parent {
            return;
        }
    }
}
