//! What every request sees: the settings, the Jupyter Server in use and the tools.

use std::sync::{Arc, RwLock};

use crate::config::Config;
use crate::jupyter::Jupyter;
use crate::tools::ToolRegistry;

pub struct ServerState {
    pub config: Config,
    /// Replaced as a whole by `connect_to_jupyter`; calls in flight keep the one they started with.
    jupyter: RwLock<Arc<Jupyter>>,
    pub tools: ToolRegistry,
}

impl ServerState {
    pub fn new(config: Config, jupyter: Jupyter, tools: ToolRegistry) -> Arc<Self> {
        Arc::new(ServerState {
            config,
            jupyter: RwLock::new(Arc::new(jupyter)),
            tools,
        })
    }

    pub fn jupyter(&self) -> Arc<Jupyter> {
        self.jupyter.read().expect("jupyter lock").clone()
    }

    /// Points the server at another Jupyter Server; returns the previous one to be shut down.
    pub fn replace_jupyter(&self, jupyter: Jupyter) -> Arc<Jupyter> {
        std::mem::replace(
            &mut *self.jupyter.write().expect("jupyter lock"),
            Arc::new(jupyter),
        )
    }
}
