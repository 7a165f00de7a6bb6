//! OAuth scopes: what a caller's token lets it do, and what each tool needs. A tool's scope is
//! a fact of its declaration (`ToolSpec::scope`); dispatch compares it with the caller's
//! [`Grant`] when one came with the request (OAuth mode), and ignores scopes otherwise.

use std::collections::BTreeSet;
use std::sync::Arc;

/// A scope this server defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Scope {
    /// List and read notebooks, files, kernels, resources.
    NotebooksRead,
    /// Edit cells, write files, create notebooks.
    #[default]
    NotebooksWrite,
    /// Anything that runs code, interrupts or restarts kernels.
    CodeExecute,
    /// Switching Jupyter Servers, stopping the server, extensions and grants.
    ServerAdmin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [
        Scope::NotebooksRead,
        Scope::NotebooksWrite,
        Scope::CodeExecute,
        Scope::ServerAdmin,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::NotebooksRead => "notebooks:read",
            Scope::NotebooksWrite => "notebooks:write",
            Scope::CodeExecute => "code:execute",
            Scope::ServerAdmin => "server:admin",
        }
    }

    /// The scope a tool needs from its annotations, for tools that do not name one: reading
    /// needs `notebooks:read`, anything else `notebooks:write`.
    pub fn from_read_only(read_only: bool) -> Scope {
        if read_only {
            Scope::NotebooksRead
        } else {
            Scope::NotebooksWrite
        }
    }
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The scopes a request's access token carries (only in OAuth mode; its absence means the
/// request was authenticated otherwise and may call everything). Kept in the request's
/// extensions by `mcp::http`.
#[derive(Debug, Clone, Default)]
pub struct Grant {
    scopes: Arc<BTreeSet<String>>,
    /// Who the token was issued to (issuer and subject), when the token says: an MCP session
    /// opened with it is that holder's alone.
    holder: Option<Arc<str>>,
}

impl Grant {
    /// The same grant, held by `holder` (e.g. `issuer` and `sub`).
    pub fn held_by(mut self, holder: String) -> Grant {
        self.holder = Some(holder.into());
        self
    }

    pub fn holder(&self) -> Option<&str> {
        self.holder.as_deref()
    }

    /// From the space-separated `scope` of a token (RFC 6749 §3.3); unknown scopes are kept
    /// but mean nothing here.
    pub fn from_scope_text(text: &str) -> Grant {
        Grant {
            scopes: Arc::new(text.split_whitespace().map(str::to_owned).collect()),
            holder: None,
        }
    }

    pub fn from_scopes<I: IntoIterator<Item = String>>(scopes: I) -> Grant {
        Grant {
            scopes: Arc::new(scopes.into_iter().collect()),
            holder: None,
        }
    }

    pub fn allows(&self, scope: Scope) -> bool {
        self.scopes.contains(scope.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_read_their_scope_text() {
        let grant = Grant::from_scope_text("openid notebooks:read  code:execute");
        assert!(grant.allows(Scope::NotebooksRead));
        assert!(grant.allows(Scope::CodeExecute));
        assert!(!grant.allows(Scope::NotebooksWrite));
        assert!(!grant.allows(Scope::ServerAdmin));
        assert_eq!(Scope::from_read_only(false), Scope::NotebooksWrite);
    }

    #[test]
    fn each_core_tool_declares_the_scope_its_work_needs() {
        let scope_of = |name: &str| {
            let tools = crate::tools::builtin();
            let tool = tools.iter().find(|t| t.spec().name == name).unwrap();
            tool.spec().scope
        };
        for runs_code in [
            "execute_code",
            "execute_cell",
            "insert_execute_code_cell",
            "run_all_cells",
            "inspect_variables",
            "interrupt_kernel",
            "restart_notebook",
        ] {
            assert_eq!(scope_of(runs_code), Scope::CodeExecute, "{runs_code}");
        }
        assert_eq!(scope_of("connect_to_jupyter"), Scope::ServerAdmin);
        assert_eq!(scope_of("read_cell"), Scope::NotebooksRead);
        assert_eq!(scope_of("insert_cell"), Scope::NotebooksWrite);
    }
}
