//! The document's side of syncing with the room: our state vector and what a peer lacks, the
//! room's updates applied (our own echoes dropped unread, a malformed one refused), and the
//! room's changes told to whoever listens.

use yrs::updates::decoder::Decode;
use yrs::{DeepObservable, Origin, ReadTxn, StateVector, Transact, TransactionMut, Update};

use super::YNotebook;
use crate::document::room_update::well_formed;

/// The origin of the transactions that apply the room's updates (ours have none).
const ROOM_ORIGIN: &str = "room";

impl YNotebook {
    /// Calls `changed` after each update from the room that changed a cell or the notebook's
    /// metadata (not the room's own bookkeeping, such as its save state, nor our edits).
    pub fn on_room_changes(&self, changed: impl Fn() + Send + Sync + Clone + 'static) {
        let from_room = |txn: &TransactionMut| {
            txn.origin()
                .is_some_and(|origin| *origin == Origin::from(ROOM_ORIGIN))
        };
        let on_cells = changed.clone();
        self.cells
            .observe_deep("room-changes", move |txn: &TransactionMut, _| {
                if from_room(txn) {
                    on_cells();
                }
            });
        self.meta
            .observe_deep("room-changes", move |txn: &TransactionMut, _| {
                if from_room(txn) {
                    changed();
                }
            });
    }

    pub fn state_vector(&self) -> StateVector {
        self.doc.transact().state_vector()
    }

    /// What a peer with state vector `remote` lacks.
    pub fn diff(&self, remote: &StateVector) -> Vec<u8> {
        self.doc.transact().encode_state_as_update_v1(remote)
    }

    /// Applies an update from the room. yrs asserts on some malformed input (found by fuzzing),
    /// so a panic is caught and reported like any other bad update: one hostile peer must not
    /// take our connection task down. After an error the caller should drop this document.
    pub fn apply_update(&self, update: &[u8]) -> Result<(), String> {
        let applied = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let update = Update::decode_v1(update).map_err(|e| e.to_string())?;
            // The room sends every update back to its sender too: ours (a running cell's
            // output, every few milliseconds) would cost a check and an integration each.
            if self.knows(&update) {
                return Ok(());
            }
            let update = well_formed(update)?;
            self.doc
                .transact_mut_with(ROOM_ORIGIN)
                .apply_update(update)
                .map_err(|e| e.to_string())
        }));
        applied.unwrap_or_else(|_| Err("the update is malformed (yrs refused it)".into()))
    }

    /// Whether the document already holds all of `update`: every block it inserts and every
    /// deletion it carries (an update names the sender's whole delete set). Integrating it then
    /// changes nothing.
    pub(super) fn knows(&self, update: &Update) -> bool {
        let txn = self.doc.transact();
        let held = txn.state_vector();
        let inserted = update
            .insertions(true)
            .iter()
            .all(|(client, ranges)| ranges.iter().all(|range| range.end <= held.get(client)));
        if !inserted {
            return false;
        }
        if update.delete_set().is_empty() {
            return true;
        }
        let deleted = txn.snapshot().delete_set;
        update
            .delete_set()
            .diff(&deleted)
            .iter()
            .all(|(_, ranges)| ranges.iter().all(|range| range.is_empty()))
    }
}
