//! The operator's secrets for extensions: a JSON file only this user may read
//! (`$XDG_CONFIG_HOME/jupyter-mcp-server/secrets.json`, else `~/.config/…`, or
//! `--secrets-file`), written by `jupyter-mcp-server secret set|rm` and read by the host's
//! `secrets` interface, by name, for a guest granted `secret:NAME`.
//!
//! The file is read again at every lookup (it is small), so `secret set` takes effect at a
//! guest's next call without a restart. A file others can read is refused, not used: a secret
//! that leaked once is no longer one. Values never reach `Debug`, logs or errors.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use jupyter_client::auth::Secret;

/// The longest value kept: a credential, not a payload.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error(
        "neither --secrets-file, XDG_CONFIG_HOME nor HOME is set, so there is no place for \
         secrets; pass --secrets-file PATH (or JUPYTER_MCP_SECRETS_FILE)"
    )]
    NoLocation,
    #[error(
        "secret name {0:?} is not valid: use 1 to 64 letters, digits, '_', '-' or '.', \
         e.g. OPENAI_API_KEY"
    )]
    BadName(String),
    #[error("the secret's value is empty; pass the value on standard input")]
    EmptyValue,
    #[error("the secret's value is over {MAX_VALUE_BYTES} bytes; secrets are credentials")]
    TooLong,
    #[error(
        "the secrets file {path} can be read or written by other users (mode {mode:o}); \
         make it private with `chmod 600 {path}`, and change any secret it held"
    )]
    NotPrivate { path: String, mode: u32 },
    #[error(
        "the secrets file {path} is not owned by this user; secrets are read only from a file \
         the server's own user owns"
    )]
    NotOwned { path: String },
    #[error("the secrets file {path} is not valid ({reason}); fix or remove it")]
    Malformed { path: String, reason: String },
    #[error("no secret named {0:?}; `jupyter-mcp-server secret list` shows the names")]
    Unknown(String),
    #[error("could not {what} the secrets file {path}: {source}")]
    Io {
        what: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// The file's shape: a version for later changes, then the values by name.
#[derive(Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct SecretsFile {
    version: u32,
    secrets: BTreeMap<String, String>,
}

/// Where the operator's secrets are kept; every method reads or writes the file anew.
#[derive(Debug, Clone)]
pub struct SecretStore {
    path: PathBuf,
}

impl SecretStore {
    /// The store at `path`, or at the default place when none is given.
    pub fn at(path: Option<PathBuf>) -> Result<Self, SecretError> {
        match path {
            Some(path) => Ok(SecretStore { path }),
            None => Self::default_path()
                .map(|path| SecretStore { path })
                .ok_or(SecretError::NoLocation),
        }
    }

    /// `$XDG_CONFIG_HOME/jupyter-mcp-server/secrets.json`, else `~/.config/…`.
    pub fn default_path() -> Option<PathBuf> {
        crate::user_dirs::config().map(|dir| dir.join("secrets.json"))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The secret named `name`, `None` when there is none (or no file yet).
    pub fn get(&self, name: &str) -> Result<Option<Secret>, SecretError> {
        check_name(name)?;
        Ok(self.read()?.secrets.remove(name).map(Secret::new))
    }

    /// The names held, sorted.
    pub fn names(&self) -> Result<Vec<String>, SecretError> {
        Ok(self.read()?.secrets.into_keys().collect())
    }

    /// Sets (or replaces) one secret.
    pub fn set(&self, name: &str, value: &Secret) -> Result<(), SecretError> {
        check_name(name)?;
        let value = value.expose();
        if value.is_empty() {
            return Err(SecretError::EmptyValue);
        }
        if value.len() > MAX_VALUE_BYTES {
            return Err(SecretError::TooLong);
        }
        let mut file = self.read()?;
        file.secrets.insert(name.to_owned(), value.to_owned());
        self.write(&file)
    }

    /// Removes one secret; naming one that is not there is an error, so a typo is not silent.
    pub fn remove(&self, name: &str) -> Result<(), SecretError> {
        check_name(name)?;
        let mut file = self.read()?;
        if file.secrets.remove(name).is_none() {
            return Err(SecretError::Unknown(name.to_owned()));
        }
        self.write(&file)
    }

    fn shown(&self) -> String {
        self.path.display().to_string()
    }

    fn io(&self, what: &'static str) -> impl FnOnce(std::io::Error) -> SecretError + '_ {
        move |source| SecretError::Io {
            what,
            path: self.shown(),
            source,
        }
    }

    fn read(&self) -> Result<SecretsFile, SecretError> {
        let meta = match std::fs::symlink_metadata(&self.path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Ok(SecretsFile {
                    version: 1,
                    ..Default::default()
                });
            }
            Err(e) => return Err(self.io("inspect")(e)),
        };
        if meta.mode() & 0o077 != 0 || !meta.file_type().is_file() {
            return Err(SecretError::NotPrivate {
                path: self.shown(),
                mode: meta.mode() & 0o7777,
            });
        }
        if meta.uid() != nix::unistd::geteuid().as_raw() {
            return Err(SecretError::NotOwned { path: self.shown() });
        }
        let mut text = String::new();
        std::fs::File::open(&self.path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .map_err(self.io("read"))?;
        // serde_json's errors name a line and column, never the text around them.
        let file: SecretsFile =
            serde_json::from_str(&text).map_err(|e| SecretError::Malformed {
                path: self.shown(),
                reason: e.to_string(),
            })?;
        if let Some(bad) = file.secrets.keys().find(|n| check_name(n).is_err()) {
            return Err(SecretError::Malformed {
                path: self.shown(),
                reason: format!("the name {bad:?} is not a valid secret name"),
            });
        }
        Ok(file)
    }

    /// Writes the whole file anew: a private temporary file beside it, then a rename, so a
    /// reader sees the old file or the new one, never half of one.
    fn write(&self, file: &SecretsFile) -> Result<(), SecretError> {
        let dir = self.path.parent().unwrap_or(Path::new("."));
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(self.io("create the folder of"))?;
        }
        let body = serde_json::to_vec_pretty(&SecretsFile {
            version: 1,
            secrets: file.secrets.clone(),
        })
        .expect("a map of strings serialises");
        let temporary = dir.join(format!(
            ".secrets.json.{}.{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default()
        ));
        jupyter_client::private_file::create(&temporary, &[&body, b"\n"])
            .map_err(self.io("write"))?;
        std::fs::rename(&temporary, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&temporary);
            self.io("replace")(e)
        })?;
        // A file made by an older tool or by hand may have been wider; ours never is.
        std::fs::set_permissions(&self.path, std::fs::Permissions::from_mode(0o600))
            .map_err(self.io("make private"))
    }
}

/// Names stay simple so that a grant `secret:NAME` and a config reference are unambiguous.
pub fn check_name(name: &str) -> Result<(), SecretError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(SecretError::BadName(name.to_owned()))
    }
}

/// The value of `secret set`, read from standard input (never argv): all of it, less one
/// trailing line break. On a terminal, asked for with echo off.
pub fn read_value(stdin: &mut impl Read, on_terminal: bool) -> Result<Secret, SecretError> {
    let io = |source| SecretError::Io {
        what: "read",
        path: "standard input".into(),
        source,
    };
    let mut value = String::new();
    if on_terminal {
        use std::io::BufRead as _;
        eprint!("Value (not shown): ");
        let _echo = EchoOff::new();
        std::io::stdin().lock().read_line(&mut value).map_err(io)?;
        eprintln!();
    } else {
        stdin
            .take(MAX_VALUE_BYTES as u64 + 3)
            .read_to_string(&mut value)
            .map_err(io)?;
    }
    let trimmed = value
        .strip_suffix("\r\n")
        .or_else(|| value.strip_suffix('\n'))
        .unwrap_or(&value);
    if trimmed.is_empty() {
        return Err(SecretError::EmptyValue);
    }
    if trimmed.len() > MAX_VALUE_BYTES {
        return Err(SecretError::TooLong);
    }
    Ok(Secret::new(trimmed.to_owned()))
}

/// The terminal's echo switched off for as long as this lives.
struct EchoOff(Option<nix::sys::termios::Termios>);

impl EchoOff {
    fn new() -> Self {
        use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
        let stdin = std::io::stdin();
        let Ok(saved) = tcgetattr(&stdin) else {
            return EchoOff(None);
        };
        let mut quiet = saved.clone();
        quiet.local_flags.remove(LocalFlags::ECHO);
        match tcsetattr(&stdin, SetArg::TCSANOW, &quiet) {
            Ok(()) => EchoOff(Some(saved)),
            Err(_) => EchoOff(None),
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        if let Some(saved) = &self.0 {
            let _ = nix::sys::termios::tcsetattr(
                std::io::stdin(),
                nix::sys::termios::SetArg::TCSANOW,
                saved,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of its own per test, removed when the test ends.
    struct Dir(PathBuf);

    impl Dir {
        fn new() -> Self {
            let dir = std::env::temp_dir()
                .join(format!("jmcp-secrets-{}", uuid::Uuid::new_v4().simple()));
            std::fs::create_dir_all(&dir).unwrap();
            Dir(dir)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn store(dir: &Dir) -> SecretStore {
        SecretStore::at(Some(dir.0.join("sub").join("secrets.json"))).unwrap()
    }

    #[test]
    fn set_get_list_remove_round_trip_in_a_private_file() {
        let dir = Dir::new();
        let store = store(&dir);
        assert!(store.get("API_KEY").unwrap().is_none());
        store.set("API_KEY", &Secret::new("s3cr3t".into())).unwrap();
        store.set("other.one", &Secret::new("x".into())).unwrap();
        assert_eq!(store.get("API_KEY").unwrap().unwrap().expose(), "s3cr3t");
        assert_eq!(store.names().unwrap(), ["API_KEY", "other.one"]);
        let mode = std::fs::metadata(store.path()).unwrap().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let dir_mode = std::fs::metadata(store.path().parent().unwrap())
            .unwrap()
            .mode()
            & 0o777;
        assert_eq!(dir_mode, 0o700);
        store.remove("API_KEY").unwrap();
        assert_eq!(store.names().unwrap(), ["other.one"]);
        assert!(matches!(
            store.remove("API_KEY"),
            Err(SecretError::Unknown(_))
        ));
    }

    #[test]
    fn a_file_others_can_read_is_refused_and_its_values_never_shown() {
        let dir = Dir::new();
        let store = store(&dir);
        store.set("TOKEN", &Secret::new("hunter2".into())).unwrap();
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
        let error = store.get("TOKEN").unwrap_err();
        let text = error.to_string();
        assert!(text.contains("chmod 600"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        // A malformed file's error names where, not what the file holds.
        std::fs::write(
            store.path(),
            "{\"version\":1,\"secrets\":{\"A\":\"hunter2\",}}",
        )
        .unwrap();
        std::fs::set_permissions(store.path(), std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = store.names().unwrap_err().to_string();
        assert!(text.contains("not valid"), "{text}");
        assert!(!text.contains("hunter2"), "{text}");
        assert!(!format!("{:?}", store.get("A")).contains("hunter2"));
    }

    #[test]
    fn names_and_values_are_checked() {
        for bad in ["", "has space", "semi;colon", &"x".repeat(65), "a/b"] {
            assert!(check_name(bad).is_err(), "{bad:?}");
        }
        check_name("OPENAI_API_KEY").unwrap();
        let dir = Dir::new();
        let store = store(&dir);
        assert!(matches!(
            store.set("A", &Secret::new(String::new())),
            Err(SecretError::EmptyValue)
        ));
        assert!(matches!(
            store.set("A", &Secret::new("x".repeat(MAX_VALUE_BYTES + 1))),
            Err(SecretError::TooLong)
        ));
    }

    #[test]
    fn the_value_is_read_from_input_less_one_line_break() {
        let value = read_value(&mut "line one\n".as_bytes(), false).unwrap();
        assert_eq!(value.expose(), "line one");
        let value = read_value(&mut "keep\n\n".as_bytes(), false).unwrap();
        assert_eq!(value.expose(), "keep\n");
        let value = read_value(&mut "crlf\r\n".as_bytes(), false).unwrap();
        assert_eq!(value.expose(), "crlf");
        assert!(read_value(&mut "\n".as_bytes(), false).is_err());
    }
}
