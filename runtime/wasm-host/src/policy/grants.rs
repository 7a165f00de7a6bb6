//! What the operator granted a guest: host functions, each for every notebook in use or for one
//! by name; talking back to the call's client (`elicit`, `sample`); and secrets by name
//! (`secret:NAME`). Parsed once when the guest loads (a misspelt grant refuses the guest); each
//! call then checks a typed set.

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

/// A way of talking back to the MCP client of the call (WIT 0.3.0's `client`), by its grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientFunction {
    /// `elicit`: ask the person.
    Elicit,
    /// `sample`: ask the client's model.
    Sample,
}

impl ClientFunction {
    pub fn name(self) -> &'static str {
        match self {
            ClientFunction::Elicit => "elicit",
            ClientFunction::Sample => "sample",
        }
    }
}

impl fmt::Display for ClientFunction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One entry of `grants`: `read-cells` covers every notebook in use, `read-cells:nb1` only the
/// notebook in use under the name `nb1`; `elicit` and `sample` the call's client; `secret:NAME`
/// one of the operator's secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    Function {
        function: HostFunction,
        notebook: Option<String>,
    },
    Client(ClientFunction),
    Secret(String),
}

impl Grant {
    pub fn parse(grant: &str) -> Result<Self, String> {
        match grant {
            "elicit" => return Ok(Grant::Client(ClientFunction::Elicit)),
            "sample" => return Ok(Grant::Client(ClientFunction::Sample)),
            _ => {}
        }
        if let Some(name) = grant.strip_prefix("secret:") {
            if !is_secret_name(name) {
                return Err(format!(
                    "its grant '{grant}' names no secret after 'secret:' (letters, digits, '_', \
                     '-', '.'); write 'secret:NAME' for the secret the operator stored as NAME"
                ));
            }
            return Ok(Grant::Secret(name.to_owned()));
        }
        let (function, notebook) = match grant.split_once(':') {
            Some((function, notebook)) => (function, Some(notebook)),
            None => (grant, None),
        };
        let Some(parsed) = HostFunction::named(function) else {
            let names: Vec<&str> = HostFunction::ALL.iter().map(|f| f.name()).collect();
            return Err(format!(
                "its grants name '{function}', which is no host function; grantable: {} (each \
                 optionally followed by :NOTEBOOK to cover only that notebook), elicit, sample, \
                 secret:NAME",
                names.join(", ")
            ));
        };
        if notebook.is_some_and(|n| n.trim().is_empty()) {
            return Err(format!(
                "its grant '{grant}' names no notebook after ':'; write '{function}' for every \
                 notebook in use or '{function}:NAME' for one"
            ));
        }
        Ok(Grant::Function {
            function: parsed,
            notebook: notebook.map(str::to_owned),
        })
    }
}

/// A secret's name as a grant may carry it.
pub fn is_secret_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

impl fmt::Display for Grant {
    /// As `grants` and `grant` write it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Grant::Function {
                function,
                notebook: Some(notebook),
            } => write!(f, "{function}:{notebook}"),
            Grant::Function { function, .. } => write!(f, "{function}"),
            Grant::Client(function) => write!(f, "{function}"),
            Grant::Secret(name) => write!(f, "secret:{name}"),
        }
    }
}

/// What one use of a host capability needs granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wanted<'a> {
    /// A host function, on the notebook in use under that name (`None`: before it is known).
    Function {
        function: HostFunction,
        notebook: Option<&'a str>,
    },
    Client(ClientFunction),
    Secret(&'a str),
}

impl Wanted<'_> {
    /// The narrowest grant that allows it: a host function only on the notebook it was used
    /// on. `None` for a host function whose notebook is not known yet.
    pub fn grant(&self) -> Option<Grant> {
        match *self {
            Wanted::Function {
                function,
                notebook: Some(notebook),
            } => Some(Grant::Function {
                function,
                notebook: Some(notebook.to_owned()),
            }),
            Wanted::Function { notebook: None, .. } => None,
            Wanted::Client(function) => Some(Grant::Client(function)),
            Wanted::Secret(name) => Some(Grant::Secret(name.to_owned())),
        }
    }

    /// What it lets the guest do, for a person deciding whether to grant it.
    pub fn effect(&self) -> String {
        match *self {
            Wanted::Function { function, notebook } => {
                let what = match function {
                    HostFunction::ExecuteCode => "run code in the kernel of",
                    HostFunction::ReadCells => "read the cells of",
                    HostFunction::InsertCell => "insert cells into",
                    HostFunction::OverwriteCell => "overwrite cells of",
                    HostFunction::MoveCell => "move cells of",
                    HostFunction::DeleteCell => "delete cells of",
                };
                match notebook {
                    Some(name) => {
                        format!("{what} the notebook '{name}' (host function {function})")
                    }
                    None => format!("{what} notebooks (host function {function})"),
                }
            }
            Wanted::Client(ClientFunction::Elicit) => {
                "ask you questions of its own (elicitation)".to_owned()
            }
            Wanted::Client(ClientFunction::Sample) => {
                "send requests to your client's model (sampling)".to_owned()
            }
            Wanted::Secret(name) => format!("read the operator's secret '{name}'"),
        }
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

    /// These grants.
    pub fn of(grants: Vec<Grant>) -> Self {
        Grants(grants)
    }

    /// Whether `wanted` is granted.
    pub fn permits(&self, wanted: &Wanted<'_>) -> bool {
        match *wanted {
            Wanted::Function { function, notebook } => self.allows(function, notebook),
            Wanted::Client(function) => self.allows_client(function),
            Wanted::Secret(name) => self.allows_secret(name),
        }
    }

    /// Whether `function` is granted for some notebook (`notebook` is `None`), or for `notebook`.
    pub fn allows(&self, function: HostFunction, notebook: Option<&str>) -> bool {
        self.0.iter().any(|g| match g {
            Grant::Function {
                function: granted,
                notebook: scope,
            } => {
                *granted == function
                    && (scope.is_none() || notebook.is_none() || scope.as_deref() == notebook)
            }
            _ => false,
        })
    }

    /// Whether the guest may talk back to its client this way.
    pub fn allows_client(&self, function: ClientFunction) -> bool {
        self.0.contains(&Grant::Client(function))
    }

    /// Whether the guest may read the secret `name`.
    pub fn allows_secret(&self, name: &str) -> bool {
        self.0
            .iter()
            .any(|g| matches!(g, Grant::Secret(granted) if granted == name))
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
        let talk = Grants::parse(&["elicit".into(), "secret:API_KEY".into()]).unwrap();
        assert!(talk.allows_client(ClientFunction::Elicit));
        assert!(!talk.allows_client(ClientFunction::Sample));
        assert!(talk.allows_secret("API_KEY") && !talk.allows_secret("OTHER"));
        assert!(!talk.allows(HostFunction::ReadCells, None));
        assert!(Grants::parse(&["secret:".into()]).is_err());
        assert!(Grants::parse(&["secret:a b".into()]).is_err());
    }

    #[test]
    fn a_wanted_use_names_its_narrowest_grant() {
        let on_nb1 = Wanted::Function {
            function: HostFunction::ReadCells,
            notebook: Some("nb1"),
        };
        let grant = on_nb1.grant().unwrap();
        assert_eq!(grant.to_string(), "read-cells:nb1");
        assert_eq!(Grant::parse("read-cells:nb1").unwrap(), grant);
        assert!(Grants::of(vec![grant]).permits(&on_nb1));
        assert!(!Grants::of(Vec::new()).permits(&on_nb1));
        assert_eq!(
            Wanted::Secret("API_KEY").grant().unwrap().to_string(),
            "secret:API_KEY"
        );
        assert_eq!(
            Wanted::Client(ClientFunction::Sample)
                .grant()
                .unwrap()
                .to_string(),
            "sample"
        );
        assert!(
            Wanted::Function {
                function: HostFunction::DeleteCell,
                notebook: None
            }
            .grant()
            .is_none()
        );
        assert!(
            on_nb1
                .effect()
                .contains("read the cells of the notebook 'nb1'")
        );
    }
}
