//! What every request sees: the settings, the Jupyter Server in use and the tools.

use std::sync::{Arc, RwLock};

use crate::capabilities::Registry;
use crate::config::Config;
use crate::jupyter::Jupyter;
use crate::jupyter::rest::JupyterRest;
use crate::notebooks::Notebooks;
use crate::tools::ToolRegistry;

pub struct ServerState {
    pub config: Config,
    /// Replaced as a whole by `connect_to_jupyter`; calls in flight keep the one they started with.
    jupyter: RwLock<Arc<Jupyter>>,
    pub tools: ToolRegistry,
    pub notebooks: Notebooks,
    pub capabilities: Registry,
    pub hooks: Arc<crate::hooks::Hooks>,
}

impl ServerState {
    pub fn new(
        config: Config,
        jupyter: Jupyter,
        tools: ToolRegistry,
        capabilities: Registry,
        hooks: Arc<crate::hooks::Hooks>,
    ) -> Arc<Self> {
        Arc::new(ServerState {
            config,
            jupyter: RwLock::new(Arc::new(jupyter)),
            tools,
            notebooks: Notebooks::default(),
            capabilities,
            hooks,
        })
    }

    pub fn jupyter(&self) -> Arc<Jupyter> {
        self.jupyter.read().expect("jupyter lock").clone()
    }

    /// The server holding notebooks: `--document-url` if given, else the kernels' server.
    pub fn documents_rest(&self) -> JupyterRest {
        match &self.config.documents {
            Some((url, auth)) => JupyterRest::with_auth(url.clone(), auth.clone()),
            None => self.jupyter().rest().clone(),
        }
    }

    /// Points the server at another Jupyter Server; returns the previous one to be shut down.
    pub fn replace_jupyter(&self, jupyter: Jupyter) -> Arc<Jupyter> {
        std::mem::replace(
            &mut *self.jupyter.write().expect("jupyter lock"),
            Arc::new(jupyter),
        )
    }
}
