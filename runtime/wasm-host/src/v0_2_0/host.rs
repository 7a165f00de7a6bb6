//! The host functions of WIT v0.2.0: logging, the guest's config, the host's versions, and the
//! grantable notebook functions of the notebook unit (`wasm::host::notebook`) (cells by `cell-ref`), with this version's
//! types.

use super::convert::{cell_at, cell_type, host_error, to_wit};
use super::{API_VERSION, config, host_info, log, notebook, types};
use crate::host::GuestState;

type HostResult<R> = Result<R, types::HostError>;

impl types::Host for GuestState {}

logging_and_config_host!();

impl host_info::Host for GuestState {
    fn api_version(&mut self) -> String {
        API_VERSION.to_owned()
    }

    fn server_version(&mut self) -> String {
        env!("CARGO_PKG_VERSION").to_owned()
    }
}

notebook_host! {
    fn read_cells(&mut self, notebook: String) -> HostResult<Vec<types::Cell>> {
        let cells = self.notebook().read_cells(&notebook).map_err(host_error)?;
        Ok(cells
            .iter()
            .enumerate()
            .map(|(index, cell)| to_wit(index, cell))
            .collect())
    }

    fn read_cell(&mut self, notebook: String, cell: types::CellRef) -> HostResult<types::Cell> {
        let (index, cell) =
            self.notebook().read_cell(&notebook, cell_at(cell)).map_err(host_error)?;
        Ok(to_wit(index, &cell))
    }

    fn insert_cell(
        &mut self,
        notebook: String,
        before: Option<types::CellRef>,
        kind: types::CellKind,
        source: String,
    ) -> HostResult<String> {
        let before = before.map(cell_at);
        self.notebook().insert_cell(&notebook, before, cell_type(kind), source, None)
            .map_err(host_error)
    }

    fn overwrite_cell(
        &mut self,
        notebook: String,
        cell: types::CellRef,
        source: String,
        expected_source: Option<String>,
    ) -> HostResult<()> {
        self.notebook().overwrite_cell(&notebook, cell_at(cell), source, expected_source, None)
            .map(drop)
            .map_err(host_error)
    }

    fn move_cell(
        &mut self,
        notebook: String,
        cell: types::CellRef,
        before: Option<types::CellRef>,
    ) -> HostResult<()> {
        self.notebook().move_cell(&notebook, cell_at(cell), before.map(cell_at), None)
            .map_err(host_error)
    }

    fn delete_cell(&mut self, notebook: String, cell: types::CellRef) -> HostResult<()> {
        self.notebook().delete_cell(&notebook, cell_at(cell), None).map_err(host_error)
    }
}
