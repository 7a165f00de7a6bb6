//! The `file` backend: the notebook file through the Jupyter contents API.
//!
//! The contents API has no conditional write, and Jupyter writes a file in place, so two writers
//! can read each other's half-written saves and overwrite each other. We therefore
//! - compare the file's hash with the one we last read before each save; if someone else saved
//!   meanwhile, we read their version and apply our edits to it instead, so their save is kept;
//! - never write from a read that did not parse: such a read (a save in progress) is retried;
//! - read the hash back after each save, once a writer that checked the file before our save has
//!   had time to land its own; if the file is no longer what we wrote, we read it again and
//!   re-apply whichever of our edits it lacks (bounded, then a conflict error);
//! - repair a file that no longer parses (two saves written over each other) from our last good
//!   version plus our edits, rather than leave it broken.
//!
//! A writer that does not verify its saves (or a person's unsaved edits in a browser) can still
//! lose its own edits; only the live backend is safe for those.
//!
//! We write the file as text in Jupyter's own layout, so the hash of what we wrote is known
//! without asking again.

use std::time::{Duration, Instant};

use sha2::{Digest, Sha256};
use tokio::sync::Mutex;

use super::live::journal::Journal;
use super::{Document, DocumentError, DocumentFuture, EditPlan, apply_edits, fresh_insert_ids};
use crate::jupyter::notebook::Notebook;
use crate::jupyter::rest::{JupyterRest, RestError};

/// Pauses before reading again a file that did not parse (someone's save in progress): about
/// 2 s in all.
const REREAD_PAUSES_MS: [u64; 9] = [5, 10, 20, 40, 80, 160, 320, 500, 800];
/// Saves of one batch of edits before we give up with a conflict error.
const MAX_SAVES: usize = 8;

/// How long to wait after our save before checking it held: a writer that checked the file just
/// before our save lands its own about one save-time later.
fn settle_time(save_took: Duration) -> Duration {
    (save_took * 2).clamp(Duration::from_millis(20), Duration::from_millis(500))
}

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

    /// The file, parsed; a read that does not parse is tried again for a while (another
    /// writer's save in progress), and reported as invalid only if it stays so.
    async fn fetch(&self) -> Result<(Notebook, String), DocumentError> {
        let mut pauses = REREAD_PAUSES_MS.iter();
        loop {
            let (text, hash) = self
                .rest
                .get_text_file(&self.path)
                .await
                .map_err(|e| self.not_found(e))?;
            match Notebook::parse(&text) {
                Ok(notebook) => return Ok((notebook, hash)),
                Err(source) => match pauses.next() {
                    Some(ms) => tokio::time::sleep(Duration::from_millis(*ms)).await,
                    None => {
                        return Err(DocumentError::Invalid {
                            path: self.path.clone(),
                            source,
                        });
                    }
                },
            }
        }
    }

    /// `fetch`, except that a file that stays unparsable is replaced by `good` (our last good
    /// version, which holds every edit of ours so far): the repair is written by the caller.
    async fn fetch_or_repair(
        &self,
        good: Option<&(Notebook, String)>,
    ) -> Result<(Notebook, String), DocumentError> {
        match (self.fetch().await, good) {
            (Err(DocumentError::Invalid { source, .. }), Some((notebook, _))) => {
                tracing::warn!(
                    "'{}' no longer parses ({source}), likely two saves written over each other; \
                     repairing it from our last good version",
                    self.path
                );
                // A hash no file has: the repair is always written.
                Ok((notebook.clone(), String::new()))
            }
            (other, _) => other,
        }
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
        self.fetch_or_repair(known.as_ref()).await
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
            let mut journal = Journal::default();
            journal.record(&base, &edits, 0);
            let (mut current, mut pending) = (base.clone(), edits);
            for _ in 0..MAX_SAVES {
                let next = apply_edits(&current, &pending, &self.path)?;
                let text = next.to_ipynb();
                let ours = sha256_hex(&text);
                let started = Instant::now();
                self.rest.put_text_file(&self.path, &text).await?;
                *known = Some((next.clone(), ours.clone()));
                tokio::time::sleep(settle_time(started.elapsed())).await;
                let now = self
                    .rest
                    .get_file_hash(&self.path)
                    .await
                    .map_err(|e| self.not_found(e))?;
                if now == ours {
                    return Ok((base, next));
                }
                // Someone saved over ours: take their version and re-apply what it lacks.
                let (theirs, hash) = self.fetch_or_repair(known.as_ref()).await?;
                let (missing, _superseded) = journal.replay(&theirs);
                if missing.is_empty() && !hash.is_empty() {
                    *known = Some((theirs.clone(), hash));
                    return Ok((base, theirs));
                }
                tracing::debug!(
                    "'{}' was saved over by someone else; saving again with {} of our edits",
                    self.path,
                    missing.len()
                );
                (current, pending) = (theirs, missing);
            }
            Err(DocumentError::Contended {
                path: self.path.clone(),
                saves: MAX_SAVES,
            })
        })
    }
}
