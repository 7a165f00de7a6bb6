//! The `file` backend: the notebook file through the Jupyter contents API.
//!
//! The contents API has no conditional write, and Jupyter writes a file in place, so two writers
//! can read each other's half-written saves and overwrite each other. What we do:
//! - Every edit starts with the file's hash (a cheap request it needs anyway). If the file is
//!   not what we last read or wrote, someone else saved: we read their version and build on it,
//!   so their save is kept.
//! - We never write from a read that did not parse (a save in progress): it is read again. A
//!   file that stays broken (two saves written over each other) is repaired from our last good
//!   version.
//! - Each edit of ours stays in a journal until it is *proven*: a hash check made once the save
//!   holding it has settled (twice the time that save took, at least 20 ms: by then a writer that
//!   checked the file before our save has landed its own) found the file still holding it. Any
//!   check that finds the file without some of our unproven edits re-applies them and saves.
//!
//! When we check is what keeps edits at the cost of one save. While another writer has been
//! seen in the last `CAREFUL_FOR` (the file moved under us), each save is checked before the
//! edit is answered, as it always was. Otherwise the answer goes out at once and the check is the
//! next edit's or read's own hash request, or, when none comes, a background check 100 ms after
//! the save has settled, and at the latest when the notebook is closed (unuse_notebook, shutdown).
//!
//! Why no edit is lost: an edit leaves the journal only by a check that saw the file holding it
//! after it settled, so a save of ours that someone overwrote is always found and re-applied.
//! The first save overwritten by a writer we had not seen yet is answered before that is known;
//! it is back in the file within a settle time and 100 ms. What stays open: this process killed
//! without closing (SIGKILL) within that time, and a writer whose save lands later than
//! the settle time after its check. A writer that does not check (a person's unsaved edits in a
//! browser) can still lose its own edits; only the live backend is safe for those. JupyterLab
//! itself compares the file's timestamp before it saves and asks first.
//!
//! We write the file as text in Jupyter's own layout, so the hash of what we wrote is known
//! without asking again. A save writes anew only the cells that differ from our last save's and
//! copies the others from its text, and the upload is escaped as it is sent: an edit of a big
//! notebook costs us about one copy of it, the rest is Jupyter's own save. A notebook older than
//! nbformat 4 is read through Jupyter's own conversion (the contents API reading it as a
//! notebook, as the collaboration room does) and saved as nbformat 4.5, as Jupyter saves it.

mod others;

use std::collections::{HashMap, VecDeque};
use std::ops::Range;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Mutex;

use super::live::journal::Journal;
use super::{
    CellAt, CellRead, Document, DocumentError, DocumentFuture, EditPlan, Page, apply_edits,
    fresh_insert_ids,
};
use crate::rest::{JupyterRest, RestError};
use notebook_format::notebook::{Cell, Ipynb, Notebook, NotebookError};

/// Pauses before reading again a file that did not parse (someone's save in progress): about
/// 2 s in all.
const REREAD_PAUSES_MS: [u64; 9] = [5, 10, 20, 40, 80, 160, 320, 500, 800];
/// Saves of one batch of edits before we give up with a conflict error.
const MAX_SAVES: usize = 8;
/// How long after another writer's save was last seen each save is checked before answering.
const CAREFUL_FOR: Duration = Duration::from_secs(30);
/// The least the background check waits between two looks.
const SHORTEST_PAUSE: Duration = Duration::from_millis(5);
/// How long after a save has settled the background check waits for the next call to do it
/// instead (calls in a row then cost no extra request).
const BACKGROUND_DELAY: Duration = Duration::from_millis(100);

/// How long to wait after our save before checking it held: a writer that checked the file just
/// before our save lands its own about one save-time later.
fn settle_time(save_took: Duration) -> Duration {
    (save_took * 2).clamp(Duration::from_millis(20), Duration::from_millis(500))
}

pub struct FileDocument {
    inner: Arc<Inner>,
}

struct Inner {
    rest: JupyterRest,
    path: String,
    /// Holding the lock serialises our own reads and writes of this notebook.
    state: Mutex<State>,
    /// When our newest unproven save has settled: the background check looks at it without
    /// waiting for the state lock an edit in progress holds.
    settles_at: std::sync::Mutex<Option<Instant>>,
    /// Other programs' saves, looked for while someone listens.
    others: others::OthersSaves,
}

#[derive(Default)]
struct State {
    /// The version we last read or wrote, and the file hash it had.
    known: Option<(Arc<Notebook>, String)>,
    /// Whether `known` holds every edit in the journal.
    holds: bool,
    /// Our edits not yet proven, each naming the save that is to prove it.
    journal: Journal,
    /// Our saves so far.
    saves: u64,
    /// Saves not yet proven, with the moment each has settled.
    unproven: VecDeque<(u64, Instant)>,
    /// When the file was last found saved by someone else.
    other_writer_seen: Option<Instant>,
    /// Whether a background check is scheduled.
    checking: bool,
    /// The text of our last save: the next save takes the cells it has not changed from it.
    written: Option<Written>,
}

/// A notebook and the text we wrote for it, with where each cell is in that text.
struct Written {
    notebook: Arc<Notebook>,
    text: Arc<String>,
    cells: Vec<Range<usize>>,
    by_id: HashMap<String, usize>,
}

impl Written {
    fn new(notebook: Arc<Notebook>, text: Arc<String>, cells: Vec<Range<usize>>) -> Self {
        let by_id = notebook
            .cells
            .iter()
            .enumerate()
            .map(|(index, cell)| (cell.id.clone(), index))
            .collect();
        Written {
            notebook,
            text,
            cells,
            by_id,
        }
    }

    /// The JSON written for `cell` when it is exactly a cell we wrote.
    fn cell(&self, cell: &Cell) -> Option<&str> {
        let &at = self.by_id.get(&cell.id)?;
        (self.notebook.cells[at] == *cell).then(|| &self.text[self.cells[at].clone()])
    }
}

impl State {
    fn careful(&self) -> bool {
        self.other_writer_seen
            .is_some_and(|seen| seen.elapsed() < CAREFUL_FOR)
    }

    /// A check sent at `checked` found the file holding every journal entry: the saves that had
    /// settled by then are proven.
    fn proven_at(&mut self, checked: Instant) {
        let mut through = None;
        while let Some(&(save, settled)) = self.unproven.front() {
            if settled > checked {
                break;
            }
            through = Some(save);
            self.unproven.pop_front();
        }
        if let Some(save) = through {
            self.journal.prove(save);
        }
    }
}

impl FileDocument {
    pub fn new(rest: JupyterRest, path: impl Into<String>) -> Self {
        FileDocument {
            inner: Arc::new(Inner {
                rest,
                path: path.into(),
                state: Mutex::new(State::default()),
                settles_at: std::sync::Mutex::new(None),
                others: others::OthersSaves::default(),
            }),
        }
    }

    /// Writes a new, empty notebook (fails if the parent directory is missing).
    pub async fn create(
        rest: &JupyterRest,
        path: &str,
        notebook: &Notebook,
    ) -> Result<(), DocumentError> {
        rest.put_text_file(path, Arc::new(notebook.to_ipynb()))
            .await?;
        Ok(())
    }
}

impl Inner {
    /// The file, parsed; a read that does not parse is tried again for a while (another
    /// writer's save in progress), and reported as invalid only if it stays so. A notebook older
    /// than nbformat 4 is read through Jupyter's conversion.
    async fn fetch(&self) -> Result<(Notebook, String), DocumentError> {
        let mut pauses = REREAD_PAUSES_MS.iter();
        loop {
            let (text, hash) = self
                .rest
                .get_text_file(&self.path)
                .await
                .map_err(|e| self.not_found(e))?;
            let source = match Notebook::parse(&text) {
                Ok(notebook) => return Ok((notebook, hash)),
                Err(NotebookError::Older(version)) => return self.converted(version).await,
                Err(source) => source,
            };
            // Only a read cut short looks like this; a whole file of the wrong shape stays so.
            let retry = matches!(source, NotebookError::NotJson(_));
            match pauses.next().filter(|_| retry) {
                Some(ms) => tokio::time::sleep(Duration::from_millis(*ms)).await,
                None => return Err(self.invalid(source)),
            }
        }
    }

    /// An nbformat 1–3 notebook as Jupyter converts it to nbformat 4, with its file's hash.
    async fn converted(&self, version: i64) -> Result<(Notebook, String), DocumentError> {
        let unconvertible =
            |reason: String| self.invalid(NotebookError::Unconvertible { version, reason });
        let (content, hash) = match self.rest.get_notebook(&self.path).await {
            Ok(model) => model,
            Err(RestError::NotFound { .. }) => {
                return Err(DocumentError::NotFound(self.path.clone()));
            }
            Err(e) => return Err(unconvertible(e.to_string())),
        };
        let notebook = Notebook::from_value(content).map_err(|e| unconvertible(e.to_string()))?;
        Ok((notebook, hash))
    }

    fn invalid(&self, source: NotebookError) -> DocumentError {
        DocumentError::Invalid {
            path: self.path.clone(),
            source,
        }
    }

    fn not_found(&self, error: RestError) -> DocumentError {
        match error {
            RestError::NotFound { .. } => DocumentError::NotFound(self.path.clone()),
            other => other.into(),
        }
    }

    /// The notebook as it should be now: the file (our copy of it when its hash has not moved),
    /// with every unproven edit of ours it lacks re-applied. `true` when that is not what the
    /// file holds, so it must be saved.
    async fn current(&self, state: &mut State) -> Result<(Arc<Notebook>, bool), DocumentError> {
        let checked = Instant::now();
        if let Some((known, hash)) = &state.known {
            let now = self
                .rest
                .get_file_hash(&self.path)
                .await
                .map_err(|e| self.not_found(e))?;
            if now == *hash {
                if state.holds {
                    let known = known.clone();
                    state.proven_at(checked);
                    return Ok((known, false));
                }
                let known = known.clone();
                return Ok(reapply(state, known, false, checked));
            }
            state.other_writer_seen = Some(checked);
        }
        let (theirs, hash, broken) = match (self.fetch().await, &state.known) {
            (Ok((notebook, hash)), _) => (notebook, hash, false),
            (Err(DocumentError::Invalid { source, .. }), Some((good, _))) => {
                tracing::warn!(
                    "'{}' no longer parses ({source}), likely two saves written over each other; \
                     repairing it from our last good version",
                    self.path
                );
                // A hash no file has: the file is read again next time.
                (Notebook::clone(good), String::new(), true)
            }
            (Err(e), _) => return Err(e),
        };
        let theirs = Arc::new(theirs);
        state.known = Some((theirs.clone(), hash));
        Ok(reapply(state, theirs, broken, checked))
    }

    /// The notebook as it should be now (see `current`), saved first when the file lacks it.
    async fn current_saved(
        self: &Arc<Self>,
        state: &mut State,
    ) -> Result<Arc<Notebook>, DocumentError> {
        let (notebook, repair) = self.current(state).await?;
        if repair {
            return self.save(state, Arc::unwrap_or_clone(notebook)).await;
        }
        Ok(notebook)
    }

    /// Saves `next` (which holds every journal entry). While another writer has been seen
    /// lately, checks once the save has settled that it held, and re-applies and saves again if
    /// not (bounded); otherwise leaves that check for later (see the module's comment).
    async fn save(
        self: &Arc<Self>,
        state: &mut State,
        mut next: Notebook,
    ) -> Result<Arc<Notebook>, DocumentError> {
        for _ in 0..MAX_SAVES {
            // Cells unchanged since our last save are copied from its text, not written again.
            let Ipynb { text, cells } = next.to_ipynb_reusing(|_, cell| {
                state
                    .written
                    .as_ref()
                    .and_then(|written| written.cell(cell))
            });
            let text = Arc::new(text);
            // Hashed on another thread while Jupyter takes the upload: a big notebook's hash
            // then costs no time of the edit's own.
            let hashing = tokio::task::spawn_blocking({
                let text = text.clone();
                move || notebook_format::hex::sha256(text.as_bytes())
            });
            let started = Instant::now();
            self.rest.put_text_file(&self.path, text.clone()).await?;
            let hash = hashing.await.expect("hashing never panics");
            let settle = settle_time(started.elapsed());
            state.saves += 1;
            let settled = Instant::now() + settle;
            state.unproven.push_back((state.saves, settled));
            *self.settles_at.lock().expect("never poisoned") = Some(settled);
            let saved = Arc::new(next);
            state.written = Some(Written::new(saved.clone(), text, cells));
            state.known = Some((saved.clone(), hash));
            state.holds = true;
            if !state.careful() {
                self.check_later(state);
                return Ok(saved);
            }
            tokio::time::sleep(settle).await;
            let (now, repair) = self.current(state).await?;
            if !repair {
                return Ok(now);
            }
            tracing::debug!(
                "'{}' was saved over by someone else; saving again with our edits re-applied",
                self.path
            );
            next = Arc::unwrap_or_clone(now);
        }
        Err(DocumentError::Contended {
            path: self.path.clone(),
            saves: MAX_SAVES,
        })
    }

    /// Makes sure unproven saves get checked even if no edit or read comes to do it.
    fn check_later(self: &Arc<Self>, state: &mut State) {
        if state.checking || state.unproven.is_empty() {
            return;
        }
        state.checking = true;
        let inner = Arc::clone(self);
        tokio::spawn(async move { inner.check_in_background().await });
    }

    async fn check_in_background(self: Arc<Self>) {
        loop {
            let settled = self
                .settles_at
                .lock()
                .expect("never poisoned")
                .unwrap_or_else(Instant::now);
            // Never less than a short pause, so nothing here can spin.
            let due = (settled + BACKGROUND_DELAY).max(Instant::now() + SHORTEST_PAUSE);
            tokio::time::sleep_until(due.into()).await;
            // A newer save was made meanwhile: its call's own checks go on, wait for them.
            if self
                .settles_at
                .lock()
                .expect("never poisoned")
                .is_some_and(|newest| newest > settled)
            {
                continue;
            }
            let mut state = self.state.lock().await;
            if let Err(e) = self.check(&mut state).await {
                tracing::warn!("checking our last save of '{}' failed: {e}", self.path);
                state.checking = false;
                return;
            }
            if state.unproven.is_empty() {
                state.checking = false;
                return;
            }
        }
    }

    /// Checks unproven saves that have settled, re-applying and saving what was lost.
    async fn check(self: &Arc<Self>, state: &mut State) -> Result<(), DocumentError> {
        if state.unproven.is_empty() {
            return Ok(());
        }
        let (now, repair) = self.current(state).await?;
        if repair {
            self.save(state, Arc::unwrap_or_clone(now)).await?;
        }
        Ok(())
    }
}

/// `base` with the unproven edits it lacks re-applied, and whether it must be saved (`broken`:
/// the file does not parse, so it must be in any case).
fn reapply(
    state: &mut State,
    base: Arc<Notebook>,
    broken: bool,
    checked: Instant,
) -> (Arc<Notebook>, bool) {
    let (missing, _superseded) = state.journal.replay(&base);
    if missing.is_empty() {
        state.holds = true;
        if !broken {
            state.proven_at(checked);
        }
        return (base, broken);
    }
    state.holds = false;
    // The next save holds them again; replay already applied them one by one to a copy.
    state.journal.restamp(state.saves + 1);
    match apply_edits(&base, &missing, "") {
        Ok(repaired) => (Arc::new(repaired), true),
        Err(_) => (base, true),
    }
}

impl Document for FileDocument {
    fn path(&self) -> &str {
        &self.inner.path
    }

    fn changes_by_others(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.inner.others.listen(&self.inner))
    }

    fn backend(&self) -> &'static str {
        "file"
    }

    fn read(&self) -> DocumentFuture<'_, Notebook> {
        Box::pin(async move {
            let inner = &self.inner;
            let mut state = inner.state.lock().await;
            let notebook = inner.current_saved(&mut state).await?;
            Ok(Arc::unwrap_or_clone(notebook))
        })
    }

    /// The cell from the notebook we hold when the file has not moved: one hash request, no
    /// copy of the other cells.
    fn read_cell<'a>(&'a self, at: CellAt<'a>) -> DocumentFuture<'a, CellRead> {
        Box::pin(async move {
            let inner = &self.inner;
            let mut state = inner.state.lock().await;
            let notebook = inner.current_saved(&mut state).await?;
            Ok(CellRead::pick(&notebook, at))
        })
    }

    fn read_page(&self, start: usize, limit: usize) -> DocumentFuture<'_, Page> {
        Box::pin(async move {
            let inner = &self.inner;
            let mut state = inner.state.lock().await;
            let notebook = inner.current_saved(&mut state).await?;
            Ok(Page::of(&notebook, start, limit))
        })
    }

    fn update<'a>(
        &'a self,
        plan: EditPlan<'a>,
    ) -> DocumentFuture<'a, (Arc<Notebook>, Arc<Notebook>)> {
        Box::pin(async move {
            let inner = &self.inner;
            let mut state = inner.state.lock().await;
            let (base, repair) = inner.current(&mut state).await?;
            let mut edits = plan(&base).map_err(DocumentError::Refused)?;
            fresh_insert_ids(&mut edits, &base);
            if edits.is_empty() && !repair {
                return Ok((base.clone(), base));
            }
            let next = apply_edits(&base, &edits, &inner.path)?;
            let proof = state.saves + 1;
            let added = state.journal.record(&base, &edits, proof);
            match inner.save(&mut state, next).await {
                Ok(saved) => Ok((base, saved)),
                Err(e) => {
                    // Answered as failed, so never re-applied later.
                    state.journal.forget_newest(added);
                    Err(e)
                }
            }
        })
    }

    /// Waits for our last save to settle and checks it, so that nothing of ours is left
    /// unproven when we let go.
    fn close(&self) -> DocumentFuture<'_, ()> {
        Box::pin(async move {
            let inner = &self.inner;
            let due = *inner.settles_at.lock().expect("never poisoned");
            if let Some(due) = due {
                tokio::time::sleep_until(due.into()).await;
            }
            let mut state = inner.state.lock().await;
            inner.check(&mut state).await
        })
    }
}
