//! Choosing the kernelspec a notebook runs on: a name is checked against what the Jupyter
//! Server has installed, and refused naming the installed ones.

use serde_json::{Value, json};

use super::{Domain, Error, Step};
use crate::say;

/// An installed kernelspec, as a notebook's metadata records it.
#[derive(Debug, Clone)]
pub struct ChosenSpec {
    pub name: String,
    pub display_name: String,
    pub language: String,
}

impl ChosenSpec {
    /// The notebook metadata `kernelspec` entry.
    pub fn metadata(&self) -> Value {
        json!({
            "display_name": self.display_name,
            "language": self.language,
            "name": self.name,
        })
    }
}

/// The kernels and kernelspecs of a Jupyter Server, as its REST API describes them.
pub use jupyter_client::rest::{KernelModel, KernelSpecs};

/// The kernels running on a Jupyter Server.
pub struct RunningKernels {
    pub kernels: Vec<KernelModel>,
    /// The installed kernelspecs, when they could be read: they only add detail.
    pub specs: Option<KernelSpecs>,
    /// The spare kernels `kernel.prewarm` keeps there, never used yet.
    pub spares: Vec<String>,
}

impl Domain {
    /// The kernelspecs installed on the Jupyter Server (list_kernelspecs).
    pub async fn installed_kernelspecs(&self) -> Result<KernelSpecs, Error> {
        self.jupyter()
            .rest()
            .kernelspecs()
            .await
            .map_err(|e| Error::Failed(format!("Error listing kernelspecs: {e}").into()))
    }

    /// The kernels running on the Jupyter Server (list_kernels).
    pub async fn running_kernels(&self) -> Result<RunningKernels, Error> {
        let jupyter = self.jupyter();
        let rest = jupyter.rest();
        let (kernels, specs) = tokio::join!(rest.list_kernels(), rest.kernelspecs());
        let kernels =
            kernels.map_err(|e| Error::Failed(format!("Error listing kernels: {e}").into()))?;
        Ok(RunningKernels {
            kernels,
            specs: specs.ok(),
            spares: jupyter.spare_ids(),
        })
    }
    /// The installed kernelspec `name`, or an error naming those that are installed.
    pub async fn kernelspec(&self, name: &str) -> Result<ChosenSpec, Error> {
        let specs =
            self.jupyter().rest().kernelspecs().await.map_err(|e| {
                Error::Failed(format!("Could not list the kernelspecs: {e}").into())
            })?;
        match specs.kernelspecs.get(name) {
            Some(entry) => Ok(ChosenSpec {
                name: name.to_owned(),
                display_name: entry
                    .spec
                    .display_name
                    .clone()
                    .unwrap_or_else(|| name.to_owned()),
                language: entry.spec.language.clone().unwrap_or_default(),
            }),
            None => {
                let installed: Vec<&str> = specs.kernelspecs.keys().map(String::as_str).collect();
                let installed = if installed.is_empty() {
                    "none".to_owned()
                } else {
                    installed.join(", ")
                };
                Err(Error::Failed(say![
                    format!(
                        "No kernelspec '{name}' is installed on the Jupyter Server. Installed: \
                         {installed}. Call "
                    ),
                    Step::ListKernelspecs,
                    " for details."
                ]))
            }
        }
    }
}
