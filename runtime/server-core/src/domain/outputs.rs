//! Outputs as the domain handles them (nbformat's), and the scheme of the resources that name
//! an execution's whole outputs.

pub use notebook_format::outputs::*;

/// The URI scheme of an execution's outputs as its record keeps them:
/// `execution://{id}/outputs/{index}`.
pub const EXECUTION_SCHEME: &str = "execution://";
