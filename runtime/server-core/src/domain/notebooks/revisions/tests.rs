use super::*;
use notebook_format::notebook::CellType;
use notebook_format::outputs::StreamName;

fn notebook(sources: &[&str]) -> Notebook {
    let cells: Vec<(&str, CellType)> = sources.iter().map(|s| (*s, CellType::Code)).collect();
    Notebook::with_cells(&cells)
}

fn ada(_: Option<&str>) -> Author {
    Author::Person("ada".into())
}

fn all_touched(notebook: &Notebook) -> HashSet<&str> {
    notebook.cells.iter().map(|c| c.id.as_str()).collect()
}

#[test]
fn a_revision_moves_over_our_changes_and_never_over_someone_elses() {
    let revisions = Revisions::new(None);
    let first = notebook(&["a = 1", "b = 2"]);
    let r1 = revisions.observe(&first, &ada);
    assert_eq!(revisions.observe(&first, &ada), r1, "nothing changed");

    let mut ours = first.clone();
    ours.cells[0].source = "a = 10".into();
    revisions.we_edited(&first, &ours, &[ours.cells[0].id.as_str()].into());
    let r2 = revisions.observe(&ours, &ada);
    assert_ne!(r2, r1, "our own edit moves the cursor");

    let mut theirs = ours.clone();
    theirs.cells[1].source = "b = 3".into();
    assert_eq!(
        revisions.observe(&theirs, &ada),
        r2,
        "a read that shows someone else's change does not pass over it"
    );
    let (found, current) = revisions.since(&r2, &theirs, &ada);
    let found = found.unwrap();
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        matches!(&found[0], (Change::Source { index: 1, old, .. }, Author::Person(name)) if old == "b = 2" && name == "ada")
    );
    let r3 = revisions.told(current);
    assert_ne!(r3, r2, "shown in a changes answer, it is passed over");
    assert!(revisions.since(&r3, &theirs, &ada).0.unwrap().is_empty());
}

#[test]
fn changes_name_added_deleted_moved_and_outputs_with_their_authors() {
    let revisions = Revisions::new(None);
    let old = notebook(&["a", "b", "c", "d"]);
    let r1 = revisions.observe(&old, &ada);
    let mut new = old.clone();
    // Someone moves d to the top, deletes b, adds e at the end; our run writes c's outputs.
    let d = new.cells.remove(3);
    new.cells.insert(0, d);
    let b = new.cells.remove(2);
    new.cells.push(notebook_format::notebook::Cell::new(
        CellType::Markdown,
        "e",
    ));
    new.cells[2].outputs = vec![Output::stream(StreamName::Stdout, "hi\n")];
    new.cells[2].execution_count = Some(1);
    revisions.we_ran(&new.cells[2].id);
    let (found, _) = revisions.since(&r1, &new, &ada);
    let found = found.unwrap();
    let kinds: Vec<String> = found
        .iter()
        .map(|(change, by)| {
            let what = match change {
                Change::Added { index, .. } => format!("added@{index}"),
                Change::Deleted { source, .. } => format!("deleted {source}"),
                Change::Moved { from, to, .. } => format!("moved {from}->{to}"),
                Change::Source { .. } => "source".into(),
                Change::Outputs { index, .. } => format!("outputs@{index}"),
            };
            format!("{what} by {by:?}")
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "moved 3->0 by Person(\"ada\")",
            "outputs@2 by ThisAgent",
            "added@3 by Person(\"ada\")",
            "deleted b by Person(\"ada\")",
        ],
        "{found:?}"
    );
    assert_eq!(b.source, "b");
}

#[test]
fn an_insertion_or_deletion_elsewhere_moves_nothing() {
    let revisions = Revisions::new(None);
    let old = notebook(&["a", "b", "c"]);
    let r1 = revisions.observe(&old, &ada);
    let mut new = old.clone();
    new.cells.remove(0);
    new.cells
        .insert(1, notebook_format::notebook::Cell::new(CellType::Code, "x"));
    let (found, _) = revisions.since(&r1, &new, &ada);
    assert!(
        found
            .unwrap()
            .iter()
            .all(|(c, _)| !matches!(c, Change::Moved { .. })),
        "only inserted and deleted"
    );
}

#[test]
fn our_inserts_moves_and_deletes_are_ours() {
    let revisions = Revisions::new(None);
    let old = notebook(&["a", "b", "c"]);
    let r1 = revisions.observe(&old, &ada);
    let mut new = old.clone();
    let a = new.cells.remove(0);
    new.cells.push(a);
    new.cells.remove(0);
    new.cells
        .insert(0, notebook_format::notebook::Cell::new(CellType::Code, "x"));
    revisions.we_edited(&old, &new, &all_touched(&new));
    let (found, _) = revisions.since(&r1, &new, &ada);
    let found = found.unwrap();
    assert!(!found.is_empty());
    assert!(
        found.iter().all(|(_, by)| *by == Author::ThisAgent),
        "{found:?}"
    );
    assert_ne!(
        revisions.observe(&new, &ada),
        r1,
        "all ours: the cursor moves"
    );
}

#[test]
fn revisions_not_kept_or_not_ours_are_told_apart() {
    let revisions = Revisions::new(None);
    let mut nb = notebook(&["0"]);
    let first = revisions.observe(&nb, &ada);
    for i in 1..=(HISTORY + 2) {
        let before = nb.clone();
        nb.cells[0].source = i.to_string();
        revisions.we_edited(&before, &nb, &all_touched(&nb));
        revisions.observe(&nb, &ada);
    }
    assert_eq!(
        revisions.since(&first, &nb, &ada).0.unwrap_err(),
        Since::TooOld
    );
    let other = Revisions::new(None);
    assert_eq!(
        other.since(&first, &nb, &ada).0.unwrap_err(),
        Since::Unknown
    );
    assert_eq!(
        revisions.since("nonsense", &nb, &ada).0.unwrap_err(),
        Since::Unknown
    );
}

#[test]
fn unchanged_cells_are_shared_between_snapshots() {
    let nb = notebook(&["a", "b"]);
    let one = Snapshot::of(&nb, None, 1);
    let mut edited = nb.clone();
    edited.cells[1].source = "c".into();
    let two = Snapshot::of(&edited, Some(&one), 2);
    assert!(Arc::ptr_eq(&one.cells[0], &two.cells[0]));
    assert!(!Arc::ptr_eq(&one.cells[1], &two.cells[1]));
}

#[test]
fn a_big_unchanged_notebooks_snapshot_shares_every_cell() {
    // 5,000 cells with 1 KB of output each, as every edit of ours snapshots it.
    let sources: Vec<String> = (0..5000)
        .map(|i| format!("x_{i} = compute({i})\nprint(x_{i})"))
        .collect();
    let refs: Vec<&str> = sources.iter().map(String::as_str).collect();
    let mut nb = notebook(&refs);
    for cell in &mut nb.cells {
        cell.outputs = vec![Output::stream(StreamName::Stdout, "y".repeat(1000))];
    }
    let one = Snapshot::of(&nb, None, 1);
    let started = std::time::Instant::now();
    let two = Snapshot::of(&nb, Some(&one), 2);
    eprintln!("snapshot of 5,000 cells: {:?}", started.elapsed());
    assert!(two.same_as(&one));
    assert!(
        one.cells
            .iter()
            .zip(&two.cells)
            .all(|(a, b)| Arc::ptr_eq(a, b))
    );
    nb.cells[4321].outputs[0] = Output::stream(StreamName::Stdout, "z".repeat(1000));
    let three = Snapshot::of(&nb, Some(&two), 3);
    let changed: Vec<usize> = (0..5000)
        .filter(|&i| !Arc::ptr_eq(&two.cells[i], &three.cells[i]))
        .collect();
    assert_eq!(
        changed,
        [4321],
        "an output of the same length changed is seen"
    );
}

#[test]
fn an_edit_from_the_newest_notebook_takes_its_revision_from_the_touched_cells_alone() {
    let revisions = Revisions::new(None);
    let first = Arc::new(notebook(&["a = 1", "b = 2", "c = 3"]));
    let r1 = revisions.observe_shared(&first, &ada);

    // Ours: b changed, a cell inserted after it.
    let mut next = (*first).clone();
    next.cells[1].source = "b = 20".into();
    let inserted = notebook_format::notebook::Cell::new(CellType::Code, "new");
    next.cells.insert(2, inserted.clone());
    let next = Arc::new(next);
    let touched: HashSet<&str> = [first.cells[1].id.as_str(), inserted.id.as_str()].into();
    let r2 = revisions
        .we_edited_shared(&first, &next, &touched)
        .expect("planned against the newest revision's notebook");
    assert_ne!(r2, r1);
    // The same revision a whole look would give, and the cells not touched are shared.
    assert_eq!(revisions.observe(&next, &ada), r2);
    let (changed, current) = revisions.since(&r1, &next, &ada);
    let changed = changed.unwrap();
    assert_eq!(changed.len(), 2, "{changed:?}");
    assert!(changed.iter().all(|(_, by)| *by == Author::ThisAgent));
    let history = revisions.inner.lock().unwrap();
    let newest = history.snapshots.back().unwrap();
    assert!(newest.same_as(&current));
    assert!(Arc::ptr_eq(
        &newest.cells[0],
        &history.snapshots[0].cells[0]
    ));
    drop(history);

    // Planned against another notebook (someone changed c first): not taken, observe decides.
    let mut theirs = (*next).clone();
    theirs.cells[3].source = "c = 30".into();
    let theirs = Arc::new(theirs);
    let mut ours = (*theirs).clone();
    ours.cells[0].source = "a = 10".into();
    let ours = Arc::new(ours);
    let touched: HashSet<&str> = [ours.cells[0].id.as_str()].into();
    assert_eq!(revisions.we_edited_shared(&theirs, &ours, &touched), None);
    assert_eq!(
        revisions.observe_shared(&ours, &ada),
        r2,
        "someone else's change is not passed over"
    );
    // And that stale answer is not remembered as the newest revision's notebook.
    let mut again = (*ours).clone();
    again.cells[1].source = "b = 21".into();
    let again = Arc::new(again);
    let touched: HashSet<&str> = [again.cells[1].id.as_str()].into();
    assert_eq!(revisions.we_edited_shared(&ours, &again, &touched), None);
}
