//! Kernels, kernelspecs and sessions routes.

use reqwest::Method;

use super::{JupyterRest, KernelModel, KernelSpecs, RestError, SessionModel, Subject};

impl JupyterRest {
    pub async fn list_kernels(&self) -> Result<Vec<KernelModel>, RestError> {
        self.get(&["api", "kernels"], Subject::Server).await
    }

    pub async fn get_kernel(&self, id: &str) -> Result<KernelModel, RestError> {
        let subject = Subject::Kernel(id.to_owned());
        self.get(&["api", "kernels", id], subject).await
    }

    /// Starts a kernel of the given spec (the server's default when `None`).
    pub async fn start_kernel(&self, spec_name: Option<&str>) -> Result<KernelModel, RestError> {
        let body = match spec_name {
            Some(name) => serde_json::json!({ "name": name }),
            None => serde_json::json!({}),
        };
        self.json(
            Method::POST,
            self.endpoint(&["api", "kernels"])?,
            Some(body),
            Subject::Server,
        )
        .await
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
