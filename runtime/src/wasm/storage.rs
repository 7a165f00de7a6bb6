//! Storage uses on the record. The directories themselves are WASI preopens made from the
//! guest's policy (see `GuestState::new`), enforced by wasmtime-wasi: only granted directories
//! exist for the guest, a read grant opens nothing for writing, and no path leaves its
//! directory. Here `[method]descriptor.open-at` (every file or directory a guest opens) is
//! shadowed by a wrapper that calls wasmtime-wasi's own and records the open, allowed or
//! refused, for the tool call's spans.

use std::time::SystemTime;

use opentelemetry::KeyValue;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::WasiFilesystemView;
use wasmtime_wasi::p2::bindings::sync::filesystem::types as fs;

use super::sandbox::GuestState;
use crate::hooks::{CallScope, GuestUse};

/// The interface name `add_to_linker_sync` linked (guests importing any 0.2.x match it).
const FILESYSTEM_TYPES: &str = "wasi:filesystem/types@0.2.12";

type OpenAt = (
    Resource<fs::Descriptor>,
    fs::PathFlags,
    String,
    fs::OpenFlags,
    fs::DescriptorFlags,
);

pub fn link_open_at(linker: &mut Linker<GuestState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let linked = linker.instance(FILESYSTEM_TYPES).and_then(|mut types| {
        types.func_wrap(
            "[method]descriptor.open-at",
            |mut store, (fd, path_flags, path, open_flags, flags): OpenAt| {
                let state: &mut GuestState = store.data_mut();
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
                let mut attributes = vec![
                    KeyValue::new("extension.name", state.settings.name().to_owned()),
                    KeyValue::new("storage.path", shown),
                    KeyValue::new("storage.access", if writes { "write" } else { "read" }),
                    KeyValue::new("allowed", opened.is_ok()),
                ];
                if let Err(code) = &opened {
                    attributes.push(KeyValue::new("error", true));
                    attributes.push(KeyValue::new("error.message", format!("{code:?}")));
                }
                GuestUse::ended("extension.storage", started, attributes)
                    .record(CallScope::current().as_ref());
                Ok((opened,))
            },
        )
    });
    linker.allow_shadowing(false);
    linked
}
