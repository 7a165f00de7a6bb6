//! The policy half of an `[[extension]]` entry as the operator wrote it — `allowed_hosts`,
//! `storage`, `env`, `redact` (and `grants`, kept beside the entry's other fields) — and the
//! writing back of a changed policy into the config file, so a grant made while the server runs
//! lasts. The write touches only the entry's policy keys: the operator's comments, order and
//! layout stay as they were (`toml_edit`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// How a guest may use a granted directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Access {
    #[serde(rename = "read")]
    Read,
    #[serde(rename = "read-write")]
    ReadWrite,
}

impl Access {
    pub fn as_str(self) -> &'static str {
        match self {
            Access::Read => "read",
            Access::ReadWrite => "read-write",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "read" => Some(Access::Read),
            "read-write" => Some(Access::ReadWrite),
            _ => None,
        }
    }
}

/// One `storage` entry: a directory relative to the config file's folder, mounted at the same
/// relative path inside the guest.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageEntry {
    pub path: String,
    pub access: Access,
}

/// Where an entry came from, for writing a changed policy back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryOrigin {
    pub file: PathBuf,
    /// Its position among the file's `[[extension]]` tables.
    pub index: usize,
}

/// An entry's policy lists, as written.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PolicyEntry {
    /// Hosts the guest may send HTTP requests to (`api.example.org`, `*.example.org`,
    /// `127.0.0.1:8123`, optionally with `http://` or `https://` in front).
    pub allowed_hosts: Vec<String>,
    pub storage: Vec<StorageEntry>,
    /// Names of environment variables passed from the server's environment.
    pub env: Vec<String>,
    /// Argument, header and query names whose values never reach a span.
    pub redact: Vec<String>,
    /// The folder storage paths are relative to: the config file's (the working directory for
    /// a guest named on the command line).
    pub base_dir: PathBuf,
    /// Set for a guest from a config file; `None` for one named on the command line, whose
    /// run-time changes last until the server stops.
    pub origin: Option<EntryOrigin>,
}

impl PolicyEntry {
    /// A policy that grants nothing, for a guest named on the command line.
    pub fn empty() -> Self {
        PolicyEntry {
            base_dir: PathBuf::from("."),
            ..Default::default()
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("cannot write the policy of extension entry {index} back to {file}: {reason}")]
pub struct WriteBackError {
    pub file: PathBuf,
    pub index: usize,
    pub reason: String,
}

/// Rewrites the policy keys (`grants`, `allowed_hosts`, `storage`, `env`) of one
/// `[[extension]]` table, leaving the rest of the file as it was. The new text replaces the
/// file in one rename, with the file's own permissions.
pub fn write_back(
    origin: &EntryOrigin,
    grants: &[String],
    entry: &PolicyEntry,
) -> Result<(), WriteBackError> {
    let fail = |reason: String| WriteBackError {
        file: origin.file.clone(),
        index: origin.index,
        reason,
    };
    let text = std::fs::read_to_string(&origin.file).map_err(|e| fail(e.to_string()))?;
    let mut document: toml_edit::DocumentMut = text.parse().map_err(|e| fail(format!("{e}")))?;
    let table = document
        .get_mut("extension")
        .and_then(|item| item.as_array_of_tables_mut())
        .and_then(|tables| tables.get_mut(origin.index))
        .ok_or_else(|| {
            fail(format!(
                "it no longer has an [[extension]] table number {}",
                origin.index + 1
            ))
        })?;
    set_list(table, "grants", grants.iter().map(String::as_str));
    set_list(
        table,
        "allowed_hosts",
        entry.allowed_hosts.iter().map(String::as_str),
    );
    set_list(table, "env", entry.env.iter().map(String::as_str));
    let old_storage: Option<Vec<StorageEntry>> = table
        .get("storage")
        .map(|item| item.to_string())
        .and_then(|text| toml::from_str::<StorageKey>(&format!("storage = {text}")).ok())
        .map(|key| key.storage);
    if old_storage.unwrap_or_default() == entry.storage {
        // Left as the operator wrote it.
    } else if entry.storage.is_empty() {
        table.remove("storage");
    } else {
        let mut list = toml_edit::Array::new();
        for storage in &entry.storage {
            let mut mount = toml_edit::InlineTable::new();
            mount.insert("path", storage.path.as_str().into());
            mount.insert("access", storage.access.as_str().into());
            list.push(mount);
        }
        keep_decor(table, "storage", toml_edit::value(list));
    }
    replace_file(&origin.file, document.to_string()).map_err(|e| fail(e.to_string()))
}

/// `storage` as it stands in the file, to tell whether it changed.
#[derive(Deserialize)]
struct StorageKey {
    storage: Vec<StorageEntry>,
}

/// Sets `key` to a list of strings (removed when empty); a list that did not change is left as
/// the operator wrote it.
fn set_list<'a>(table: &mut toml_edit::Table, key: &str, values: impl Iterator<Item = &'a str>) {
    let list: toml_edit::Array = values.collect();
    let unchanged = match table.get(key).and_then(|item| item.as_array()) {
        Some(old) => old
            .iter()
            .map(|v| v.as_str())
            .eq(list.iter().map(|v| v.as_str())),
        None => list.is_empty(),
    };
    if unchanged {
        return;
    }
    if list.is_empty() {
        table.remove(key);
    } else {
        keep_decor(table, key, toml_edit::value(list));
    }
}

/// Replaces a key's value keeping the comments and spacing around it.
fn keep_decor(table: &mut toml_edit::Table, key: &str, mut value: toml_edit::Item) {
    if let (Some(old), Some(new)) = (
        table.get(key).and_then(|item| item.as_value()),
        value.as_value_mut(),
    ) {
        *new.decor_mut() = old.decor().clone();
    }
    table.insert(key, value);
}

/// Writes `text` beside `path` and renames it over, so a reader never sees half a file.
pub fn replace_file(path: &Path, text: String) -> std::io::Result<()> {
    let permissions = std::fs::metadata(path)?.permissions();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "config".into());
    let temporary = path.with_file_name(format!(".{name}.{}.new", std::process::id()));
    std::fs::write(&temporary, text)?;
    std::fs::set_permissions(&temporary, permissions)?;
    std::fs::rename(&temporary, path).inspect_err(|_| {
        let _ = std::fs::remove_file(&temporary);
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_back_keeps_comments_and_other_entries() {
        let dir = std::env::temp_dir().join(format!("jmcp-policy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.toml");
        std::fs::write(
            &file,
            "# the operator's words\n[[extension]]\npath = \"a.wasm\"\n\n[[extension]]\n\
             path = \"b.wasm\" # b\ngrants = [\"read-cells\"]   # kept note\n[extension.limits]\n\
             memory_mb = 64\n",
        )
        .unwrap();
        let entry = PolicyEntry {
            allowed_hosts: vec!["api.example.org".into()],
            storage: vec![StorageEntry {
                path: "data".into(),
                access: Access::Read,
            }],
            ..PolicyEntry::empty()
        };
        let origin = EntryOrigin {
            file: file.clone(),
            index: 1,
        };
        write_back(
            &origin,
            &["read-cells".into(), "insert-cell".into()],
            &entry,
        )
        .unwrap();
        let text = std::fs::read_to_string(&file).unwrap();
        assert!(text.starts_with("# the operator's words\n"), "{text}");
        assert!(text.contains("path = \"b.wasm\" # b"), "{text}");
        assert!(
            text.contains("grants = [\"read-cells\", \"insert-cell\"]   # kept note"),
            "{text}"
        );
        assert!(
            text.contains("allowed_hosts = [\"api.example.org\"]"),
            "{text}"
        );
        assert!(
            text.contains("storage = [{ path = \"data\", access = \"read\" }]"),
            "{text}"
        );
        assert!(text.contains("memory_mb = 64"), "{text}");
        // The first entry is untouched.
        assert!(
            text.contains("[[extension]]\npath = \"a.wasm\"\n"),
            "{text}"
        );
        let missing = EntryOrigin { file, index: 5 };
        assert!(write_back(&missing, &[], &entry).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
