//! What the Jupyter Server's REST API answers, as far as we read it.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;

#[derive(Debug, Clone, Deserialize)]
pub struct KernelModel {
    pub id: String,
    pub name: String,
    pub last_activity: Option<String>,
    pub execution_state: Option<String>,
    pub connections: Option<u64>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct KernelSpecs {
    pub default: Option<String>,
    #[serde(default)]
    pub kernelspecs: BTreeMap<String, KernelSpecEntry>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct KernelSpecEntry {
    pub name: String,
    pub spec: KernelSpec,
}

#[derive(Debug, Clone, Deserialize)]
pub struct KernelSpec {
    pub display_name: Option<String>,
    pub language: Option<String>,
    pub env: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub metadata: Option<serde_json::Map<String, Value>>,
}

impl KernelSpec {
    /// Whether `jupyter-mcp-server kernelspec install` (or a server with `kernel.sandbox`) wrote
    /// it: its kernels run in the kernel sandbox.
    pub fn is_sandboxed(&self) -> bool {
        self.metadata
            .as_ref()
            .and_then(|m| m.get("jupyter_mcp_server"))
            .and_then(|m| m.get("sandboxed"))
            .and_then(Value::as_bool)
            == Some(true)
    }
}

#[derive(Debug, Clone, Deserialize)]
pub struct ContentsModel {
    pub name: String,
    pub path: String,
    #[serde(rename = "type")]
    pub kind: String,
    pub size: Option<u64>,
    pub last_modified: Option<String>,
    pub content: Option<Value>,
    pub hash: Option<String>,
    /// `text` or `base64` for a file's content, `json` for a notebook's.
    pub format: Option<String>,
}

/// The ids that name a notebook's collaboration room: what `PUT /api/collaboration/session`
/// answers (jupyter-collaboration), or the file id alone (jupyter-server-documents).
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CollaborationSession {
    pub file_id: String,
    /// jupyter-collaboration's server session; jupyter-server-documents keeps none.
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(skip, default)]
    pub engine: RoomEngine,
}

/// Which server extension runs the collaboration rooms: both speak the Yjs sync protocol on
/// `/api/collaboration/room/…`, but name rooms, save and run cells differently.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RoomEngine {
    /// jupyter-collaboration (jupyter_server_ydoc): answers save requests over the room.
    #[default]
    Collaboration,
    /// jupyter-server-documents: rooms named by `POST /api/fileid/index`, saved on its own.
    ServerDocuments,
}

impl std::fmt::Display for RoomEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RoomEngine::Collaboration => "jupyter-collaboration",
            RoomEngine::ServerDocuments => "jupyter-server-documents",
        })
    }
}

/// What jupyter-server-documents' `POST /api/fileid/index` answers.
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct IndexedFile {
    pub id: String,
}

#[derive(Debug, Clone, Deserialize)]
pub struct SessionModel {
    pub id: String,
    #[serde(default)]
    pub path: String,
    pub kernel: Option<KernelModel>,
}

impl ContentsModel {
    /// Children of a directory listing (empty for anything else).
    pub fn children(&self) -> Vec<ContentsModel> {
        match &self.content {
            Some(Value::Array(items)) if self.kind == "directory" => items
                .iter()
                .filter_map(|item| serde_json::from_value(item.clone()).ok())
                .collect(),
            _ => Vec::new(),
        }
    }
}
