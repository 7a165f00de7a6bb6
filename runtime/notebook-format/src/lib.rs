//! The notebook format: notebooks and cells as nbformat 4 keeps them, the small edits every
//! document backend applies, the typed output model, and the versions that name what a caller
//! saw. Pure data and hashing: no I/O, no async, nothing of Jupyter's servers or of MCP.

pub mod edit;
pub mod hex;
pub mod notebook;
pub mod outputs;
pub mod versions;
