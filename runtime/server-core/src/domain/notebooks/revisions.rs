//! A notebook's revisions: the change cursor handed out on reads, edits and change answers.
//!
//! Unlike the structure version (a hash of cell ids in order), a revision moves on any change of
//! a source, an output or the structure. Each revision is a snapshot of every cell (its source
//! kept, its outputs as a digest); unchanged cells are shared between snapshots, so a revision
//! costs what changed. The last [`HISTORY`] are kept to diff against.
//!
//! A revision is only ever handed out for a state the agent knows all of: a read or an edit moves
//! the cursor only over changes this agent made itself (`observe`), so someone else's change is
//! never skipped; it is passed over only by the changes answer that shows it (`told`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::sync::{Arc, Mutex, Weak};

use tokio::sync::watch;

use notebook_format::notebook::{Cell, Notebook};
use notebook_format::outputs::Output;

mod ours;
pub use ours::Ours;

/// How many revisions of one notebook are kept to diff against.
pub const HISTORY: usize = 64;

/// One cell as a revision keeps it.
#[derive(Debug, PartialEq, Eq)]
pub struct CellState {
    pub id: String,
    pub cell_type: String,
    pub source: String,
    /// A digest of the outputs (and execution count): whether they changed, not what they were.
    pub outputs: u64,
}

/// A notebook at one revision.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub number: u64,
    pub cells: Vec<Arc<CellState>>,
}

/// A digest of a cell's outputs and execution count: every field of each output, hashed as it
/// is held (no JSON written: a notebook's outputs are hashed on every edit of ours).
pub fn outputs_digest(outputs: &[Output], execution_count: Option<i64>) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    execution_count.hash(&mut hasher);
    for output in outputs {
        match output {
            Output::Stream { name, text, extra } => {
                (0u8, name.as_str(), text, extra).hash(&mut hasher);
            }
            Output::DisplayData {
                data,
                metadata,
                extra,
            } => (1u8, data.entries(), metadata, extra).hash(&mut hasher),
            Output::ExecuteResult {
                data,
                metadata,
                execution_count,
                extra,
            } => (2u8, data.entries(), metadata, execution_count, extra).hash(&mut hasher),
            Output::Error {
                ename,
                evalue,
                traceback,
                extra,
            } => (3u8, ename, evalue, traceback, extra).hash(&mut hasher),
            Output::Other(value) => (4u8, value).hash(&mut hasher),
        }
    }
    hasher.finish()
}

fn source_digest(source: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    source.hash(&mut hasher);
    hasher.finish()
}

impl CellState {
    /// `cell` as kept, `outputs` its outputs' digest.
    fn of(cell: &Cell, outputs: u64) -> CellState {
        CellState {
            id: cell.id.clone(),
            cell_type: cell.type_name().to_owned(),
            source: cell.source.clone(),
            outputs,
        }
    }

    /// Whether this is `cell` as kept (compared in place: an unchanged cell costs no copy).
    fn is(&self, cell: &Cell, outputs: u64) -> bool {
        self.outputs == outputs
            && self.id == cell.id
            && self.cell_type == cell.type_name()
            && self.source == cell.source
    }
}

impl Snapshot {
    /// `notebook`'s cells, sharing each unchanged cell with `previous`.
    fn of(notebook: &Notebook, previous: Option<&Snapshot>, number: u64) -> Snapshot {
        let known: HashMap<&str, &Arc<CellState>> = previous
            .map(|p| p.cells.iter().map(|c| (c.id.as_str(), c)).collect())
            .unwrap_or_default();
        let cells = notebook
            .cells
            .iter()
            .map(|cell| {
                let outputs = outputs_digest(&cell.outputs, cell.execution_count);
                match known.get(cell.id.as_str()) {
                    Some(same) if same.is(cell, outputs) => Arc::clone(same),
                    _ => Arc::new(CellState::of(cell, outputs)),
                }
            })
            .collect();
        Snapshot { number, cells }
    }

    /// The snapshot after an edit of ours to the notebook `self` was taken of: the cells the
    /// edit touched (or that `self` lacks) kept anew, every other cell shared as it is.
    fn after_our_edit(&self, after: &Notebook, touched: &HashSet<&str>, number: u64) -> Snapshot {
        let known: HashMap<&str, &Arc<CellState>> =
            self.cells.iter().map(|c| (c.id.as_str(), c)).collect();
        let cells = after
            .cells
            .iter()
            .map(|cell| match known.get(cell.id.as_str()) {
                Some(same) if !touched.contains(cell.id.as_str()) => Arc::clone(same),
                _ => Arc::new(CellState::of(
                    cell,
                    outputs_digest(&cell.outputs, cell.execution_count),
                )),
            })
            .collect();
        Snapshot { number, cells }
    }

    fn same_as(&self, other: &Snapshot) -> bool {
        self.cells.len() == other.cells.len()
            && self
                .cells
                .iter()
                .zip(&other.cells)
                .all(|(a, b)| Arc::ptr_eq(a, b) || a == b)
    }
}

/// Who made a change.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Author {
    ThisAgent,
    /// Named by the room (one name or several, joined).
    Person(String),
    /// Someone the backend cannot name: another program saving the file, or an unnamed client
    /// of the room.
    Unnamed,
}

/// Changes, each with who made it.
pub type Authored = Vec<(Change, Author)>;

/// A change between two revisions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    Added {
        index: usize,
        id: String,
    },
    Deleted {
        id: String,
        cell_type: String,
        source: String,
    },
    Moved {
        id: String,
        from: usize,
        to: usize,
    },
    Source {
        index: usize,
        id: String,
        old_type: String,
        old: String,
    },
    Outputs {
        index: usize,
        id: String,
    },
}

impl Change {
    pub fn cell_id(&self) -> &str {
        match self {
            Change::Added { id, .. }
            | Change::Deleted { id, .. }
            | Change::Moved { id, .. }
            | Change::Source { id, .. }
            | Change::Outputs { id, .. } => id,
        }
    }
}

/// Each change from `old` to `new`, with who made it: this agent when what it left is what is
/// there now, else whoever `others` names for the cell (`None`: for a deletion).
pub fn changes(
    old: &Snapshot,
    new: &Snapshot,
    ours: &Ours,
    others: &dyn Fn(Option<&str>) -> Author,
) -> Authored {
    let was: HashMap<&str, usize> = old
        .cells
        .iter()
        .enumerate()
        .map(|(i, c)| (c.id.as_str(), i))
        .collect();
    let now: HashSet<&str> = new.cells.iter().map(|c| c.id.as_str()).collect();
    let moved = moved_cells(new, &was);
    let by = |mine: bool, id: &str| {
        if mine {
            Author::ThisAgent
        } else {
            others(Some(id))
        }
    };
    let mut found = Vec::new();
    for (index, cell) in new.cells.iter().enumerate() {
        let id = cell.id.as_str();
        let Some(&at) = was.get(id) else {
            let change = Change::Added {
                index,
                id: id.to_owned(),
            };
            found.push((change, by(ours.inserted.contains(id), id)));
            continue;
        };
        let before = &old.cells[at];
        if moved.contains(id) {
            let change = Change::Moved {
                id: id.to_owned(),
                from: at,
                to: index,
            };
            found.push((change, by(ours.moved.contains(id), id)));
        }
        if Arc::ptr_eq(before, cell) {
            continue;
        }
        if before.source != cell.source || before.cell_type != cell.cell_type {
            let mine = ours.sources.get(id) == Some(&source_digest(&cell.source));
            let change = Change::Source {
                index,
                id: id.to_owned(),
                old_type: before.cell_type.clone(),
                old: before.source.clone(),
            };
            found.push((change, by(mine, id)));
        }
        if before.outputs != cell.outputs {
            let mine = ours.outputs.get(id) == Some(&cell.outputs);
            let change = Change::Outputs {
                index,
                id: id.to_owned(),
            };
            found.push((change, by(mine, id)));
        }
    }
    for cell in &old.cells {
        if !now.contains(cell.id.as_str()) {
            let change = Change::Deleted {
                id: cell.id.clone(),
                cell_type: cell.cell_type.clone(),
                source: cell.source.clone(),
            };
            // A deleted cell is the one who last changed the structure's.
            let author = if ours.deleted.contains(&cell.id) {
                Author::ThisAgent
            } else {
                others(None)
            };
            found.push((change, author));
        }
    }
    found
}

/// The cells kept from `old` to `new` whose order among the kept ones changed: those outside a
/// longest run of kept cells still in their old order.
fn moved_cells<'a>(new: &'a Snapshot, was: &HashMap<&str, usize>) -> HashSet<&'a str> {
    let kept: Vec<(&str, usize)> = new
        .cells
        .iter()
        .filter_map(|c| was.get(c.id.as_str()).map(|&i| (c.id.as_str(), i)))
        .collect();
    // Longest increasing subsequence of old positions, O(n log n), with back links.
    let mut tails: Vec<usize> = Vec::new();
    let mut back: Vec<Option<usize>> = vec![None; kept.len()];
    for (k, &(_, position)) in kept.iter().enumerate() {
        let slot = tails.partition_point(|&t| kept[t].1 < position);
        back[k] = slot.checked_sub(1).map(|s| tails[s]);
        if slot == tails.len() {
            tails.push(k);
        } else {
            tails[slot] = k;
        }
    }
    let mut in_order = vec![false; kept.len()];
    let mut next = tails.last().copied();
    while let Some(k) = next {
        in_order[k] = true;
        next = back[k];
    }
    kept.iter()
        .zip(in_order)
        .filter(|(_, stays)| !stays)
        .map(|((id, _), _)| *id)
        .collect()
}

/// What a revision string names, once parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Since {
    /// A revision kept: diff against it.
    Kept,
    /// One of ours, older than those kept.
    TooOld,
    /// Not one this notebook handed out (another process, the notebook used again, a typo).
    Unknown,
}

/// A notebook's revisions and what this agent did to it.
pub struct Revisions {
    /// Tells this notebook's revisions from those of another process or an earlier use.
    epoch: String,
    inner: Mutex<History>,
}

struct History {
    snapshots: VecDeque<Arc<Snapshot>>,
    next: u64,
    /// Something changed since the newest snapshot (ours, or others' as the document said).
    stale: bool,
    others: Option<watch::Receiver<u64>>,
    /// Cells a run of ours wrote outputs into since the last look.
    ran: HashSet<String>,
    ours: Ours,
    /// The notebook the newest snapshot was taken of, when known: an edit of ours planned
    /// against that very notebook takes its snapshot from the newest, touching only its cells.
    newest_from: Option<Weak<Notebook>>,
}

impl Revisions {
    /// `others`: the document's count of others' changes, when it hears of them.
    pub fn new(others: Option<watch::Receiver<u64>>) -> Revisions {
        let epoch = format!("{:06x}", rand_u32() & 0xff_ffff);
        Revisions {
            epoch,
            inner: Mutex::new(History {
                snapshots: VecDeque::new(),
                next: 1,
                stale: true,
                others,
                ran: HashSet::new(),
                ours: Ours::default(),
                newest_from: None,
            }),
        }
    }

    /// The string an agent is given for a snapshot.
    pub fn name(&self, number: u64) -> String {
        format!("{}-{number}", self.epoch)
    }

    /// Whether the newest revision may no longer be the notebook as it is: something changed
    /// since (a look at the document is needed to say what).
    pub fn stale(&self) -> bool {
        let history = self.inner.lock().expect("revisions lock");
        let heard = history
            .others
            .as_ref()
            .is_some_and(|others| others.has_changed().unwrap_or(false));
        history.stale || heard || history.snapshots.is_empty()
    }

    /// The newest revision without looking at the document: `None` when it may be stale.
    pub fn newest_if_fresh(&self) -> Option<String> {
        if self.stale() {
            return None;
        }
        let history = self.inner.lock().expect("revisions lock");
        history.snapshots.back().map(|s| self.name(s.number))
    }

    /// The newest revision, stale or not (an older revision is always safe to hand out: it
    /// only shows a change twice).
    pub fn newest(&self) -> Option<String> {
        let history = self.inner.lock().expect("revisions lock");
        history.snapshots.back().map(|s| self.name(s.number))
    }

    /// Marks others' changes heard so far as looked at; call before reading the document.
    pub fn looking(&self) {
        let mut history = self.inner.lock().expect("revisions lock");
        history.stale = false;
        if let Some(others) = history.others.as_mut() {
            others.borrow_and_update();
        }
    }

    /// A change of ours is under way or done: the newest revision is stale.
    pub fn we_changed(&self) {
        self.inner.lock().expect("revisions lock").stale = true;
    }

    /// A run of ours wrote outputs into `cell_id`.
    pub fn we_ran(&self, cell_id: &str) {
        let mut history = self.inner.lock().expect("revisions lock");
        history.stale = true;
        history.ran.insert(cell_id.to_owned());
    }

    /// An edit of ours (see `Ours::edited`).
    pub fn we_edited(&self, before: &Notebook, after: &Notebook, touched: &HashSet<&str>) {
        let mut history = self.inner.lock().expect("revisions lock");
        history.stale = true;
        history.ours.edited(before, after, touched);
    }

    /// An edit of ours from `before` to `after` (see `Ours::edited`), and its revision when
    /// `before` is the very notebook the newest revision was taken of: then everything that
    /// differs is ours, and only the touched cells are looked at. `None`: `observe` must say.
    pub fn we_edited_shared(
        &self,
        before: &Arc<Notebook>,
        after: &Arc<Notebook>,
        touched: &HashSet<&str>,
    ) -> Option<String> {
        let mut history = self.inner.lock().expect("revisions lock");
        history.stale = true;
        history.ours.edited(before, after, touched);
        let from_newest = history
            .newest_from
            .as_ref()
            .is_some_and(|from| std::ptr::eq(from.as_ptr(), Arc::as_ptr(before)));
        if !from_newest || !history.ran.is_empty() {
            return None;
        }
        let newest = history.snapshots.back()?.clone();
        let next = history.next;
        let number = history.push(newest.after_our_edit(after, touched, next));
        history.newest_from = Some(Arc::downgrade(after));
        history.stale = false;
        Some(self.name(number))
    }

    /// `observe`, remembering `notebook` as the one the newest revision was taken of when it
    /// is (see `we_edited_shared`).
    pub fn observe_shared(
        &self,
        notebook: &Arc<Notebook>,
        others: &dyn Fn(Option<&str>) -> Author,
    ) -> String {
        let mut history = self.inner.lock().expect("revisions lock");
        let (number, current) = history.observe(notebook, others);
        if current {
            history.newest_from = Some(Arc::downgrade(notebook));
        }
        self.name(number)
    }

    /// The notebook as a read or an edit of ours just saw it: its revision if every difference
    /// from the newest is ours, else the newest (the agent has not been told of the others').
    pub fn observe(&self, notebook: &Notebook, others: &dyn Fn(Option<&str>) -> Author) -> String {
        let mut history = self.inner.lock().expect("revisions lock");
        let (number, _) = history.observe(notebook, others);
        self.name(number)
    }

    /// What changed from revision `since` to `notebook`, or why it cannot say. The snapshot of
    /// `notebook` is returned for `told`.
    pub fn since(
        &self,
        since: &str,
        notebook: &Notebook,
        others: &dyn Fn(Option<&str>) -> Author,
    ) -> (Result<Authored, Since>, Arc<Snapshot>) {
        let mut history = self.inner.lock().expect("revisions lock");
        history.note_runs(notebook);
        let next = history.next;
        let current = Arc::new(Snapshot::of(
            notebook,
            history.snapshots.back().map(|s| &**s),
            next,
        ));
        let found = match self.number_of(since) {
            None => Err(Since::Unknown),
            Some(number) => match history.snapshots.iter().find(|s| s.number == number) {
                Some(base) => Ok(changes(base, &current, &history.ours, others)),
                None if number < next => Err(Since::TooOld),
                None => Err(Since::Unknown),
            },
        };
        (found, current)
    }

    /// The agent was shown everything up to `snapshot` (a changes answer): its revision.
    pub fn told(&self, snapshot: Arc<Snapshot>) -> String {
        let mut history = self.inner.lock().expect("revisions lock");
        let number = match history.snapshots.back() {
            Some(newest) if newest.same_as(&snapshot) => newest.number,
            _ => history.push(Arc::unwrap_or_clone(snapshot)),
        };
        self.name(number)
    }

    fn number_of(&self, revision: &str) -> Option<u64> {
        // As copied out of a sentence: `879578-2).` or in backticks.
        let revision = revision.trim_matches(|c: char| !c.is_ascii_alphanumeric());
        let (epoch, number) = revision.rsplit_once('-')?;
        (epoch == self.epoch).then(|| number.parse().ok())?
    }
}

impl History {
    /// See `Revisions::observe`: the revision's number, and whether it is `notebook` (false:
    /// the newest, still stale, as others changed what `notebook` shows).
    fn observe(
        &mut self,
        notebook: &Notebook,
        others: &dyn Fn(Option<&str>) -> Author,
    ) -> (u64, bool) {
        self.note_runs(notebook);
        let next = self.next;
        let snapshot = Snapshot::of(notebook, self.snapshots.back().map(|s| &**s), next);
        let number = match self.snapshots.back() {
            None => self.push(snapshot),
            Some(newest) if newest.same_as(&snapshot) => newest.number,
            Some(newest) => {
                let all_ours = changes(newest, &snapshot, &self.ours, others)
                    .iter()
                    .all(|(_, by)| *by == Author::ThisAgent);
                if !all_ours {
                    return (newest.number, false);
                }
                self.push(snapshot)
            }
        };
        self.stale = false;
        (number, true)
    }

    /// Adds `snapshot` as the newest revision (renumbered as the next); returns its number.
    /// Whoever knows the notebook it was taken of says so after (`newest_from`).
    fn push(&mut self, mut snapshot: Snapshot) -> u64 {
        self.newest_from = None;
        snapshot.number = self.next;
        self.next += 1;
        self.snapshots.push_back(Arc::new(snapshot));
        while self.snapshots.len() > HISTORY {
            self.snapshots.pop_front();
        }
        self.next - 1
    }

    /// The outputs our runs left in the cells they wrote, as `notebook` holds them now.
    fn note_runs(&mut self, notebook: &Notebook) {
        for id in std::mem::take(&mut self.ran) {
            if let Some(cell) = notebook.cells.iter().find(|c| c.id == id) {
                self.ours.ran(cell);
            }
        }
    }
}

/// A little randomness for epochs, from the clock and the process (no secret rests on it).
fn rand_u32() -> u32 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    std::time::SystemTime::now().hash(&mut hasher);
    std::process::id().hash(&mut hasher);
    static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    COUNT
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        .hash(&mut hasher);
    hasher.finish() as u32
}

#[cfg(test)]
mod tests;
