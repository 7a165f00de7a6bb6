//! Plain files in the Jupyter root, through the contents API: read (text, or base64 for
//! binary), written (missing parent directories created), bounded in size, never outside the
//! root, and never a notebook (those have their own tools, which keep cell ids and outputs).

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use futures_util::future::join_all;

use super::{Domain, Error, Step};
use crate::say;
/// A file or directory as the contents API describes it.
pub use jupyter_client::rest::ContentsModel;
use jupyter_client::rest::{JupyterRest, RestError};

/// How a file's content travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Text,
    Base64,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Text => "text",
            Encoding::Base64 => "base64",
        }
    }
}

/// A file as read: its whole size, and the content (all of it, or the part asked for).
#[derive(Debug)]
pub struct FileRead {
    pub path: String,
    pub size: u64,
    pub encoding: Encoding,
    pub content: String,
    /// For text: the lines returned (first, end) and the line count; for binary: the byte range.
    pub range: (usize, usize),
    pub total: usize,
}

/// What a write did.
#[derive(Debug)]
pub struct FileWritten {
    pub path: String,
    pub bytes: u64,
    pub replaced: bool,
    pub created_directories: Vec<String>,
}

/// A path relative to the Jupyter root with no way out of it: `.` and empty segments dropped,
/// `..` and control characters refused. Jupyter's own checks still apply after ours.
pub fn root_relative(path: &str) -> Result<String, Error> {
    let mut segments = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                return Err(Error::InvalidArguments(say![
                    format!(
                        "'{path}' has a '..' segment; paths are relative to the Jupyter root and \
                         cannot leave it. Call "
                    ),
                    Step::ListFiles,
                    " to see what the root holds."
                ]));
            }
            s if s.chars().any(char::is_control) => {
                return Err(Error::InvalidArguments(say![
                    "the path contains a control character; name the file as ",
                    Step::ListFiles,
                    " shows it"
                ]));
            }
            s => segments.push(s),
        }
    }
    if segments.is_empty() {
        return Err(Error::InvalidArguments(
            "name a file, relative to the Jupyter root (e.g. 'data/input.csv')".into(),
        ));
    }
    Ok(segments.join("/"))
}

fn refuse_notebook(path: &str, doing: Step) -> Result<(), Error> {
    if path.to_ascii_lowercase().ends_with(".ipynb") {
        return Err(Error::Failed(say![
            format!("'{path}' is a notebook; "),
            doing,
            " handles plain files only. Open it with ",
            Step::OpenNotebook,
            " and use ",
            Step::ReadNotebook,
            " / ",
            Step::ReadCell,
            ", or the cell editing tools, which keep its cell ids and outputs intact."
        ]));
    }
    Ok(())
}

fn not_found(path: &str) -> Error {
    Error::Failed(say![
        format!("'{path}' was not found in the Jupyter root. Call "),
        Step::ListFiles,
        " to see what exists."
    ])
}

fn rest_failure(path: &str, error: RestError) -> Error {
    match error {
        // Jupyter answers 404 for anything outside its root too: we never say more.
        RestError::NotFound { .. } => not_found(path),
        other => Error::failed(other),
    }
}

fn too_large(path: &str, size: u64, limit: u64, doing: Step) -> Error {
    Error::Failed(say![
        format!("'{path}' is {size} bytes, above the {limit}-byte limit for "),
        doing,
        " (--max-file-bytes). Work on it in the kernel instead (",
        Step::ExecuteCode,
        ", e.g. with pandas or open()), or ask the operator to raise the limit."
    ])
}

/// Lines `[offset, offset + limit)` of `text`, each keeping its line ending.
fn slice_lines(text: &str, offset: usize, limit: Option<usize>) -> (String, usize, usize, usize) {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let total = lines.len();
    let start = offset.min(total);
    let end = limit.map_or(total, |l| start.saturating_add(l).min(total));
    (lines[start..end].concat(), start, end, total)
}

/// One entry of a tree listing: an item, or a subdirectory that could not be read.
#[derive(Debug)]
pub enum Listed {
    Entry(ContentsModel),
    Unreadable { path: String, error: String },
}

/// `path`'s entries (or the file itself), and those of its subdirectories down to `max_depth`,
/// listed concurrently.
async fn collect(
    rest: &JupyterRest,
    path: String,
    depth: u8,
    max_depth: u8,
) -> Result<Vec<Listed>, RestError> {
    let listing = rest.get_contents(&path, true).await?;
    if listing.kind != "directory" {
        return Ok(vec![Listed::Entry(listing)]);
    }
    let children = listing.children();
    let subdirs: Vec<String> = if depth < max_depth {
        children
            .iter()
            .filter(|c| c.kind == "directory")
            .map(|dir| dir.path.clone())
            .collect()
    } else {
        Vec::new()
    };
    let mut listed: Vec<Listed> = children.into_iter().map(Listed::Entry).collect();
    let nested = subdirs.into_iter().map(|dir_path| async move {
        match Box::pin(collect(rest, dir_path.clone(), depth + 1, max_depth)).await {
            Ok(listed) => listed,
            Err(e) => vec![Listed::Unreadable {
                path: dir_path,
                error: e.to_string(),
            }],
        }
    });
    for nested in join_all(nested).await {
        listed.extend(nested);
    }
    Ok(listed)
}

impl Domain {
    /// The Jupyter Server's file tree from `path` (as the caller wrote it) down to `max_depth`
    /// levels of subdirectories (list_files).
    pub async fn list_tree(&self, path: &str, max_depth: u8) -> Result<Vec<Listed>, Error> {
        let jupyter = self.jupyter();
        let start = path.trim_matches('/').to_owned();
        collect(jupyter.rest(), start, 0, max_depth)
            .await
            .map_err(|e| match e {
                RestError::NotFound { .. } => Error::Failed(say![
                    format!("'{path}' was not found on the Jupyter Server. Call "),
                    Step::ListFiles,
                    " with path \"\" to see the root directory."
                ]),
                other => Error::failed(other),
            })
    }

    /// Reads a file: text whole or by lines (`offset`, `limit`), binary whole or by bytes.
    pub async fn read_file(
        &self,
        path: &str,
        offset: usize,
        limit: Option<usize>,
    ) -> Result<FileRead, Error> {
        let path = root_relative(path)?;
        refuse_notebook(&path, Step::ReadFile)?;
        let rest = self.documents_rest();
        let model = rest
            .get_contents(&path, false)
            .await
            .map_err(|e| rest_failure(&path, e))?;
        if model.kind == "directory" {
            return Err(Error::Failed(say![
                format!("'{path}' is a directory. Call "),
                Step::ListFiles,
                format!(" with path '{path}' to see what it holds.")
            ]));
        }
        let limit_bytes = self.settings.max_file_bytes;
        if let Some(size) = model.size.filter(|s| *s > limit_bytes) {
            return Err(too_large(&path, size, limit_bytes, Step::ReadFile));
        }
        let model = rest
            .get_file(&path)
            .await
            .map_err(|e| rest_failure(&path, e))?;
        let content = match &model.content {
            Some(serde_json::Value::String(c)) => c.clone(),
            _ => {
                return Err(Error::Failed(
                    format!("The Jupyter Server sent no content for '{path}'.").into(),
                ));
            }
        };
        if model.format.as_deref() == Some("base64") {
            // Jupyter wraps base64 at 76 columns.
            let clean: String = content.chars().filter(|c| !c.is_whitespace()).collect();
            let bytes = BASE64.decode(clean.as_bytes()).map_err(|e| {
                Error::Failed(format!("The content of '{path}' was not valid base64: {e}").into())
            })?;
            let size = bytes.len();
            let start = offset.min(size);
            let end = limit.map_or(size, |l| start.saturating_add(l).min(size));
            return Ok(FileRead {
                path,
                size: size as u64,
                encoding: Encoding::Base64,
                content: BASE64.encode(&bytes[start..end]),
                range: (start, end),
                total: size,
            });
        }
        let (text, start, end, total) = slice_lines(&content, offset, limit);
        Ok(FileRead {
            size: model.size.unwrap_or(content.len() as u64),
            path,
            encoding: Encoding::Text,
            content: text,
            range: (start, end),
            total,
        })
    }

    /// Writes a file, creating missing parent directories; an existing file is replaced only
    /// with `overwrite`.
    pub async fn write_file(
        &self,
        path: &str,
        content: &str,
        encoding: Encoding,
        overwrite: bool,
    ) -> Result<FileWritten, Error> {
        let path = root_relative(path)?;
        refuse_notebook(&path, Step::WriteFile)?;
        let size =
            match encoding {
                Encoding::Text => content.len() as u64,
                Encoding::Base64 => {
                    let clean: String = content.chars().filter(|c| !c.is_whitespace()).collect();
                    BASE64
                        .decode(clean.as_bytes())
                        .map_err(|e| {
                            Error::InvalidArguments(format!(
                            "content is not valid base64 ({e}); send the bytes base64-encoded \
                             (standard alphabet, with padding), or use encoding 'text'"
                        ).into())
                        })?
                        .len() as u64
                }
            };
        let limit = self.settings.max_file_bytes;
        if size > limit {
            return Err(too_large(&path, size, limit, Step::WriteFile));
        }
        let rest = self.documents_rest();
        let replaced =
            match rest.get_contents(&path, false).await {
                Ok(existing) if existing.kind == "directory" => {
                    return Err(Error::Failed(
                        format!("'{path}' is a directory; name a file inside it.").into(),
                    ));
                }
                Ok(existing) if !overwrite => {
                    return Err(Error::Failed(format!(
                    "'{path}' already exists ({} bytes). Pass overwrite=true to replace it, or \
                     choose another path.",
                    existing.size.unwrap_or(0)
                ).into()));
                }
                Ok(_) => true,
                Err(RestError::NotFound { .. }) => false,
                Err(e) => return Err(Error::failed(e)),
            };
        let created_directories = ensure_parents(&rest, &path).await?;
        rest.put_file(&path, content, encoding.as_str())
            .await
            .map_err(|e| rest_failure(&path, e))?;
        Ok(FileWritten {
            path,
            bytes: size,
            replaced,
            created_directories,
        })
    }
}

/// Creates the missing directories above `path`; returns those it created.
async fn ensure_parents(rest: &JupyterRest, path: &str) -> Result<Vec<String>, Error> {
    let mut created = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    for depth in 1..segments.len() {
        let dir = segments[..depth].join("/");
        match rest.get_contents(&dir, false).await {
            Ok(ContentsModel { kind, .. }) if kind == "directory" => {}
            Ok(_) => {
                return Err(Error::Failed(
                    format!("'{dir}' is a file, so '{path}' cannot be created under it.").into(),
                ));
            }
            Err(RestError::NotFound { .. }) => {
                rest.create_directory(&dir)
                    .await
                    .map_err(|e| rest_failure(&dir, e))?;
                created.push(dir);
            }
            Err(e) => return Err(Error::failed(e)),
        }
    }
    Ok(created)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_stay_in_the_root() {
        assert_eq!(root_relative("/a//./b.txt").unwrap(), "a/b.txt");
        assert!(root_relative("a/../../etc/passwd").is_err());
        assert!(root_relative("..").is_err());
        assert!(root_relative("a/\u{7}b").is_err());
        assert!(root_relative("/").is_err());
    }

    #[test]
    fn lines_are_sliced_with_their_endings() {
        assert_eq!(slice_lines("a\nb\nc", 1, Some(1)), ("b\n".into(), 1, 2, 3));
        assert_eq!(slice_lines("a\nb\n", 0, None), ("a\nb\n".into(), 0, 2, 2));
        assert_eq!(slice_lines("a\n", 9, Some(2)), (String::new(), 1, 1, 1));
    }
}
