use super::*;
use notebook_format::outputs::StreamName;
use yrs::Update;
use yrs::updates::decoder::Decode;

mod kept;

fn code(id: &str, source: &str) -> Cell {
    let mut cell = Cell::new(CellType::Code, source);
    cell.id = id.into();
    cell
}

/// A document holding one empty code cell, `a`.
fn one_empty_cell() -> YNotebook {
    let nb = YNotebook::new();
    nb.write(&[Edit::Insert {
        index: 0,
        cell: code("a", ""),
    }])
    .unwrap();
    nb
}

fn sources(nb: &Notebook) -> Vec<(String, String)> {
    nb.cells
        .iter()
        .map(|c| (c.id.clone(), c.source.clone()))
        .collect()
}

/// A peer holding everything `ours` holds, as after joining the same room.
fn synced_peer(ours: &YNotebook) -> YNotebook {
    let peer = YNotebook::new();
    let state = ours
        .doc()
        .transact()
        .encode_state_as_update_v1(&Default::default());
    peer.apply_update(&state).unwrap();
    peer
}

#[test]
fn a_cell_read_alone_is_the_cell_of_the_whole_read() {
    let ours = YNotebook::new();
    let peer = YNotebook::new();
    let update = ours
        .write(&[
            Edit::Insert {
                index: 0,
                cell: code("a", "print(1)"),
            },
            Edit::Insert {
                index: 1,
                cell: Cell::new(CellType::Markdown, "# title"),
            },
            Edit::Insert {
                index: 2,
                cell: code("c", "x = 2"),
            },
            Edit::SetOutputs {
                cell_id: "c".into(),
                outputs: vec![Output::stream(StreamName::Stdout, "hi\n")],
                execution_count: Some(4),
            },
            Edit::SetNotebookMetadata {
                key: "kernelspec".into(),
                value: serde_json::json!({"name": "python3"}),
            },
        ])
        .unwrap();
    peer.apply_update(&update).unwrap();
    let whole = peer.read().unwrap();
    for (index, cell) in whole.cells.iter().enumerate() {
        for at in [CellAt::Index(index), CellAt::Id(&cell.id)] {
            let read = peer.read_cell(at).unwrap();
            assert_eq!(read.cell, Some((index, cell.clone())), "{at:?}");
            assert_eq!(read.len, 3);
            assert_eq!(read.metadata, whole.metadata);
        }
    }
    for missing in [
        CellAt::Index(3),
        CellAt::Index(usize::MAX),
        CellAt::Id("zz"),
    ] {
        let read = peer.read_cell(missing).unwrap();
        assert_eq!((read.cell, read.len), (None, 3), "{missing:?}");
    }
    for (start, limit) in [(0, 0), (1, 1), (1, 5), (0, 2), (3, 1), (9, 0)] {
        assert_eq!(
            peer.read_page(start, limit).unwrap(),
            Page::of(&whole, start, limit),
            "{start}, {limit}"
        );
    }
}

#[test]
fn edits_round_trip_through_a_peer() {
    let ours = YNotebook::new();
    let peer = YNotebook::new();
    let mut updates = vec![
        ours.write(&[
            Edit::Insert {
                index: 0,
                cell: code("a", "print(1)"),
            },
            Edit::Insert {
                index: 1,
                cell: code("b", "x = 2"),
            },
        ])
        .unwrap(),
    ];
    updates.push(
        ours.write(&[
            Edit::SetSource {
                cell_id: "a".into(),
                source: "print('é1')".into(),
                expected: None,
            },
            Edit::Move {
                cell_id: "a".into(),
                to: 1,
            },
            Edit::SetOutputs {
                cell_id: "b".into(),
                outputs: vec![Output::stream(StreamName::Stdout, "hi\n")],
                execution_count: Some(3),
            },
        ])
        .unwrap(),
    );
    for update in &updates {
        peer.apply_update(update).unwrap();
    }
    let seen = peer.read().unwrap();
    assert_eq!(
        sources(&seen),
        vec![
            ("b".to_string(), "x = 2".to_string()),
            ("a".to_string(), "print('é1')".to_string())
        ]
    );
    assert_eq!(seen.cells[0].execution_count, Some(3));
    assert_eq!(
        seen.cells[0].outputs[0],
        Output::stream(StreamName::Stdout, "hi\n")
    );
    peer.apply_update(
        &ours
            .write(&[Edit::Delete {
                cell_ids: vec!["b".into()],
            }])
            .unwrap(),
    )
    .unwrap();
    assert_eq!(sources(&peer.read().unwrap()).len(), 1);
}

#[test]
fn a_source_with_non_ascii_text_is_edited_in_place() {
    let ours = YNotebook::new();
    let peer = YNotebook::new();
    let mut updates = vec![
        ours.write(&[Edit::Insert {
            index: 0,
            cell: code("a", "héllo 世界 🎉\r\nx = 1"),
        }])
        .unwrap(),
    ];
    updates.push(
        ours.write(&[Edit::SetSource {
            cell_id: "a".into(),
            source: "héllo 世界 🎉\r\nx = 2 ✓".into(),
            expected: None,
        }])
        .unwrap(),
    );
    for update in &updates {
        peer.apply_update(update).unwrap();
    }
    assert_eq!(
        sources(&peer.read().unwrap()),
        vec![("a".to_string(), "héllo 世界 🎉\r\nx = 2 ✓".to_string())]
    );
}

#[test]
fn growing_outputs_keep_what_is_unchanged() {
    let nb = one_empty_cell();
    let first = Output::from_json(
        &serde_json::json!({"output_type": "display_data", "data": {"text/plain": "1"}, "metadata": {}}),
    );
    let second = Output::stream(StreamName::Stdout, "x");
    let set = |outputs: Vec<Output>| {
        nb.write(&[Edit::SetOutputs {
            cell_id: "a".into(),
            outputs,
            execution_count: None,
        }])
        .unwrap()
    };
    set(vec![first.clone()]);
    let appended = set(vec![first.clone(), second.clone()]);
    // The unchanged first output is not sent again: the update is smaller than one that
    // writes both outputs from scratch.
    let fresh = one_empty_cell();
    let both = fresh
        .write(&[Edit::SetOutputs {
            cell_id: "a".into(),
            outputs: vec![first.clone(), second.clone()],
            execution_count: None,
        }])
        .unwrap();
    assert!(
        appended.len() + 40 < both.len(),
        "{} vs {} bytes",
        appended.len(),
        both.len()
    );
    assert_eq!(nb.read().unwrap().cells[0].outputs, vec![first, second]);
}

#[test]
fn a_growing_stream_sends_only_its_new_text() {
    let nb = one_empty_cell();
    let set = |text: &str| {
        nb.write(&[Edit::SetOutputs {
            cell_id: "a".into(),
            outputs: vec![Output::stream(StreamName::Stdout, text)],
            execution_count: None,
        }])
        .unwrap()
    };
    let long = "line of output\n".repeat(10_000);
    set(&long);
    let more = format!("{long}one more line\n");
    let update = set(&more);
    assert!(update.len() < 200, "{} bytes for 14 new ones", update.len());
    assert_eq!(
        nb.read().unwrap().cells[0].outputs,
        vec![Output::stream(StreamName::Stdout, more.as_str())]
    );
    // A stream that does not continue the shown one (cleared and printed again) is replaced.
    set("fresh\n");
    assert_eq!(
        nb.read().unwrap().cells[0].outputs,
        vec![Output::stream(StreamName::Stdout, "fresh\n")]
    );
}

#[test]
fn a_stream_checked_against_what_we_wrote_last_still_shows_the_truth() {
    let nb = one_empty_cell();
    let stream = |text: &str| vec![Output::stream(StreamName::Stdout, text)];
    let shown = |nb: &YNotebook| nb.read().unwrap().cells[0].outputs.clone();
    let write = |outputs: &[Output], written: Option<&[Output]>| {
        nb.write_outputs("a", outputs, None, false, written)
            .unwrap()
            .unwrap()
    };
    write(&stream("10%"), None);
    let update = write(&stream("10% 20%"), Some(&stream("10%")));
    assert!(update.len() < 100, "only the tail: {} bytes", update.len());
    assert_eq!(shown(&nb), stream("10% 20%"));
    // Cleared and printed again, the same length: not a continuation, so replaced.
    write(&stream("30% 40%"), Some(&stream("10% 20%")));
    assert_eq!(shown(&nb), stream("30% 40%"));
    // Someone else changed the text since our write: the room's copy is read, not trusted.
    {
        let mut txn = nb.doc.transact_mut();
        let Some(Out::YMap(cell)) = nb.cells.get(&txn, 0) else {
            panic!("no cell")
        };
        let Some(Out::YArray(outputs)) = cell.get(&txn, "outputs") else {
            panic!("no outputs")
        };
        let Some(Out::YMap(output)) = outputs.get(&txn, 0) else {
            panic!("no output")
        };
        let Some(Out::YText(text)) = output.get(&txn, "text") else {
            panic!("no text")
        };
        text.push(&mut txn, " theirs");
    }
    write(&stream("30% 40% 50%"), Some(&stream("30% 40%")));
    assert_eq!(shown(&nb), stream("30% 40% 50%"));
}

#[test]
fn float_counts_from_python_peers_read_as_integers() {
    let nb = YNotebook::new();
    {
        let mut txn = nb.doc.transact_mut();
        nb.meta.insert(&mut txn, "nbformat", 4.0);
        nb.meta.insert(&mut txn, "nbformat_minor", 5.0);
        let cell: MapPrelim = vec![
            ("id", In::from("c")),
            ("cell_type", In::from("code")),
            ("source", TextPrelim::new("1").into()),
            ("execution_count", In::from(7.0)),
            ("outputs", ArrayPrelim::default().into()),
        ]
        .into_iter()
        .collect();
        nb.cells.push_back(&mut txn, cell);
    }
    assert_eq!(nb.read().unwrap().cells[0].execution_count, Some(7));
}

#[test]
fn an_update_sent_back_to_us_changes_nothing_and_a_new_one_still_lands() {
    let ours = YNotebook::new();
    let peer = YNotebook::new();
    let insert = ours
        .write(&[Edit::Insert {
            index: 0,
            cell: code("a", "print(1)"),
        }])
        .unwrap();
    let run = |text: &str| {
        ours.write_outputs(
            "a",
            &[Output::stream(StreamName::Stdout, text)],
            Some(1),
            false,
            None,
        )
        .unwrap()
        .unwrap()
    };
    // A running cell's first write and a later one (the new text, the count set again).
    let first = run("1\n");
    let grow = run("1\n2\n");
    let before = ours.read().unwrap();
    // The room's echo of our own updates: already held, so nothing is integrated.
    for update in [&insert, &first, &grow] {
        let decoded = Update::decode_v1(update).unwrap();
        assert!(ours.knows(&decoded));
        ours.apply_update(update).unwrap();
    }
    assert_eq!(ours.read().unwrap(), before);
    // A peer has none of it: all land there, and a peer's deletion lands here.
    for update in [&insert, &first, &grow] {
        assert!(!peer.knows(&Update::decode_v1(update).unwrap()));
        peer.apply_update(update).unwrap();
    }
    assert_eq!(peer.read().unwrap(), before);
    let delete = peer
        .write(&[Edit::Delete {
            cell_ids: vec!["a".into()],
        }])
        .unwrap();
    assert!(!ours.knows(&Update::decode_v1(&delete).unwrap()));
    ours.apply_update(&delete).unwrap();
    assert!(ours.read().unwrap().cells.is_empty());
}

#[test]
fn the_rooms_changes_are_heard_and_ours_are_not() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let ours = YNotebook::new();
    let peer = YNotebook::new();
    let heard = Arc::new(AtomicUsize::new(0));
    let counter = heard.clone();
    ours.on_room_changes(move || {
        counter.fetch_add(1, Ordering::SeqCst);
    });
    // Our own edit is not heard.
    let ours_first = ours
        .write(&[Edit::Insert {
            index: 0,
            cell: code("a", "x = 1"),
        }])
        .unwrap();
    assert_eq!(heard.load(Ordering::SeqCst), 0);
    // The peer's edit, applied from the room, is; so is a deletion alone.
    peer.apply_update(&ours_first).unwrap();
    let edited = peer
        .write(&[Edit::SetSource {
            cell_id: "a".into(),
            source: "x = 2".into(),
            expected: None,
        }])
        .unwrap();
    ours.apply_update(&edited).unwrap();
    assert_eq!(heard.load(Ordering::SeqCst), 1);
    let deleted = peer
        .write(&[Edit::Delete {
            cell_ids: vec!["a".into()],
        }])
        .unwrap();
    ours.apply_update(&deleted).unwrap();
    assert_eq!(heard.load(Ordering::SeqCst), 2);
    // Our echo, sent back by the room, changes nothing and is not heard.
    ours.apply_update(&ours_first).unwrap();
    assert_eq!(heard.load(Ordering::SeqCst), 2);
}

#[test]
fn a_cursors_text_is_found_in_its_cell() {
    let ours = YNotebook::new();
    ours.write(&[
        Edit::Insert {
            index: 0,
            cell: code("a", "x = 1"),
        },
        Edit::Insert {
            index: 1,
            cell: code("b", "y = 2"),
        },
    ])
    .unwrap();
    // The item id of cell b's source text, as a peer's cursor names it.
    let (client, clock) = {
        let txn = ours.doc.transact();
        let Some(Out::YMap(cell)) = ours.cells.get(&txn, 1) else {
            panic!("cell b is a map")
        };
        let Some(Out::YText(source)) = cell.get(&txn, "source") else {
            panic!("its source is a text")
        };
        match AsRef::<yrs::branch::Branch>::as_ref(&source).id() {
            yrs::branch::BranchID::Nested(id) => (id.client.get(), id.clock),
            yrs::branch::BranchID::Root(_) => panic!("a cell's source is nested"),
        }
    };
    assert_eq!(ours.cell_with_source(client, clock).as_deref(), Some("b"));
    assert_eq!(ours.cell_with_source(client, clock + 1000), None);
    assert_eq!(ours.cell_with_source(1 << 60, 0), None);
}

#[test]
fn an_update_carries_its_own_writes_changes_not_every_deletion_before_it() {
    let ours = one_empty_cell();
    let peer = synced_peer(&ours);
    // A source retyped many times: the document holds a deletion for each.
    for i in 0..50 {
        let update = ours
            .write(&[Edit::SetSource {
                cell_id: "a".into(),
                source: format!("x = {}", i * 7),
                expected: None,
            }])
            .unwrap();
        peer.apply_update(&update).unwrap();
    }
    let insert = ours
        .write(&[Edit::Insert {
            index: 1,
            cell: code("b", "y = 1"),
        }])
        .unwrap();
    assert!(
        Update::decode_v1(&insert).unwrap().delete_set().is_empty(),
        "an insert deletes nothing, so its update names no deletion"
    );
    let before_output = ours.doc().transact().state_vector();
    let output = ours
        .write_outputs(
            "b",
            &[Output::stream(StreamName::Stdout, "1\n")],
            Some(1),
            true,
            None,
        )
        .unwrap()
        .unwrap();
    // What the write used to send: the same blocks and every deletion the document holds.
    let with_every_deletion = ours
        .doc()
        .transact()
        .encode_state_as_update_v1(&before_output);
    assert!(
        output.len() < with_every_deletion.len(),
        "{} bytes, against {}",
        output.len(),
        with_every_deletion.len()
    );
    // The peer that had every earlier update still ends where we are.
    peer.apply_update(&insert).unwrap();
    peer.apply_update(&output).unwrap();
    assert_eq!(peer.read().unwrap(), ours.read().unwrap());
    assert_eq!(peer.read().unwrap().cells[0].source, "x = 343");
}
