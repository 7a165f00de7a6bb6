//! Kernels, kernelspecs and sessions routes.

use std::time::Duration;

use reqwest::Method;

use super::{JupyterRest, KernelModel, KernelSpecs, RestError, SessionModel, Subject};

/// How kernels are started: what their start requests carry and how long a start may take (a
/// gateway on a cluster answers once the kernel's pod is scheduled and its image pulled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelStart {
    /// `--kernel-start-timeout`: for the start request, then for the kernel's first answer.
    pub timeout: Duration,
    /// `--kernel-env`: the `env` of start requests (how a gateway is told `KERNEL_USERNAME`,
    /// `KERNEL_NAMESPACE`, `KERNEL_IMAGE`…). Values may be secrets: never logged.
    pub env: Vec<(String, String)>,
}

impl Default for KernelStart {
    fn default() -> Self {
        KernelStart {
            timeout: Duration::from_secs(300),
            env: Vec::new(),
        }
    }
}

impl JupyterRest {
    pub async fn list_kernels(&self) -> Result<Vec<KernelModel>, RestError> {
        self.get(&["api", "kernels"], Subject::Server).await
    }

    pub async fn get_kernel(&self, id: &str) -> Result<KernelModel, RestError> {
        let subject = Subject::Kernel(id.to_owned());
        self.get(&["api", "kernels", id], subject).await
    }

    /// Starts a kernel of the given spec (the server's default when `None`), as `start` says.
    pub async fn start_kernel(
        &self,
        spec_name: Option<&str>,
        start: &KernelStart,
    ) -> Result<KernelModel, RestError> {
        let mut body = serde_json::Map::new();
        if let Some(name) = spec_name {
            body.insert("name".into(), name.into());
        }
        if !start.env.is_empty() {
            let env = start.env.iter().map(|(k, v)| (k.clone(), v.clone().into()));
            body.insert("env".into(), serde_json::Map::from_iter(env).into());
        }
        let subject = Subject::NewKernel(spec_name.map(str::to_owned));
        let url = self.endpoint(&["api", "kernels"])?;
        let text = self
            .send_timed(
                Method::POST,
                url,
                Some(body.into()),
                subject.clone(),
                Some(start.timeout),
            )
            .await?;
        serde_json::from_str(&text).map_err(|e| RestError::Decode {
            subject,
            reason: e.to_string(),
        })
    }

    pub async fn delete_kernel(&self, id: &str) -> Result<(), RestError> {
        let subject = Subject::Kernel(id.to_owned());
        self.send(
            Method::DELETE,
            self.endpoint(&["api", "kernels", id])?,
            None,
            subject,
        )
        .await
        .map(drop)
    }

    pub async fn interrupt_kernel(&self, id: &str) -> Result<(), RestError> {
        let subject = Subject::Kernel(id.to_owned());
        let url = self.endpoint(&["api", "kernels", id, "interrupt"])?;
        self.send(Method::POST, url, None, subject).await.map(drop)
    }

    pub async fn restart_kernel(&self, id: &str) -> Result<KernelModel, RestError> {
        let subject = Subject::Kernel(id.to_owned());
        let url = self.endpoint(&["api", "kernels", id, "restart"])?;
        self.json(Method::POST, url, None, subject).await
    }

    pub async fn kernelspecs(&self) -> Result<KernelSpecs, RestError> {
        self.get(&["api", "kernelspecs"], Subject::Server).await
    }

    pub async fn list_sessions(&self) -> Result<Vec<SessionModel>, RestError> {
        self.get(&["api", "sessions"], Subject::Server).await
    }

    /// Creates a notebook session for `path` bound to a running kernel.
    pub async fn create_session(
        &self,
        path: &str,
        kernel_id: &str,
    ) -> Result<SessionModel, RestError> {
        let name = path.rsplit('/').next().unwrap_or(path);
        let body = serde_json::json!({
            "path": path, "name": name, "type": "notebook", "kernel": { "id": kernel_id },
        });
        self.json(
            Method::POST,
            self.endpoint(&["api", "sessions"])?,
            Some(body),
            Subject::Path(path.to_owned()),
        )
        .await
    }

    pub async fn delete_session(&self, id: &str) -> Result<(), RestError> {
        let url = self.endpoint(&["api", "sessions", id])?;
        self.send(Method::DELETE, url, None, Subject::Server)
            .await
            .map(drop)
    }
}
