//! The host functions of WIT v0.1.0: logging, the guest's config, and the grantable notebook
//! functions, each a thin call into the domain (the same operations tools use) after the grant
//! check of [`GuestState::on_notebook`].

use serde_json::Value;

use super::convert::{cell_type, host_error, to_wit};
use super::{config, log, notebook, types};
use crate::domain::cells::{self, MoveTargets, Overwrite, resolve_cell};
use crate::jupyter::kernel::ExecutionRequest;
use crate::jupyter::notebook::Cell;
use crate::wasm::grants::HostFunction;
use crate::wasm::sandbox::GuestState;

type HostResult<R> = Result<R, types::HostError>;

impl types::Host for GuestState {}

impl log::Host for GuestState {
    fn log(&mut self, level: log::Level, message: String) {
        let guest = self.settings.name();
        match level {
            log::Level::Trace => tracing::trace!(guest, "{message}"),
            log::Level::Debug => tracing::debug!(guest, "{message}"),
            log::Level::Info => tracing::info!(guest, "{message}"),
            log::Level::Warn => tracing::warn!(guest, "{message}"),
            log::Level::Error => tracing::error!(guest, "{message}"),
        }
    }
}

impl config::Host for GuestState {
    fn get_config(&mut self) -> String {
        self.settings.config_json.clone()
    }
}

/// A WIT index as the domain's (which also takes negative ones from tools).
fn index(i: u32) -> Option<i64> {
    Some(i64::from(i))
}

impl notebook::Host for GuestState {
    fn execute_code(
        &mut self,
        notebook: String,
        code: String,
        timeout_seconds: Option<u32>,
    ) -> HostResult<String> {
        self.on_notebook(
            HostFunction::ExecuteCode,
            &notebook,
            |in_use, domain| async move {
                let timeout = domain
                    .settings
                    .execution
                    .resolve(timeout_seconds.map_or(0.0, f64::from));
                // The domain's path, as execute_code's: kernel readiness (auto-restart policy), the
                // execute hooks and every policy, the gone-kernel message.
                let executed = domain
                    .execute_in(&in_use, ExecutionRequest::new(code, timeout))
                    .await?;
                let mut outputs = executed.outcome.outputs;
                if let Some(note) = executed.replaced {
                    // The guest sees the replacement where a person would: a stream before the outputs.
                    outputs.insert(
                    0,
                    serde_json::json!({"output_type": "stream", "name": "stderr", "text": note}),
                );
                }
                Ok(Value::Array(outputs).to_string())
            },
        )
        .map_err(host_error)
    }

    fn read_cells(&mut self, notebook: String) -> HostResult<Vec<types::Cell>> {
        let read = self.on_notebook(HostFunction::ReadCells, &notebook, |in_use, _| async move {
            Ok((in_use.name.clone(), cells::read(&in_use).await?))
        });
        let (name, notebook) = read.map_err(host_error)?;
        let seen = notebook
            .cells
            .iter()
            .map(|c| (c.id.clone(), c.source.clone()))
            .collect();
        self.seen.insert(name, seen);
        Ok(notebook.cells.iter().map(to_wit).collect())
    }

    fn insert_cell(
        &mut self,
        notebook: String,
        index: u32,
        kind: types::CellKind,
        source: String,
    ) -> HostResult<String> {
        self.on_notebook(
            HostFunction::InsertCell,
            &notebook,
            |in_use, _| async move {
                let cell = Cell::new(cell_type(kind), source);
                let (_, id, _) = cells::insert(&in_use, i64::from(index), cell).await?;
                Ok(id)
            },
        )
        .map_err(host_error)
    }

    fn overwrite_cell(&mut self, notebook: String, at: u32, source: String) -> HostResult<()> {
        let seen = self.seen.clone();
        self.on_notebook(
            HostFunction::OverwriteCell,
            &notebook,
            |in_use, _| async move {
                // A cell this call read is named by the id it had and must still have the source
                // the guest saw; otherwise the index names whatever cell is there now.
                let (id, expected) = match seen.get(&in_use.name).and_then(|s| s.get(at as usize)) {
                    Some((id, source)) => (Some(id.clone()), Some(source.clone())),
                    None => (None, None),
                };
                cells::overwrite(
                    &in_use,
                    Overwrite {
                        index: index(at),
                        id,
                        source,
                        expected,
                        clear_outputs: true,
                    },
                )
                .await?;
                Ok(())
            },
        )
        .map_err(host_error)
    }

    fn move_cell(&mut self, notebook: String, from: u32, to: u32) -> HostResult<()> {
        self.on_notebook(HostFunction::MoveCell, &notebook, |in_use, _| async move {
            let targets = MoveTargets {
                source_index: index(from),
                target_index: index(to),
                ..Default::default()
            };
            cells::move_cell(&in_use, &targets).await?;
            Ok(())
        })
        .map_err(host_error)
    }

    fn delete_cell(&mut self, notebook: String, at: u32) -> HostResult<()> {
        self.on_notebook(
            HostFunction::DeleteCell,
            &notebook,
            |in_use, _| async move {
                cells::delete(&in_use, |nb| Ok(vec![resolve_cell(nb, index(at), None)?])).await?;
                Ok(())
            },
        )
        .map_err(host_error)
    }
}
