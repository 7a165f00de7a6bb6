//! Conversions between the host's types and those of WIT v0.1.0, all in one place, so the rest
//! of `wasm/` never names a binding type of this version.

use serde_json::Value;

use super::types;
use crate::jupyter::notebook::{Cell, CellType};
use crate::wasm::sandbox::HostCallError;

pub fn cell_type(kind: types::CellKind) -> CellType {
    match kind {
        types::CellKind::Code => CellType::Code,
        types::CellKind::Markdown => CellType::Markdown,
        types::CellKind::Raw => CellType::Raw,
    }
}

pub fn to_wit(cell: &Cell) -> types::Cell {
    types::Cell {
        id: cell.id.clone(),
        kind: match cell.cell_type {
            CellType::Code => types::CellKind::Code,
            CellType::Markdown => types::CellKind::Markdown,
            CellType::Raw => types::CellKind::Raw,
        },
        source: cell.source.clone(),
        metadata: Value::Object(cell.metadata.clone()).to_string(),
        outputs: Value::Array(cell.outputs.clone()).to_string(),
    }
}

pub fn host_error(error: HostCallError) -> types::HostError {
    match error {
        HostCallError::NotGranted(m) => types::HostError::NotGranted(m),
        HostCallError::NotAvailable(m) => types::HostError::NotAvailable(m),
        HostCallError::Failed(m) => types::HostError::Failed(m),
        HostCallError::Stopped(why) => types::HostError::Failed(format!(
            "the host function did not finish: {}",
            why.describe_short()
        )),
    }
}
