//! How a guest reaches the host: its file read and checked (`component_file`, `imports`), its
//! compiled code and its declarations cached (`cache`, `manifest`), components pulled from OCI
//! registries (`oci`) and their signatures checked (`signatures`).

pub(in crate::wasm) mod cache;
pub(in crate::wasm) mod component_file;
pub(in crate::wasm) mod imports;
pub(in crate::wasm) mod manifest;
pub(in crate::wasm) mod oci;
pub(in crate::wasm) mod signatures;
