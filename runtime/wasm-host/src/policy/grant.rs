//! A grant as the `grant` and `revoke` subcommands and routes name it.

use super::HostRule;
use super::grants::Grant;
use server_core::extensions::policy::Access;

/// A grant as `grant`/`revoke` name it: `read-cells:nb1`, `host:api.example.org`,
/// `storage:data:read`, `env:NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyGrant {
    Function(String),
    Host(String),
    Storage {
        path: String,
        access: Option<Access>,
    },
    Env(String),
}

impl PolicyGrant {
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Some(host) = text.strip_prefix("host:") {
            HostRule::parse(host)?;
            return Ok(PolicyGrant::Host(host.to_owned()));
        }
        if let Some(name) = text.strip_prefix("env:") {
            if name.is_empty() || name.contains('=') {
                return Err(format!(
                    "'{text}' names no environment variable after 'env:'"
                ));
            }
            return Ok(PolicyGrant::Env(name.to_owned()));
        }
        if let Some(rest) = text.strip_prefix("storage:") {
            let (path, access) = match rest.rsplit_once(':') {
                Some((path, access)) => match Access::parse(access) {
                    Some(access) => (path, Some(access)),
                    None => {
                        return Err(format!(
                            "'{text}': the access after the path must be read or read-write"
                        ));
                    }
                },
                None => (rest, None),
            };
            if path.is_empty() {
                return Err(format!("'{text}' names no directory after 'storage:'"));
            }
            return Ok(PolicyGrant::Storage {
                path: path.to_owned(),
                access,
            });
        }
        Grant::parse(text).map_err(|e| {
            format!(
                "{e}; or host:HOST, storage:PATH:read|read-write, env:NAME",
                e = e.replacen("its grants name", "the grant names", 1)
            )
        })?;
        Ok(PolicyGrant::Function(text.to_owned()))
    }
}

impl PolicyGrant {
    /// Whether Hub mode refuses it, as it refuses the same in the config file at start: a host
    /// function would not know whose notebooks to use, and a directory every user's calls may
    /// write to would carry data from one user to another.
    pub fn crosses_users(&self) -> bool {
        match self {
            PolicyGrant::Function(text) => {
                matches!(Grant::parse(text), Ok(Grant::Function { .. }))
            }
            PolicyGrant::Storage {
                access: Some(Access::ReadWrite),
                ..
            } => true,
            _ => false,
        }
    }
}

impl std::fmt::Display for PolicyGrant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PolicyGrant::Function(text) => f.write_str(text),
            PolicyGrant::Host(host) => write!(f, "host:{host}"),
            PolicyGrant::Env(name) => write!(f, "env:{name}"),
            PolicyGrant::Storage { path, access } => match access {
                Some(access) => write!(f, "storage:{path}:{}", access.as_str()),
                None => write!(f, "storage:{path}"),
            },
        }
    }
}
