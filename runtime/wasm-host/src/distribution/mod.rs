//! How a guest reaches the host: its file read and checked (`component_file`, `imports`), its
//! compiled code and its declarations cached (`cache`, `manifest`), components pulled from OCI
//! registries (`oci`) and their signatures checked (`signatures`).

pub(crate) mod cache;
pub(crate) mod component_file;
pub(crate) mod imports;
pub(crate) mod manifest;
pub(crate) mod oci;
pub(crate) mod signatures;
