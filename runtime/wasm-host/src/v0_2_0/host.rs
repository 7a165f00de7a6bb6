//! The host functions of WIT v0.2.0: logging, the guest's config, the host's versions, and the
//! grantable notebook functions of the notebook unit (cells by `cell-ref`), with this version's
//! types. What 0.2.0 and later share is `host_since_0_2!` (`common_host.rs`).

use super::convert::{cell_at, cell_type, host_error, to_wit};
use super::{API_VERSION, config, host_info, log, notebook, types};

host_since_0_2! {
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
