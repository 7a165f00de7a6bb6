//! Storage for guests: the granted directories, the unit to copy for a capability with a linked
//! function of its own.
//!
//! - **Slice** ([`StorageState`]): the directories this instance holds and the grant whose
//!   revocation stopped it. The directories themselves are WASI preopens made from the policy,
//!   enforced by wasmtime-wasi: only granted directories exist for the guest, a read grant opens
//!   nothing for writing, and no path leaves its directory.
//! - **Policy check** ([`StorageState::revoked`]): open files cannot be taken back from an
//!   instance, so one whose directory was taken away (or narrowed to read) is stopped in its
//!   call; the store checks at each epoch tick and before each WASI wait.
//! - **Linker registration** ([`link`]): `[method]descriptor.open-at` (every file or directory a
//!   guest opens) shadowed by a wrapper that calls wasmtime-wasi's own.
//! - **Spans**: one `extension.storage` use per open, allowed or refused.

use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::KeyValue;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;
use wasmtime_wasi::{FsPerms, WasiCtxBuilder, WasiView};

use super::unit::{Holds, HostUnit};
use crate::policy::{Mount, Snapshot};
use crate::settings::GuestSettings;
use server_core::extensions::policy::Access;
use server_core::hooks::{CallScope, GuestUse};

/// The directories one instance holds.
pub struct StorageState {
    settings: Arc<GuestSettings>,
    /// Mounted when the instance was built, under the policy of generation `generation`.
    held: Vec<Mount>,
    generation: u64,
    /// Set once a change of policy took away a directory held here.
    lost: Option<String>,
}

impl HostUnit for StorageState {
    fn new(settings: &Arc<GuestSettings>, policy: &Snapshot, wasi: &mut WasiCtxBuilder) -> Self {
        for mount in &policy.current.mounts {
            let perms = match mount.access {
                Access::Read => FsPerms::ReadOnly,
                Access::ReadWrite => FsPerms::ReadWrite,
            };
            if let Err(e) = wasi.preopened_dir(&mount.host, &mount.guest, perms) {
                tracing::warn!(
                    guest = settings.name(),
                    "storage '{}' ({}) is not mounted: {e:#}; create the directory, or remove it \
                     from storage in the guest's [[extension]] entry",
                    mount.guest,
                    mount.host.display()
                );
            }
        }
        StorageState {
            settings: settings.clone(),
            held: policy.current.mounts.clone(),
            generation: policy.generation,
            lost: None,
        }
    }
}

impl StorageState {
    /// Whether the operator took away (or narrowed) a directory this instance has mounted.
    pub fn revoked(&mut self) -> bool {
        if self.lost.is_some() {
            return true;
        }
        if self.held.is_empty() || self.generation == self.settings.policy.generation() {
            return false;
        }
        let now = self.settings.policy.get();
        let lost = self.held.iter().find(|held| {
            !now.mounts.iter().any(|m| {
                m.host == held.host && (m.access == held.access || held.access == Access::Read)
            })
        });
        self.lost = lost.map(|m| format!("storage:{}:{}", m.guest, m.access.as_str()));
        self.lost.is_some()
    }

    /// The grant whose revocation stopped the call, for its error.
    pub fn lost(&self) -> Option<&str> {
        self.lost.as_deref()
    }
}

/// The interface name `add_to_linker_sync` linked (guests importing any 0.2.x match it).
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

type OpenAt = (
    Resource<fs::Descriptor>,
    fs::PathFlags,
    String,
    fs::OpenFlags,
    fs::DescriptorFlags,
);

/// Shadows `open-at` of the WASI filesystem, linked before, to record each open.
pub fn link<T: WasiView + Holds<StorageState> + 'static>(
    linker: &mut Linker<T>,
) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = linker.instance(FILESYSTEM_TYPES).and_then(|mut types| {
        types.func_wrap(
            "[method]descriptor.open-at",
            |mut store, (fd, path_flags, path, open_flags, flags): OpenAt| {
                let state: &mut T = store.data_mut();
                let started = SystemTime::now();
                let writes = flags.contains(fs::DescriptorFlags::WRITE)
                    || open_flags.intersects(fs::OpenFlags::CREATE | fs::OpenFlags::TRUNCATE);
                let shown = path.clone();
                let opened = fs::HostDescriptor::open_at(
                    &mut state.filesystem(),
                    fd,
                    path_flags,
                    path,
                    open_flags,
                    flags,
                );
                let opened = match opened {
                    Ok(descriptor) => Ok(descriptor),
                    Err(error) => Err(error.downcast()?),
                };
                let guest = state.unit().settings.name().to_owned();
                let error = opened.as_ref().err().map(|code| format!("{code:?}"));
                record_open(guest, shown, writes, error, started);
                Ok((opened,))
            },
        )
    });
    linker.allow_shadowing(false);
    linked
}

fn record_open(
    guest: String,
    path: String,
    writes: bool,
    error: Option<String>,
    started: SystemTime,
) {
    let mut attributes = vec![
        KeyValue::new("extension.name", guest),
        KeyValue::new("storage.path", path),
        KeyValue::new("storage.access", if writes { "write" } else { "read" }),
        KeyValue::new("allowed", error.is_none()),
    ];
    if let Some(message) = error {
        attributes.push(KeyValue::new("error", true));
        attributes.push(KeyValue::new("error.message", message));
    }
    GuestUse::ended("extension.storage", started, attributes).record(CallScope::current().as_ref());
}
