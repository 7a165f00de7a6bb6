//! The grantable notebook host functions, in host terms, shared by every WIT version.
//!
//! - **Slice** ([`NotebookState`]): the cells the call in progress has read, so an overwrite of
//!   one expects the source the guest saw, as for a tool; reached as a [`NotebookHost`] that also
//!   borrows the call's clock.
//! - **Policy check** ([`NotebookHost::on_notebook`]): the function must be granted (`grants`)
//!   for the notebook the name resolves to; then it is a thin call into the domain (the
//!   operations tools use), so a guest's `execute-code` gets kernel readiness, the auto-restart
//!   policy and the gone-kernel message, and its edits the conflict check, as tools do.
//! - **Linker registration** ([`link`]): the `notebook` interface of every WIT version; a
//!   version's `host.rs` only converts its types and calls here.
//! - **Spans**: one `extension.host_function` use per call, allowed or refused.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use opentelemetry::KeyValue;
use serde_json::Value;
use wasmtime::component::{HasSelf, Linker};
use wasmtime_wasi::WasiCtxBuilder;

use super::unit::{HostCallError, HostResult, HostUnit};
use crate::asking::{self, NotAsked};
use crate::limits::CallClock;
use crate::policy::Snapshot;
use crate::policy::grants::{HostFunction, Wanted};
use crate::settings::GuestSettings;
use crate::wait::time_boxed;
use crate::{v0_1_0, v0_2_0, v0_3_0};
use notebook_format::edit::Edit;
use notebook_format::notebook::{Cell, CellType, Notebook};
use server_core::domain::Domain;
use server_core::domain::cells::{self, Expected, Overwrite, resolve_cell};
use server_core::domain::execution::ExecutionRequest;
use server_core::domain::notebooks::NotebookInUse;
use server_core::domain::outputs::{Output, StreamName};
use server_core::domain::versions;
use server_core::hooks::{CallScope, GuestUse};

/// The cells read by notebook name: (id, source) in order.
type Seen = HashMap<String, Vec<(String, String)>>;

/// The notebook functions' slice of a guest's store.
pub struct NotebookState {
    settings: Arc<GuestSettings>,
    /// The cells this call has read, by notebook name.
    seen: Seen,
}

impl HostUnit for NotebookState {
    fn new(settings: &Arc<GuestSettings>, _: &Snapshot, _: &mut WasiCtxBuilder) -> Self {
        NotebookState {
            settings: settings.clone(),
            seen: HashMap::new(),
        }
    }

    fn start_call(&mut self, _: Instant) {
        self.seen.clear();
    }
}

/// The notebook functions of one store: its slice and the call's clock, borrowed together.
pub struct NotebookHost<'a> {
    pub state: &'a mut NotebookState,
    pub clock: &'a mut CallClock,
}

/// The `notebook` interface of every WIT version, for store data implementing each version's.
pub fn link<T>(linker: &mut Linker<T>) -> wasmtime::Result<()>
where
    T: v0_1_0::notebook::Host + v0_2_0::notebook::Host + v0_3_0::notebook::Host + 'static,
{
    v0_1_0::notebook::add_to_linker::<T, HasSelf<T>>(linker, |s| s)?;
    v0_2_0::notebook::add_to_linker::<T, HasSelf<T>>(linker, |s| s)?;
    v0_3_0::notebook::add_to_linker::<T, HasSelf<T>>(linker, |s| s)
}

/// A cell as a guest names it: by id (stable) or by index (0-based, as it is when the edit is
/// planned).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CellAt {
    Id(String),
    Index(u32),
}

impl CellAt {
    /// The cell's index in `notebook`: an unknown id is not found, an index past the end is
    /// invalid.
    fn find(&self, notebook: &Notebook) -> Result<usize, server_core::domain::Error> {
        match self {
            CellAt::Id(id) => resolve_cell(notebook, None, Some(id)),
            CellAt::Index(i) => resolve_cell(notebook, Some(i64::from(*i)), None)
                .map_err(|e| server_core::domain::Error::InvalidArguments(e.message().clone())),
        }
    }

    /// A position before which something goes: any cell, or (by index) the end.
    fn before(&self, notebook: &Notebook) -> Result<usize, server_core::domain::Error> {
        match self {
            CellAt::Index(i) if *i as usize == notebook.cells.len() => Ok(notebook.cells.len()),
            other => other.find(notebook),
        }
    }
}

impl NotebookHost<'_> {
    /// Runs code in the notebook's kernel; the nbformat outputs as a JSON array.
    pub fn execute_code(
        &mut self,
        notebook: &str,
        code: String,
        timeout_seconds: Option<u32>,
    ) -> HostResult<String> {
        self.on_notebook(
            HostFunction::ExecuteCode,
            notebook,
            |in_use, domain| async move {
                let timeout = domain
                    .settings
                    .execution
                    .resolve(timeout_seconds.map_or(0.0, f64::from));
                // The domain's path, as execute_code's: kernel readiness (auto-restart policy),
                // the execute hooks and every policy, the gone-kernel message.
                let executed = domain
                    .execute_in(&in_use, ExecutionRequest::new(code, timeout))
                    .await?;
                let mut outputs = executed.outcome.outputs;
                if let Some(note) = executed.replaced {
                    // The guest sees the replacement where a person would: a stream before the
                    // outputs.
                    outputs.insert(0, Output::stream(StreamName::Stderr, note));
                }
                Ok(Value::Array(Output::all_to_json(&outputs)).to_string())
            },
        )
    }

    /// Every cell of the notebook; what the guest saw is remembered for this call.
    pub fn read_cells(&mut self, notebook: &str) -> HostResult<Vec<Cell>> {
        let read = self.on_notebook(HostFunction::ReadCells, notebook, |in_use, _| async move {
            Ok((in_use.name.clone(), cells::read(&in_use).await?))
        });
        let (name, notebook) = read?;
        self.saw(name, &notebook);
        Ok(notebook.cells)
    }

    /// One cell and its index (needs the `read-cells` grant).
    pub fn read_cell(&mut self, notebook: &str, at: CellAt) -> HostResult<(usize, Cell)> {
        let read = self.on_notebook(HostFunction::ReadCells, notebook, |in_use, _| async move {
            Ok((in_use.name.clone(), cells::read(&in_use).await?))
        });
        let (name, notebook) = read?;
        let index = at.find(&notebook)?;
        self.saw(name, &notebook);
        let cell = notebook.cells.into_iter().nth(index).expect("found above");
        Ok((index, cell))
    }

    /// The notebook's structure version (needs the `read-cells` grant).
    pub fn notebook_version(&mut self, notebook: &str) -> HostResult<String> {
        self.on_notebook(HostFunction::ReadCells, notebook, |in_use, _| async move {
            Ok(versions::notebook_version(&cells::read(&in_use).await?))
        })
    }

    fn saw(&mut self, name: String, notebook: &Notebook) {
        let seen = notebook
            .cells
            .iter()
            .map(|c| (c.id.clone(), c.source.clone()))
            .collect();
        self.state.seen.insert(name, seen);
    }

    /// Inserts a cell before `before` (`None`: at the end); returns its id. With
    /// `expected_notebook`, refused as a conflict unless the notebook's structure is still at
    /// that version.
    pub fn insert_cell(
        &mut self,
        notebook: &str,
        before: Option<CellAt>,
        kind: CellType,
        source: String,
        expected_notebook: Option<String>,
    ) -> HostResult<String> {
        self.on_notebook(HostFunction::InsertCell, notebook, |in_use, _| async move {
            let cell = Cell::new(kind, source);
            let id = cell.id.clone();
            let expected = Expected {
                cell: None,
                notebook: expected_notebook,
            };
            cells::update(&in_use, move |nb| {
                expected.check_structure(nb)?;
                let index = match &before {
                    Some(at) => at.before(nb)?,
                    None => nb.cells.len(),
                };
                Ok(vec![Edit::Insert { index, cell }])
            })
            .await?;
            Ok(id)
        })
    }

    /// Replaces a cell's source (a code cell's outputs are cleared); returns its new version.
    /// The cell must still hold `expected` when given and be at `expected_version` when given;
    /// with neither, it must hold the source this call read (if it read it): otherwise the edit
    /// is a conflict, as for the overwrite tool.
    pub fn overwrite_cell(
        &mut self,
        notebook: &str,
        at: CellAt,
        source: String,
        expected: Option<String>,
        expected_version: Option<String>,
    ) -> HostResult<String> {
        let seen = self.state.seen.clone();
        self.on_notebook(
            HostFunction::OverwriteCell,
            notebook,
            |in_use, _| async move {
                // A cell this call read is named by the id it had and must still have the
                // source the guest saw (unless the guest said what it expects).
                let read = seen_in(&seen, &in_use.name, &at);
                let (index, id) = match (&at, &read) {
                    (_, Some((id, _))) | (CellAt::Id(id), None) => (None, Some(id.clone())),
                    (CellAt::Index(i), None) => (Some(i64::from(*i)), None),
                };
                let expected = match &expected_version {
                    Some(_) => expected,
                    None => expected.or(read.map(|(_, source)| source)),
                };
                let versions = Expected {
                    cell: expected_version,
                    notebook: None,
                };
                let overwritten = cells::overwrite_if(
                    &in_use,
                    Overwrite {
                        index,
                        id,
                        source,
                        expected,
                        clear_outputs: true,
                    },
                    &versions,
                )
                .await?;
                Ok(overwritten.version)
            },
        )
    }

    /// Moves a cell so that it ends up before `before` (`None`: at the end); with
    /// `expected_version`, refused unless the cell is still at that version.
    pub fn move_cell(
        &mut self,
        notebook: &str,
        at: CellAt,
        before: Option<CellAt>,
        expected_version: Option<String>,
    ) -> HostResult<()> {
        self.on_notebook(HostFunction::MoveCell, notebook, |in_use, _| async move {
            let expected = Expected {
                cell: expected_version,
                notebook: None,
            };
            let checked = in_use.clone();
            cells::update(&in_use, move |nb| {
                let from = at.find(nb)?;
                expected.check(&checked, nb, from)?;
                let before = match &before {
                    Some(target) => target.before(nb)?,
                    None => nb.cells.len(),
                };
                // Its index once it is out of the list, then back in before `before`.
                let to = if before > from { before - 1 } else { before };
                if to == from {
                    return Ok(Vec::new());
                }
                Ok(vec![Edit::Move {
                    cell_id: nb.cells[from].id.clone(),
                    to,
                }])
            })
            .await?;
            Ok(())
        })
    }

    /// Moves a cell to index `to` (its index afterwards): WIT 0.1.0's `move-cell`.
    pub fn move_cell_to(&mut self, notebook: &str, from: u32, to: u32) -> HostResult<()> {
        self.on_notebook(HostFunction::MoveCell, notebook, |in_use, _| async move {
            let targets = cells::MoveTargets {
                source_index: Some(i64::from(from)),
                target_index: Some(i64::from(to)),
                ..Default::default()
            };
            cells::move_cell(&in_use, &targets).await?;
            Ok(())
        })
    }

    /// Deletes a cell; with `expected_version`, refused unless it is still at that version.
    pub fn delete_cell(
        &mut self,
        notebook: &str,
        at: CellAt,
        expected_version: Option<String>,
    ) -> HostResult<()> {
        self.on_notebook(HostFunction::DeleteCell, notebook, |in_use, _| async move {
            let expected = Expected {
                cell: expected_version,
                notebook: None,
            };
            cells::delete_if(&in_use, |nb| Ok(vec![at.find(nb)?]), &expected).await?;
            Ok(())
        })
    }
}

/// The cell `at` as this call read it, from a copy of the seen cells (the host function's
/// future cannot borrow the store).
fn seen_in(seen: &Seen, notebook: &str, at: &CellAt) -> Option<(String, String)> {
    let mut seen = seen.get(notebook)?.iter();
    match at {
        CellAt::Id(id) => seen.find(|(seen, _)| seen == id).cloned(),
        CellAt::Index(i) => seen.nth(*i as usize).cloned(),
    }
}

/// The refusal, with a line in the operator's log saying how to grant it.
fn refuse(
    settings: &GuestSettings,
    function: HostFunction,
    notebook: Option<&str>,
    why: &NotAsked,
) -> HostCallError {
    {
        let grant = match notebook {
            Some(name) => format!("\"{function}\" (or \"{function}:{name}\")"),
            None => format!("\"{function}\""),
        };
        let on = notebook
            .map(|n| format!(" on notebook '{n}'"))
            .unwrap_or_default();
        tracing::warn!(
            guest = settings.name(),
            "refused a call to host function '{function}'{on}: not granted{note}. To allow it, \
             add {grant} to grants of this guest's [[extension]] entry in the config file{hint}",
            note = why.note(),
            hint = why.hint()
        );
        HostCallError::NotGranted(format!(
            "host function '{function}'{on} is not granted to '{}'; the operator can add {grant} \
             to this guest's grants{}",
            settings.name(),
            why.note()
        ))
    }
}

impl NotebookHost<'_> {
    /// Every grantable function passes here, off the guest's CPU clock: refused unless granted
    /// for the notebook it resolves to; otherwise `work` runs on the server's runtime while this
    /// (blocking-permitted) thread waits, no longer than the call's deadline.
    pub fn on_notebook<R, F, Fut>(
        &mut self,
        function: HostFunction,
        notebook: &str,
        work: F,
    ) -> HostResult<R>
    where
        F: FnOnce(Arc<NotebookInUse>, Arc<Domain>) -> Fut,
        Fut: std::future::Future<Output = HostResult<R>>,
    {
        let settings = self.state.settings.clone();
        let deadline = self.clock.deadline;
        let started = SystemTime::now();
        // The policy as it is now: a grant or revoke counts from the next use.
        let policy = settings.policy.get();
        let outcome = self.clock.off_the_clock(|| {
            // Before the notebook is known: refused at once unless a prompt could grant it.
            if !policy.grants.allows(function, None) && !asking::open(&settings) {
                return Err(refuse(&settings, function, None, &NotAsked::Off));
            }
            let Some((domain, handle)) = settings.link.get() else {
                return Err(HostCallError::NotAvailable(format!(
                    "host function '{function}' is not available until the server has started"
                )));
            };
            let in_use = domain.notebook(Some(notebook))?;
            let wanted = Wanted::Function {
                function,
                notebook: Some(&in_use.name),
            };
            if let Err(why) = asking::permit(&settings, &policy, deadline, wanted) {
                return Err(refuse(&settings, function, Some(&in_use.name), &why));
            }
            let _enter = handle.enter();
            time_boxed(deadline, &settings.stop, work(in_use, domain))
                .unwrap_or_else(|why| Err(HostCallError::Stopped(why)))
        });
        let refused = matches!(outcome, Err(HostCallError::NotGranted(_)));
        let mut attributes = vec![
            KeyValue::new("extension.name", settings.name().to_owned()),
            KeyValue::new("host_function.name", function.name()),
            KeyValue::new("allowed", !refused),
        ];
        if !notebook.is_empty() {
            attributes.push(KeyValue::new("notebook", notebook.to_owned()));
        }
        if let Err(e) = &outcome {
            attributes.push(KeyValue::new("error", true));
            attributes.push(KeyValue::new("error.message", format!("{e:?}")));
        }
        GuestUse::ended("extension.host_function", started, attributes)
            .record(CallScope::current().as_ref());
        if let Err(HostCallError::Stopped(why)) = &outcome {
            // The guest gets the error back, and the epoch check ends it as soon as it runs on.
            self.clock.stopped = Some(*why);
        }
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `function` called on a fresh slice of a guest granted `grants`.
    fn call(grants: &[&str], function: HostFunction) -> HostResult<()> {
        let settings = Arc::new(GuestSettings::for_tests_with("g", grants));
        let mut state = NotebookState::new(
            &settings,
            &settings.policy.snapshot(),
            &mut WasiCtxBuilder::new(),
        );
        let mut clock = CallClock::new(std::time::Duration::from_secs(1));
        clock.start(
            Instant::now() + std::time::Duration::from_secs(1),
            std::time::Duration::from_secs(1),
        );
        let mut host = NotebookHost {
            state: &mut state,
            clock: &mut clock,
        };
        host.on_notebook(
            function,
            "",
            |_: Arc<NotebookInUse>, _: Arc<Domain>| async { Ok(()) },
        )
    }

    #[test]
    fn ungranted_functions_are_refused_and_granted_ones_wait_for_the_server() {
        match call(&[], HostFunction::ReadCells) {
            Err(HostCallError::NotGranted(message)) => {
                assert!(
                    message.contains("'read-cells' is not granted to 'g'"),
                    "{message}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            call(&["delete-cell"], HostFunction::DeleteCell),
            Err(HostCallError::NotAvailable(_))
        ));
    }
}
