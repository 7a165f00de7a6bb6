//! Who else is in a room, as its awareness tells (display names), where each of them is (the cell
//! their editor's cursor is in, else the cell they last changed), and which of them changed each
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
    /// The cell each other client's editor cursor is in, as its awareness last said.
    cursor_cells: HashMap<ClientID, String>,
    /// The cell each other client changed last.
    last_changed: HashMap<ClientID, String>,
    /// The other clients whose last update inserted or deleted cells.
    structure: Vec<ClientID>,
}

/// Where a person in the room is: the cell their cursor is in, or else the one they last
/// changed (`None`: neither is known).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Presence {
    pub name: String,
    pub cell_id: Option<String>,
    /// Whether `cell_id` is where their cursor is (else where they last changed something).
    pub cursor: bool,
}

impl People {
    /// Who changed the cell last, by name when the room names them.
    pub(super) fn changed_by(&self, cell_id: &str) -> Option<String> {
        self.named(self.changed.get(cell_id)?)
    }

    /// Who last inserted or deleted cells, by name when the room names them.
    pub(super) fn structure_changed_by(&self) -> Option<String> {
        self.named(&self.structure)
    }

    fn named(&self, clients: &[ClientID]) -> Option<String> {
        if clients.is_empty() {
            return None;
        }
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

    /// Each person present and where they are, sorted by name.
    pub(super) fn whereabouts(&self) -> Vec<Presence> {
        let mut people: Vec<Presence> = self
            .names
            .iter()
            .map(|(client, name)| {
                let (cell_id, cursor) = match self.cursor_cells.get(client) {
                    Some(cell) => (Some(cell.clone()), true),
                    None => (self.last_changed.get(client).cloned(), false),
                };
                Presence {
                    name: name.clone(),
                    cell_id,
                    cursor,
                }
            })
            .collect();
        people.sort();
        people.dedup();
        people
    }

    /// Takes the others' names from the room's awareness (ours left out), and the cells their
    /// cursors are in (`cursor_cell` finds the cell an awareness state's cursor points into).
    pub(super) fn read_awareness(
        &mut self,
        awareness: &Awareness,
        cursor_cell: impl Fn(&str) -> Option<String>,
    ) {
        let ours = awareness.client_id();
        let others = || awareness.iter().filter(|(client, _)| *client != ours);
        self.names = others()
            .filter_map(|(client, state)| Some((client, name_of(state.data.as_deref()?)?)))
            .collect();
        self.cursor_cells = others()
            .filter_map(|(client, state)| Some((client, cursor_cell(state.data.as_deref()?)?)))
            .collect();
    }
}

/// The shared text an awareness state's primary cursor is in, as y-codemirror names it: the
/// `type` of the cursor's relative position, the (client, clock) of the text's own item.
pub(super) fn cursor_text(state: &str) -> Option<(u64, u32)> {
    let state: Value = serde_json::from_str(state).ok()?;
    let cursors = state.get("cursors")?.as_array()?;
    let cursor = cursors
        .iter()
        .find(|c| c.get("primary").and_then(Value::as_bool) == Some(true))
        .or_else(|| cursors.first())?;
    let text = cursor
        .get("head")
        .or_else(|| cursor.get("anchor"))?
        .get("type")?;
    let client = text.get("client")?.as_u64()?;
    let clock = u32::try_from(text.get("clock")?.as_u64()?).ok()?;
    Some((client, clock))
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
            let touched = match touched_cell(&watched, txn, event) {
                Some(id) => vec![id],
                None => match event {
                    // The list itself: cells inserted (a move is a deletion and an insertion).
                    Event::Array(list) if event.path().is_empty() => {
                        people.structure = writers.clone();
                        inserted_cells(list, txn)
                    }
                    _ => Vec::new(),
                },
            };
            for id in touched {
                for writer in &writers {
                    people.last_changed.insert(*writer, id.clone());
                }
                people.changed.insert(id, writers.clone());
            }
        }
    });
}

/// The ids of the cells an event on the list of cells inserted.
fn inserted_cells(list: &yrs::types::array::ArrayEvent, txn: &TransactionMut) -> Vec<String> {
    list.delta(txn)
        .iter()
        .filter_map(|change| match change {
            yrs::types::Change::Added(values) => Some(values),
            _ => None,
        })
        .flatten()
        .filter_map(|value| match value {
            Out::YMap(cell) => cell_id(&cell.get(txn, "id")?, txn),
            _ => None,
        })
        .collect()
}

fn cell_id(value: &Out, txn: &TransactionMut) -> Option<String> {
    match value {
        Out::Any(yrs::Any::String(id)) => Some(id.to_string()),
        Out::YText(text) => Some(text.get_string(txn)),
        _ => None,
    }
}

/// The id of the cell an event inside `cells` belongs to (none for the list itself).
fn touched_cell(cells: &yrs::ArrayRef, txn: &TransactionMut, event: &Event) -> Option<String> {
    let PathSegment::Index(index) = event.path().front()?.clone() else {
        return None;
    };
    let Out::YMap(cell) = cells.get(txn, index)? else {
        return None;
    };
    cell_id(&cell.get(txn, "id")?, txn)
}

#[cfg(test)]
mod tests {
    use super::*;
    use yrs::updates::decoder::Decode;
    use yrs::{Doc, ReadTxn, Text, Transact};

    #[test]
    fn a_cursor_names_the_text_it_is_in() {
        // As JupyterLab publishes it (y-codemirror's relative positions).
        let lab = r#"{"user": {"name": "Ada"}, "cursors": [{"anchor": {"type": {"client": 0,
            "clock": 12}, "tname": null, "item": null, "assoc": 0}, "head": {"type": {"client": 0,
            "clock": 12}, "tname": null, "item": {"client": 7, "clock": 1}, "assoc": 0},
            "primary": true, "empty": true}]}"#;
        assert_eq!(cursor_text(lab), Some((0, 12)));
        assert_eq!(cursor_text(r#"{"user": {"name": "Ada"}}"#), None);
        assert_eq!(cursor_text(r#"{"cursors": []}"#), None);
        assert_eq!(cursor_text("not json"), None);
    }

    #[test]
    fn a_person_is_where_their_cursor_is_else_where_they_last_changed() {
        let mut people = People::default();
        let (ada, bob, eve) = (ClientID::new(2), ClientID::new(3), ClientID::new(4));
        people.names = [
            (ada, "Ada".into()),
            (bob, "Bob".into()),
            (eve, "Eve".into()),
        ]
        .into();
        people.cursor_cells = [(ada, "c1".into())].into();
        people.last_changed = [(ada, "c9".into()), (bob, "c2".into())].into();
        let at = |name: &str, cell: Option<&str>, cursor| Presence {
            name: name.into(),
            cell_id: cell.map(str::to_owned),
            cursor,
        };
        assert_eq!(
            people.whereabouts(),
            vec![
                at("Ada", Some("c1"), true),
                at("Bob", Some("c2"), false),
                at("Eve", None, false)
            ]
        );
    }

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
        assert_eq!(known.structure_changed_by(), None);

        // A cell inserted (the list itself changes) is theirs too, and so is the structure.
        {
            let mut txn = theirs.transact_mut();
            let cell = their_cells.insert(&mut txn, 0, yrs::MapPrelim::default());
            cell.insert(&mut txn, "id", "c2");
        }
        sync(&theirs, &ours);
        known.changed = people.lock().unwrap().changed.clone();
        known.structure = people.lock().unwrap().structure.clone();
        assert_eq!(known.changed_by("c2").as_deref(), Some("Ada"));
        assert_eq!(known.structure_changed_by().as_deref(), Some("Ada"));
    }
}
