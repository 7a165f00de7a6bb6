//! The kept conversion (`ynotebook/kept.rs`): true after our edits, never hiding a peer's.

use super::*;
use std::sync::Arc;
use std::sync::atomic::Ordering;

/// Writes `edits` as the live backend does: planned against the shared conversion.
fn edit_planned(nb: &YNotebook, edits: Vec<Edit>) -> Arc<Notebook> {
    let base = nb.read_shared().unwrap();
    let mut edits = edits;
    crate::document::fresh_insert_ids(&mut edits, &base);
    let next = crate::document::apply_edits(&base, &edits, "x.ipynb").unwrap();
    nb.write_planned(&base, &edits, next).unwrap().1
}

#[test]
fn our_edits_keep_the_conversion_true_without_converting_again() {
    let nb = one_empty_cell();
    let mut markdown = Cell::new(CellType::Markdown, "# title");
    markdown.id = "m".into();
    let steps = vec![
        vec![
            Edit::Insert {
                index: 1,
                cell: code("b", "x = 1"),
            },
            Edit::Insert {
                index: 0,
                cell: markdown,
            },
        ],
        vec![Edit::SetSource {
            cell_id: "b".into(),
            source: "x = 'é2'".into(),
            expected: None,
        }],
        vec![
            Edit::SetOutputs {
                cell_id: "b".into(),
                outputs: vec![Output::stream(StreamName::Stdout, "hi\n")],
                execution_count: Some(7),
            },
            Edit::SetRunning {
                cell_id: "b".into(),
                running: true,
            },
        ],
        vec![Edit::Move {
            cell_id: "b".into(),
            to: 0,
        }],
        vec![Edit::SetNotebookMetadata {
            key: "kernelspec".into(),
            value: serde_json::json!({"name": "python3", "display_name": "Python 3"}),
        }],
        vec![Edit::Delete {
            cell_ids: vec!["a".into()],
        }],
    ];
    nb.read_shared().unwrap();
    let conversions = nb.whole_conversions.load(Ordering::Relaxed);
    for edits in steps {
        let described = format!("{edits:?}");
        let now = edit_planned(&nb, edits);
        // What a whole conversion of the document gives, cell for cell.
        assert_eq!(*now, nb.read_unguarded().unwrap(), "after {described}");
        // And the next plan starts from it, not from a new conversion.
        assert!(Arc::ptr_eq(&now, &nb.read_shared().unwrap()), "{described}");
    }
    // (The checks above convert with `read_unguarded`, which does not count.)
    assert_eq!(nb.whole_conversions.load(Ordering::Relaxed), conversions);
    assert_eq!(
        sources(&nb.read().unwrap()),
        vec![
            ("b".to_string(), "x = 'é2'".to_string()),
            ("m".to_string(), "# title".to_string())
        ]
    );
}

#[test]
fn a_peers_change_is_never_hidden_by_the_kept_conversion() {
    let ours = one_empty_cell();
    let peer = synced_peer(&ours);
    let stale = ours.read_shared().unwrap();
    assert!(Arc::ptr_eq(&stale, &ours.read_shared().unwrap()));
    let update = peer
        .write(&[Edit::SetSource {
            cell_id: "a".into(),
            source: "typed by a person".into(),
            expected: None,
        }])
        .unwrap();
    let conversions = ours.whole_conversions.load(Ordering::Relaxed);
    ours.apply_update(&update).unwrap();
    assert_eq!(
        ours.read_shared().unwrap().cells[0].source,
        "typed by a person"
    );
    assert_eq!(
        ours.whole_conversions.load(Ordering::Relaxed),
        conversions + 1
    );

    // An edit planned against the notebook from before the peer's change (the live backend
    // plans under the lock, but the document must not trust a plan's base it did not hand out
    // at the current count): the answer is the document, the peer's change included.
    ours.apply_update(
        &peer
            .write(&[Edit::Insert {
                index: 1,
                cell: code("p", "peer"),
            }])
            .unwrap(),
    )
    .unwrap();
    let next = crate::document::apply_edits(
        &stale,
        &[Edit::Insert {
            index: 0,
            cell: code("o", "ours"),
        }],
        "x.ipynb",
    )
    .unwrap();
    let (_, now) = ours
        .write_planned(
            &stale,
            &[Edit::Insert {
                index: 0,
                cell: code("o", "ours"),
            }],
            next,
        )
        .unwrap();
    assert_eq!(*now, ours.read_unguarded().unwrap());
    assert_eq!(
        sources(&now),
        vec![
            ("o".to_string(), "ours".to_string()),
            ("a".to_string(), "typed by a person".to_string()),
            ("p".to_string(), "peer".to_string())
        ]
    );
}
