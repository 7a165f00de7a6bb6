//! The notebook last converted whole, kept while the document does not change but by our own
//! edits: an edit plans against it and costs the cells it touches, not a conversion of all.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::{YNotebook, cell_alone, guarded, stored_id};
use crate::document::Edit;
use notebook_format::notebook::{Notebook, NotebookError};
use yrs::{Array, Transact};

impl YNotebook {
    /// The notebook as it is in the document now, shared: converted whole only when the
    /// document changed since the last conversion by more than our own edits (`write_planned`).
    pub fn read_shared(&self) -> Result<Arc<Notebook>, NotebookError> {
        // Loaded before converting: a transaction during the conversion leaves it stale.
        let count = self.transactions.load(Ordering::SeqCst);
        if let Some((at, notebook)) = &*self.converted()
            && *at == count
        {
            return Ok(notebook.clone());
        }
        self.whole_conversions.fetch_add(1, Ordering::Relaxed);
        let notebook = Arc::new(guarded(|| self.read_unguarded())?);
        *self.converted() = Some((count, notebook.clone()));
        Ok(notebook)
    }

    fn converted(&self) -> std::sync::MutexGuard<'_, Option<(u64, Arc<Notebook>)>> {
        self.converted
            .lock()
            .expect("the conversion lock is never poisoned")
    }

    /// Writes `edits`, planned against `base` (a `read_shared` of this document), as `write`
    /// does; `next` is `base` with the edits applied. Returns the update and the notebook as it
    /// is now: `next` with the cells the edits touched read back from the document, when no one
    /// else wrote in between and every cell id is where `next` has it, else converted whole.
    pub fn write_planned(
        &self,
        base: &Arc<Notebook>,
        edits: &[Edit],
        next: Notebook,
    ) -> Result<(Vec<u8>, Arc<Notebook>), String> {
        let count = self.transactions.load(Ordering::SeqCst);
        let base_current = matches!(
            &*self.converted(),
            Some((at, held)) if *at == count && Arc::ptr_eq(held, base)
        );
        let update = self.write(edits)?;
        let after = self.transactions.load(Ordering::SeqCst);
        let mut next = next;
        let kept = base_current
            && after == count + 1
            && guarded(|| self.kept_true(&mut next, edits)).unwrap_or(false);
        let now = match kept {
            true => {
                let kept = Arc::new(next);
                *self.converted() = Some((after, kept.clone()));
                kept
            }
            // A whole conversion; if even that fails, the notebook the plan expects.
            false => self.read_shared().unwrap_or_else(|_| Arc::new(next)),
        };
        Ok((update, now))
    }

    /// Makes `next` true to the document after our write of `edits`: the touched cells read
    /// back as stored, the metadata too when an edit set it. False when the cell ids in the
    /// document are not `next`'s, in order (then `next` is not to be kept).
    fn kept_true(&self, next: &mut Notebook, edits: &[Edit]) -> Result<bool, NotebookError> {
        let touched: std::collections::HashSet<&str> =
            edits.iter().flat_map(Edit::cell_ids).collect();
        let txn = self.doc.transact();
        if self.cells.len(&txn) as usize != next.cells.len() {
            return Ok(false);
        }
        for (index, (stored, cell)) in self.cells.iter(&txn).zip(&mut next.cells).enumerate() {
            match stored_id(&stored, &txn) {
                Some(id) if *id == *cell.id => {
                    if touched.contains(&*id) {
                        *cell = cell_alone(stored, index, &txn)?;
                    }
                }
                _ => return Ok(false),
            }
        }
        if edits
            .iter()
            .any(|edit| matches!(edit, Edit::SetNotebookMetadata { .. }))
        {
            next.metadata = self.metadata(&txn);
        }
        Ok(true)
    }
}
