//! The launcher's record of its kernel's egress: each refusal on its stderr (the Jupyter
//! Server's log), each decision told to the servers listening in the sandbox's place, and the
//! count of allowed connections when the kernel ends.

use std::path::PathBuf;

/// Refused and allowed egress: on the launcher's stderr (the Jupyter Server's log), and told
/// to the servers listening in the sandbox's place (the one that owns the kernel logs it and
/// notes it on the running execution's span).
pub(crate) struct EgressLog {
    place: PathBuf,
    kernel: String,
    notebook: Option<String>,
    allowed: std::sync::atomic::AtomicU64,
}

impl Drop for EgressLog {
    fn drop(&mut self) {
        let allowed = self.allowed.load(std::sync::atomic::Ordering::Relaxed);
        if allowed > 0 {
            eprintln!(
                "jupyter-mcp-server kernel sandbox: kernel {} made {allowed} allowed egress \
                 connection(s)",
                self.kernel
            );
        }
    }
}

impl EgressLog {
    /// For kernel `kernel` (of `notebook`, when Jupyter said), telling the servers in `place`.
    pub(crate) fn new(place: PathBuf, kernel: String, notebook: Option<String>) -> Self {
        EgressLog {
            place,
            kernel,
            notebook,
            allowed: Default::default(),
        }
    }

    fn announce(&self, host: &str, port: u16, refused: Option<&str>) {
        let event = crate::events::EgressEvent {
            kernel: self.kernel.clone(),
            notebook: self.notebook.clone(),
            host: host.to_owned(),
            port,
            refused: refused.map(str::to_owned),
        };
        crate::events::announce(&self.place, &crate::events::SandboxEvent::Egress(event));
    }
}

impl egress::proxy::EgressEvents for EgressLog {
    fn allowed(&self, host: &str, port: u16) {
        self.allowed
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.announce(host, port, None);
    }

    fn refused(&self, host: &str, port: u16, why: &str) {
        let notebook = self.notebook.as_deref().unwrap_or("-");
        eprintln!(
            "jupyter-mcp-server kernel sandbox: egress refused: host={host} port={port} \
             kernel={} notebook={notebook}: {why}",
            self.kernel
        );
        self.announce(host, port, Some(why));
    }
}
