//! The `file` backend: the notebook file through the Jupyter contents API.
//!
//! The contents API has no conditional write, so before each save we compare the file's current
//! hash with the one we last read; if someone else saved meanwhile, we read their version and
//! apply our edits to it instead, so their save is kept. A save landing in the few milliseconds
//! between that check and our write can still be overwritten; unsaved edits in a person's browser
//! are only safe with the live backend.
//!
//! We write the file as text in Jupyter's own layout, so the hash of what we wrote is known
//! without asking again.

use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use super::{Document, DocumentError, DocumentFuture, EditPlan, apply_edits, fresh_insert_ids};
use crate::jupyter::notebook::Notebook;
use crate::jupyter::rest::{JupyterRest, RestError};

pub struct FileDocument {
    rest: JupyterRest,
    path: String,
    /// The version we last read or wrote, and the file hash it had. Holding the lock serialises
    /// our own writes to this notebook.
    known: Mutex<Option<(Notebook, String)>>,
}

impl FileDocument {
    pub fn new(rest: JupyterRest, path: impl Into<String>) -> Self {
        FileDocument {
            rest,
            path: path.into(),
            known: Mutex::new(None),
        }
    }

    /// Writes a new, empty notebook (fails if the parent directory is missing).
    pub async fn create(
        rest: &JupyterRest,
        path: &str,
        notebook: &Notebook,
    ) -> Result<(), DocumentError> {
        rest.put_text_file(path, &notebook.to_ipynb()).await?;
        Ok(())
    }

    async fn fetch(&self) -> Result<(Notebook, String), DocumentError> {
        let (text, hash) = self
            .rest
            .get_text_file(&self.path)
            .await
            .map_err(|e| self.not_found(e))?;
        let notebook = Notebook::parse(&text).map_err(|source| DocumentError::Invalid {
            path: self.path.clone(),
            source,
        })?;
        Ok((notebook, hash))
    }

    /// The notebook as it is now, with its hash: the version we know if the file's hash still
    /// matches (the hash alone is cheap to ask for), else the file read again — someone else saved.
    async fn latest(
        &self,
        known: &Option<(Notebook, String)>,
    ) -> Result<(Notebook, String), DocumentError> {
        if let Some((notebook, hash)) = known {
            let current = self
                .rest
                .get_file_hash(&self.path)
                .await
                .map_err(|e| self.not_found(e))?;
            if *hash == current {
                return Ok((notebook.clone(), current));
            }
        }
        self.fetch().await
    }

    fn not_found(&self, error: RestError) -> DocumentError {
        match error {
            RestError::NotFound { .. } => DocumentError::NotFound(self.path.clone()),
            other => other.into(),
        }
    }
}

pub fn sha256_hex(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

impl Document for FileDocument {
    fn path(&self) -> &str {
        &self.path
    }

    fn backend(&self) -> &'static str {
        "file"
    }

    fn read(&self) -> DocumentFuture<'_, Notebook> {
        Box::pin(async move {
            let mut known = self.known.lock().await;
            let latest = self.latest(&known).await?;
            let notebook = latest.0.clone();
            *known = Some(latest);
            Ok(notebook)
        })
    }

    fn update<'a>(&'a self, plan: EditPlan<'a>) -> DocumentFuture<'a, (Notebook, Notebook)> {
        Box::pin(async move {
            let mut known = self.known.lock().await;
            let (base, base_hash) = self.latest(&known).await?;
            *known = Some((base.clone(), base_hash));
            let mut edits = plan(&base).map_err(DocumentError::Refused)?;
            fresh_insert_ids(&mut edits, &base);
            if edits.is_empty() {
                return Ok((base.clone(), base));
            }
            let next = apply_edits(&base, &edits, &self.path)?;
            let text = next.to_ipynb();
            self.rest.put_text_file(&self.path, &text).await?;
            *known = Some((next.clone(), sha256_hex(&text)));
            Ok((base, next))
        })
    }
}
