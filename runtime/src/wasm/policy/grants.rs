//! What the operator granted a guest: host functions, each for every notebook in use or for one
//! by name. Parsed once when the guest loads (a misspelt grant refuses the guest); each call then
//! checks a typed set.

use std::fmt;

/// A host function a guest may be granted, by its WIT name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostFunction {
    ExecuteCode,
    ReadCells,
    InsertCell,
    OverwriteCell,
    MoveCell,
    DeleteCell,
}

impl HostFunction {
    pub const ALL: [HostFunction; 6] = [
        HostFunction::ExecuteCode,
        HostFunction::ReadCells,
        HostFunction::InsertCell,
        HostFunction::OverwriteCell,
        HostFunction::MoveCell,
        HostFunction::DeleteCell,
    ];

    pub fn name(self) -> &'static str {
        match self {
            HostFunction::ExecuteCode => "execute-code",
            HostFunction::ReadCells => "read-cells",
            HostFunction::InsertCell => "insert-cell",
            HostFunction::OverwriteCell => "overwrite-cell",
            HostFunction::MoveCell => "move-cell",
            HostFunction::DeleteCell => "delete-cell",
        }
    }

    fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }
}

impl fmt::Display for HostFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry of `grants`: `read-cells` covers every notebook in use, `read-cells:nb1` only the
/// notebook in use under the name `nb1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grant {
    pub function: HostFunction,
    pub notebook: Option<String>,
}

impl Grant {
    pub fn parse(grant: &str) -> Result<Self, String> {
        let (function, notebook) = match grant.split_once(':') {
            Some((function, notebook)) => (function, Some(notebook)),
            None => (grant, None),
        };
        let Some(parsed) = HostFunction::named(function) else {
            let names: Vec<&str> = HostFunction::ALL.iter().map(|f| f.name()).collect();
            return Err(format!(
                "its grants name '{function}', which is no host function; grantable: {} (each \
                 optionally followed by :NOTEBOOK to cover only that notebook)",
                names.join(", ")
            ));
        };
        if notebook.is_some_and(|n| n.trim().is_empty()) {
            return Err(format!(
                "its grant '{grant}' names no notebook after ':'; write '{function}' for every \
                 notebook in use or '{function}:NAME' for one"
            ));
        }
        Ok(Grant {
            function: parsed,
            notebook: notebook.map(str::to_owned),
        })
    }
}

/// Every grant of one guest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants(Vec<Grant>);

impl Grants {
    /// Parses the operator's list; the first entry that names no host function refuses it.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        entries
            .iter()
            .map(|g| Grant::parse(g))
            .collect::<Result<_, _>>()
            .map(Grants)
    }

    /// Whether `function` is granted for some notebook (`notebook` is `None`), or for `notebook`.
    pub fn allows(&self, function: HostFunction, notebook: Option<&str>) -> bool {
        self.0.iter().any(|g| {
            g.function == function
                && (g.notebook.is_none() || notebook.is_none() || g.notebook.as_deref() == notebook)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_are_parsed_once_and_scoped_by_notebook() {
        let scoped = Grants::parse(&["read-cells:nb1".into()]).unwrap();
        assert!(scoped.allows(HostFunction::ReadCells, None));
        assert!(scoped.allows(HostFunction::ReadCells, Some("nb1")));
        assert!(!scoped.allows(HostFunction::ReadCells, Some("nb2")));
        assert!(!scoped.allows(HostFunction::DeleteCell, None));
        assert!(Grants::parse(&["read-cells:".into()]).is_err());
        assert!(
            Grants::parse(&["format-disk".into()])
                .unwrap_err()
                .contains("no host function")
        );
    }
}
