//! Egress decisions, and kernels stopped at their memory cap, told to the servers that own the
//! kernels. A launcher runs under whichever
//! Jupyter Server started it, not under our server, so each decision goes as one datagram to
//! every socket in the sandbox's `events/` directory: one per running server with
//! `kernel.sandbox` on, each keeping the events of the kernels it knows and ignoring the rest.
//! The directory is hidden from kernels (see [`hidden`]), so a kernel cannot forge an event.

use std::os::fd::AsRawFd as _;
use std::os::unix::fs::DirBuilderExt as _;
use std::os::unix::net::UnixDatagram as StdDatagram;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::SandboxError;

/// One connection the egress proxy decided on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressEvent {
    pub kernel: String,
    /// The notebook the kernel runs for, when Jupyter said (`JPY_SESSION_NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notebook: Option<String>,
    pub host: String,
    pub port: u16,
    /// Why it was refused; `None` when it was let through.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

/// A kernel the launcher saw killed at its memory cap (`[kernel_sandbox] memory_mb`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelStopped {
    pub kernel: String,
    pub memory_cap_mb: u64,
}

/// A connection to a host not listed, held until the server that owns the kernel says whether
/// the person allowed it (`kernel.egress-prompts`). The answer goes to `reply`, a socket of the
/// launcher's in the same directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EgressAsk {
    pub kernel: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notebook: Option<String>,
    pub host: String,
    pub port: u16,
    pub ask: u64,
    pub reply: String,
}

/// A server's answer to an [`EgressAsk`]: first `allowed: None` (taken: the person is being
/// asked), then the decision and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AskAnswer {
    pub ask: u64,
    pub allowed: Option<bool>,
    #[serde(default)]
    pub why: String,
}

/// What a launcher tells the servers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum SandboxEvent {
    // First: an ask carries every field an egress event does, and more.
    Ask(EgressAsk),
    Egress(EgressEvent),
    Stopped(KernelStopped),
}

/// How long a launcher waits for any server to take a question.
const TAKEN_WITHIN: std::time::Duration = std::time::Duration::from_secs(3);
/// The longest a held connection waits for the person (the server answers at the call's
/// deadline; this only bounds a server that went away meanwhile).
const DECIDED_WITHIN: std::time::Duration = std::time::Duration::from_secs(3600);

/// Answers `answer` to the launcher's socket `reply` (a name in the events directory).
pub fn answer(place: &Path, reply: &str, answer: &AskAnswer) {
    if reply.contains('/') || !reply.ends_with(".reply") {
        return;
    }
    let dir = directory(place);
    let (Ok(handle), Ok(datagram), Ok(socket)) = (
        std::fs::File::open(&dir),
        serde_json::to_vec(answer),
        StdDatagram::unbound(),
    ) else {
        return;
    };
    let _ = socket.send_to(&datagram, short(&handle, reply.as_ref()));
}

/// The launcher's side: puts each question to the servers listening and waits for the one that
/// owns the kernel.
pub struct ServerAsker {
    pub place: PathBuf,
    pub kernel: String,
    pub notebook: Option<String>,
    next: std::sync::atomic::AtomicU64,
}

impl ServerAsker {
    pub fn new(place: PathBuf, kernel: String, notebook: Option<String>) -> Self {
        ServerAsker {
            place,
            kernel,
            notebook,
            next: Default::default(),
        }
    }

    async fn put(&self, host: &str, port: u16) -> Result<String, String> {
        let ask = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = directory(&self.place);
        let name = format!("{}-{ask}.reply", std::process::id());
        let handle = std::fs::File::open(&dir).map_err(|e| format!("no server to ask ({e})"))?;
        let socket = tokio::net::UnixDatagram::bind(short(&handle, name.as_ref()))
            .map_err(|e| format!("the person could not be asked ({e})"))?;
        struct Remove(PathBuf);
        impl Drop for Remove {
            fn drop(&mut self) {
                let _ = std::fs::remove_file(&self.0);
            }
        }
        let _remove = Remove(dir.join(&name));
        announce(
            &self.place,
            &SandboxEvent::Ask(EgressAsk {
                kernel: self.kernel.clone(),
                notebook: self.notebook.clone(),
                host: host.to_owned(),
                port,
                ask,
                reply: name,
            }),
        );
        let mut buffer = vec![0u8; 8192];
        let mut wait = TAKEN_WITHIN;
        loop {
            let read = match tokio::time::timeout(wait, socket.recv(&mut buffer)).await {
                Ok(Ok(read)) => read,
                Ok(Err(e)) => return Err(format!("the question was lost ({e})")),
                Err(_) if wait == TAKEN_WITHIN => {
                    return Err("no server with kernel.egress-prompts on runs this kernel, so                                 nobody was asked"
                        .into());
                }
                Err(_) => return Err("no answer came".into()),
            };
            let Ok(answer) = serde_json::from_slice::<AskAnswer>(&buffer[..read]) else {
                continue;
            };
            match answer.allowed {
                _ if answer.ask != ask => {}
                None => wait = DECIDED_WITHIN,
                Some(true) => return Ok(answer.why),
                Some(false) => return Err(answer.why),
            }
        }
    }
}

impl egress::proxy::Asker for ServerAsker {
    fn ask(
        &self,
        host: &str,
        port: u16,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + '_>>
    {
        let host = host.to_owned();
        Box::pin(async move { self.put(&host, port).await })
    }
}

/// The directory of the servers' event sockets, inside the sandbox's place.
pub fn directory(place: &Path) -> PathBuf {
    place.join("events")
}

/// The parts of the sandbox's place no kernel may see: the servers' policies and kernelspecs,
/// and their event sockets.
pub fn hidden(place: &Path) -> [PathBuf; 2] {
    [place.join("servers"), directory(place)]
}

/// Sends `event` to every server listening (best effort: a server gone since is skipped).
pub fn announce(place: &Path, event: &SandboxEvent) {
    let dir = directory(place);
    let (Ok(entries), Ok(handle)) = (std::fs::read_dir(&dir), std::fs::File::open(&dir)) else {
        return;
    };
    let Ok(datagram) = serde_json::to_vec(event) else {
        return;
    };
    let Ok(socket) = StdDatagram::unbound() else {
        return;
    };
    let _ = socket.set_nonblocking(true);
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_some_and(|ext| ext == "sock") {
            let _ = socket.send_to(&datagram, short(&handle, &entry.file_name()));
        }
    }
}

/// `name` in the directory open as `dir`, by a path that fits a socket address whatever the
/// directory's own length (a UNIX socket path holds at most 107 bytes; a cache under a deep home
/// directory is longer).
fn short(dir: &std::fs::File, name: &std::ffi::OsStr) -> PathBuf {
    Path::new(&format!("/proc/self/fd/{}", dir.as_raw_fd())).join(name)
}

/// A server's socket for egress events; removed when dropped.
#[derive(Debug)]
pub struct EventSocket {
    socket: tokio::net::UnixDatagram,
    path: PathBuf,
}

impl EventSocket {
    /// Listens at `events/<pid>.sock` in `place` (the directory made 0700 if new). Must be
    /// called inside a Tokio runtime.
    pub fn bind(place: &Path) -> Result<Self, SandboxError> {
        let dir = directory(place);
        let failed = |path: &Path, e: std::io::Error| SandboxError::Place {
            path: path.to_owned(),
            why: e.to_string(),
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .map_err(|e| failed(&dir, e))?;
        let name = format!("{}.sock", std::process::id());
        let path = dir.join(&name);
        // Left by an earlier process of the same pid that was killed.
        let _ = std::fs::remove_file(&path);
        let handle = std::fs::File::open(&dir).map_err(|e| failed(&dir, e))?;
        let socket = tokio::net::UnixDatagram::bind(short(&handle, name.as_ref()))
            .map_err(|e| failed(&path, e))?;
        sweep_stale(&handle, &dir, &path);
        Ok(EventSocket { socket, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next event; `None` only when the socket fails.
    pub async fn next(&self) -> Option<SandboxEvent> {
        let mut buffer = vec![0u8; 8192];
        loop {
            let read = self.socket.recv(&mut buffer).await.ok()?;
            if let Ok(event) = serde_json::from_slice(&buffer[..read]) {
                return Some(event);
            }
        }
    }
}

impl Drop for EventSocket {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Removes the sockets of servers that were killed before they could (nobody answers there).
fn sweep_stale(handle: &std::fs::File, dir: &Path, ours: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let Ok(probe) = StdDatagram::unbound() else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path != ours
            && path.extension().is_some_and(|ext| ext == "sock")
            && probe
                .connect(short(handle, &entry.file_name()))
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
        {
            let _ = std::fs::remove_file(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_announced_event_reaches_every_listening_server() {
        // Longer than a socket address can hold, as a cache under a deep home can be.
        let place = std::env::temp_dir()
            .join(format!("jmcp-events-{}", std::process::id()))
            .join("a-directory-name-long-enough".repeat(4));
        let _ = std::fs::remove_dir_all(&place);
        let socket = EventSocket::bind(&place).expect("bind");
        // A socket file nobody listens on any more is swept at the next bind, not sent to.
        let stale = directory(&place).join("1.sock");
        let dir = std::fs::File::open(directory(&place)).expect("events directory");
        drop(StdDatagram::bind(short(&dir, "1.sock".as_ref())).expect("stale"));
        let event = SandboxEvent::Egress(EgressEvent {
            kernel: "k1".into(),
            notebook: Some("a.ipynb".into()),
            host: "example.org".into(),
            port: 443,
            refused: Some("not in hosts".into()),
        });
        announce(&place, &event);
        assert_eq!(socket.next().await, Some(event));
        let stopped = SandboxEvent::Stopped(KernelStopped {
            kernel: "k1".into(),
            memory_cap_mb: 256,
        });
        announce(&place, &stopped);
        assert_eq!(socket.next().await, Some(stopped));
        let again = EventSocket::bind(&place).expect("bind again");
        assert!(!stale.exists(), "a dead server's socket is swept");
        drop(again);
        drop(socket);
        assert!(
            !directory(&place)
                .join(format!("{}.sock", std::process::id()))
                .exists()
        );
        let _ = std::fs::remove_dir_all(place.parent().expect("parent"));
    }
}
