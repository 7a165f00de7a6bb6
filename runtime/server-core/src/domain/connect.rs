//! Switching Jupyter Servers: the new one is checked before it is used, the notebooks in use
//! (which belong to the old one) are forgotten, and the kernels we started there are stopped.

use url::Url;

use super::{Domain, Error};
use jupyter_client::Jupyter;
use jupyter_client::rest::JupyterRest;

impl Domain {
    /// Checks a Jupyter Server and makes it the one in use; returns the Python server's text.
    pub async fn connect(&self, url: &str, token: Option<String>) -> Result<String, Error> {
        if self
            .capabilities
            .enabled(crate::capabilities::KERNEL_SANDBOX)
        {
            return Err(Error::Failed(
                "kernel.sandbox is on: this server's kernels stay on the Jupyter Server it \
                 started with, where they are confined; another one could run code unconfined. \
                 To switch Jupyter Servers, restart the server with kernel.sandbox off (or with \
                 --jupyter-url naming a Jupyter that has the sandboxed kernelspec)"
                    .into(),
            ));
        }
        let url = Url::parse(url)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https"))
            .ok_or_else(|| {
                // Not echoed: a URL can carry a password or token.
                Error::InvalidArguments(
                    "the jupyter_url is not an http:// or https:// URL of a Jupyter Server".into(),
                )
            })?;
        let token = token
            .filter(|t| !matches!(t.trim().to_ascii_lowercase().as_str(), "" | "none" | "null"));
        let rest = JupyterRest::new(url.clone(), token.clone());
        let shown = rest.shown_url();
        rest.status().await.map_err(|e| {
            Error::Failed(format!("Failed to connect to Jupyter server {shown}: {e}").into())
        })?;
        self.switch_to(Jupyter::new(rest, self.hooks.clone()));
        let auth = if token.is_some() {
            "Token-based"
        } else {
            "None (anonymous)"
        };
        Ok(format!(
            "Successfully connected to Jupyter server: {shown}\nAuthentication: {auth}"
        ))
    }

    /// Makes `jupyter` the server in use: the notebooks in use (which belong to the previous
    /// one) are forgotten and the kernels we started there are stopped in the background.
    pub fn switch_to(&self, jupyter: Jupyter) {
        let previous = self.replace_jupyter(jupyter);
        self.notebooks.clear();
        tokio::spawn(async move { previous.shutdown().await });
    }
}
