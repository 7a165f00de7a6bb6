//! `compile`'s view of the guests: the config file's entries or the paths given.

use super::file::FileConfig;
use super::{CompileArgs, ConfigError, ExtensionConfig, WasmConfig};

impl CompileArgs {
    /// The guests to compile and where their compiled forms go, as the server would see them.
    pub fn resolve(self) -> Result<WasmConfig, ConfigError> {
        let file = match &self.config {
            Some(path) => FileConfig::read(path)?,
            None => FileConfig::default(),
        };
        let extensions = if self.paths.is_empty() {
            file.extensions
        } else {
            self.paths
                .into_iter()
                .map(ExtensionConfig::with_defaults)
                .collect()
        };
        Ok(WasmConfig {
            cache_dir: file.cache_dir,
            extensions,
            sources: file.sources,
            secrets: None,
            grant_prompts: file.grant_prompts,
        })
    }
}
