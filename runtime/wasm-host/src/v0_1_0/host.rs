//! The host functions of WIT v0.1.0: logging, the guest's config, and the grantable notebook
//! functions of the notebook unit (`crate::host::notebook`) (cells by index), with this version's types.

use super::convert::{cell_type, host_error, to_wit};
use super::{config, log, notebook, types};
use crate::host::CellAt;
use crate::host::GuestState;

type HostResult<R> = Result<R, types::HostError>;

impl types::Host for GuestState {}

logging_and_config_host!();

notebook_host! {
    fn read_cells(&mut self, notebook: String) -> HostResult<Vec<types::Cell>> {
        let cells = self.notebook().read_cells(&notebook).map_err(host_error)?;
        Ok(cells.iter().map(to_wit).collect())
    }

    fn insert_cell(
        &mut self,
        notebook: String,
        index: u32,
        kind: types::CellKind,
        source: String,
    ) -> HostResult<String> {
        let before = Some(CellAt::Index(index));
        self.notebook().insert_cell(&notebook, before, cell_type(kind), source, None)
            .map_err(host_error)
    }

    fn overwrite_cell(&mut self, notebook: String, at: u32, source: String) -> HostResult<()> {
        self.notebook().overwrite_cell(&notebook, CellAt::Index(at), source, None, None)
            .map(drop)
            .map_err(host_error)
    }

    fn move_cell(&mut self, notebook: String, from: u32, to: u32) -> HostResult<()> {
        self.notebook().move_cell_to(&notebook, from, to).map_err(host_error)
    }

    fn delete_cell(&mut self, notebook: String, at: u32) -> HostResult<()> {
        self.notebook().delete_cell(&notebook, CellAt::Index(at), None).map_err(host_error)
    }
}
