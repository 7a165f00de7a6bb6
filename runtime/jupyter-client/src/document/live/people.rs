//! Who else is in a room, as its awareness tells (display names), and which of them changed each
//! cell last (the clients whose updates touched it), so a refused write can say who changed it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;
use yrs::block::ClientID;
use yrs::sync::Awareness;
use yrs::types::{Event, PathSegment};
use yrs::{Array, DeepObservable, GetString, Map, Out, TransactionMut};

/// Shared by a live document and every link it opens (it survives a rejoin).
pub(super) type SharedPeople = Arc<Mutex<People>>;

#[derive(Default)]
pub(super) struct People {
    /// Each other client's name, as its awareness state gives it.
    names: HashMap<ClientID, String>,
    /// Per cell id, the other clients whose last update touched it.
    changed: HashMap<String, Vec<ClientID>>,
}

impl People {
    /// The names of the others present, sorted, each once.
    pub(super) fn present(&self) -> Vec<String> {
        let mut names: Vec<String> = self.names.values().cloned().collect();
        names.sort();
        names.dedup();
        names
    }

    /// Who changed the cell last, by name when the room names them.
    pub(super) fn changed_by(&self, cell_id: &str) -> Option<String> {
        let clients = self.changed.get(cell_id)?;
        let names: Vec<String> = clients
            .iter()
            .map(|c| {
                self.names.get(c).cloned().unwrap_or_else(|| {
                    format!("a collaborator the room does not name (client {c})")
                })
            })
            .collect();
        Some(names.join(", "))
    }

    /// Takes the others' names from the room's awareness (ours left out).
    pub(super) fn read_awareness(&mut self, awareness: &Awareness) {
        let ours = awareness.client_id();
        self.names = awareness
            .iter()
            .filter(|(client, _)| *client != ours)
            .filter_map(|(client, state)| Some((client, name_of(state.data.as_deref()?)?)))
            .collect();
    }
}

/// A person's name in an awareness state: JupyterLab's `user.display_name` or `user.name`,
/// jupyter-nbmodel-client's `user.owner`, else `user.username`.
fn name_of(state: &str) -> Option<String> {
    let state: Value = serde_json::from_str(state).ok()?;
    let user = state.get("user")?;
    ["display_name", "name", "owner", "username"]
        .iter()
        .find_map(|key| user.get(key).and_then(Value::as_str))
        .filter(|name| !name.is_empty())
        .map(str::to_owned)
}

/// Notes, for every transaction on `cells` made by other clients, which cells it touched.
pub(super) fn watch_cells(cells: &yrs::ArrayRef, ours: ClientID, people: SharedPeople) {
    let watched = cells.clone();
    cells.observe_deep("people", move |txn: &TransactionMut, events| {
        let before = txn.before_state();
        let writers: Vec<ClientID> = txn
            .after_state()
            .iter()
            .filter(|(client, clock)| **client != ours && before.get(client) < **clock)
            .map(|(client, _)| *client)
            .collect();
        if writers.is_empty() {
            return;
        }
        let mut people = people.lock().expect("people lock");
        for event in events.iter() {
            if let Some(id) = touched_cell(&watched, txn, event) {
                people.changed.insert(id, writers.clone());
            }
        }
    });
}

/// The id of the cell an event inside `cells` belongs to (none for the list itself).
fn touched_cell(cells: &yrs::ArrayRef, txn: &TransactionMut, event: &Event) -> Option<String> {
    let PathSegment::Index(index) = event.path().front()?.clone() else {
        return None;
    };
    let Out::YMap(cell) = cells.get(txn, index)? else {
        return None;
    };
    match cell.get(txn, "id")? {
        Out::Any(yrs::Any::String(id)) => Some(id.to_string()),
        Out::YText(text) => Some(text.get_string(txn)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::updates::decoder::Decode;
    use yrs::{Doc, ReadTxn, Text, Transact};

    #[test]
    fn names_come_from_every_client_kind() {
        let lab = r#"{"user": {"name": "Ada", "display_name": "Ada L.", "username": "ada"}}"#;
        assert_eq!(name_of(lab).as_deref(), Some("Ada L."));
        let nbmodel = r#"{"user": {"agent": "nbmodel", "owner": "bob"}}"#;
        assert_eq!(name_of(nbmodel).as_deref(), Some("bob"));
        assert_eq!(name_of(r#"{"cursors": []}"#), None);
        assert_eq!(name_of("not json"), None);
    }

    #[test]
    fn a_cell_is_attributed_to_the_other_client_that_changed_it() {
        let ours = Doc::with_client_id(1);
        let cells = ours.get_or_insert_array("cells");
        let people = SharedPeople::default();
        // Another client writes a cell; only its updates count, not ours.
        let theirs = Doc::with_client_id(2);
        let their_cells = theirs.get_or_insert_array("cells");
        {
            let mut txn = theirs.transact_mut();
            let cell = their_cells.push_back(&mut txn, yrs::MapPrelim::default());
            cell.insert(&mut txn, "id", "c1");
            cell.insert(&mut txn, "source", yrs::TextPrelim::new("x = 1"));
        }
        let sync = |from: &Doc, to: &Doc| {
            let update = from
                .transact()
                .encode_state_as_update_v1(&to.transact().state_vector());
            let update = yrs::Update::decode_v1(&update).unwrap();
            to.transact_mut().apply_update(update).unwrap();
        };
        sync(&theirs, &ours);
        watch_cells(&cells, ours.client_id(), people.clone());
        {
            let mut txn = theirs.transact_mut();
            let Some(Out::YMap(cell)) = their_cells.get(&txn, 0) else {
                panic!("the cell is there")
            };
            let Some(Out::YText(source)) = cell.get(&txn, "source") else {
                panic!("its source is text")
            };
            source.push(&mut txn, " + 1");
        }
        sync(&theirs, &ours);
        let mut known = People::default();
        known.names.insert(theirs.client_id(), "Ada".into());
        known.changed = people.lock().unwrap().changed.clone();
        assert_eq!(known.changed_by("c1").as_deref(), Some("Ada"));
        assert_eq!(known.changed_by("c2"), None);
    }
}
