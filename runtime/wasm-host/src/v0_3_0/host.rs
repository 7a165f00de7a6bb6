//! The host functions of WIT v0.3.0: logging, the guest's config, the host's versions, the
//! grantable notebook functions of the notebook unit (cells by `cell-ref`, with versions), the
//! client functions of the client unit and the secrets of the secrets unit, with this version's
//! types.

use super::convert::{cell_at, cell_type, host_error, to_wit};
use super::{API_VERSION, client, config, host_info, log, notebook, secrets, types};
use crate::host::{Elicited, GuestState};

host_since_0_2! {
    fn notebook_version(&mut self, notebook: String) -> HostResult<String> {
        self.notebook().notebook_version(&notebook).map_err(host_error)
    }

    fn insert_cell(
        &mut self,
        notebook: String,
        before: Option<types::CellRef>,
        kind: types::CellKind,
        source: String,
        expected_notebook_version: Option<String>,
    ) -> HostResult<String> {
        let before = before.map(cell_at);
        self.notebook()
            .insert_cell(&notebook, before, cell_type(kind), source, expected_notebook_version)
            .map_err(host_error)
    }

    fn overwrite_cell(
        &mut self,
        notebook: String,
        cell: types::CellRef,
        source: String,
        expected_source: Option<String>,
        expected_version: Option<String>,
    ) -> HostResult<String> {
        self.notebook()
            .overwrite_cell(&notebook, cell_at(cell), source, expected_source, expected_version)
            .map_err(host_error)
    }

    fn move_cell(
        &mut self,
        notebook: String,
        cell: types::CellRef,
        before: Option<types::CellRef>,
        expected_version: Option<String>,
    ) -> HostResult<()> {
        self.notebook()
            .move_cell(&notebook, cell_at(cell), before.map(cell_at), expected_version)
            .map_err(host_error)
    }

    fn delete_cell(
        &mut self,
        notebook: String,
        cell: types::CellRef,
        expected_version: Option<String>,
    ) -> HostResult<()> {
        self.notebook()
            .delete_cell(&notebook, cell_at(cell), expected_version)
            .map_err(host_error)
    }
}

impl client::Host for GuestState {
    fn elicit(
        &mut self,
        message: String,
        requested_schema: String,
    ) -> HostResult<client::ElicitAnswer> {
        let answer = self.client().elicit(&message, &requested_schema);
        Ok(match answer.map_err(host_error)? {
            Elicited::Accepted(content) => client::ElicitAnswer::Accept(content),
            Elicited::Declined => client::ElicitAnswer::Decline,
            Elicited::Cancelled => client::ElicitAnswer::Cancel,
        })
    }

    fn sample(&mut self, request: String) -> HostResult<String> {
        self.client().sample(&request).map_err(host_error)
    }

    fn progress(&mut self, done: f64, total: Option<f64>, message: Option<String>) {
        self.client().progress(done, total, message)
    }
}

impl secrets::Host for GuestState {
    fn get(&mut self, name: String) -> HostResult<String> {
        self.secret(&name).map_err(host_error)
    }
}
