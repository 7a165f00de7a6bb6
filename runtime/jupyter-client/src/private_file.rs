//! Files only this user may read: created 0600 from the first byte (no window before a chmod),
//! refusing an existing file or a symlink at the path. The embedded Jupyter's token file and the
//! compile cache's artifacts and key are written this way. And directories only this user may
//! use (the compile cache, the state directory).

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Writes `parts` one after another into a new private file at `path`, synced to disk.
pub fn create(path: &Path, parts: &[&[u8]]) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    for part in parts {
        file.write_all(part)?;
    }
    file.sync_all()
}

/// Opens (or creates, 0600) a file to read and write in place, never through a symbolic link;
/// an existing file readable by others is made private.
pub fn open_rw(path: &Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(path)?;
    let mode = file.metadata()?.mode();
    if mode & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}

/// Creates `dir` (and its parents) 0700 if missing; refuses a symbolic link, a directory of
/// another user, or one others may write to. With `private`, one others may read or enter is
/// made 0700.
pub fn dir(dir: &Path, private: bool) -> Result<(), String> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create it ({e})"))?;
    let uid = nix::unistd::Uid::effective().as_raw();
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("cannot inspect it ({e})"))?;
    if meta.file_type().is_symlink() {
        return Err("it is a symbolic link".into());
    }
    if !meta.is_dir() {
        return Err("it is not a directory".into());
    }
    if meta.uid() != uid {
        return Err(format!(
            "it belongs to user id {}, not to us ({uid})",
            meta.uid()
        ));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(format!(
            "other users may write to it (mode {:o}); `chmod go-w` it",
            meta.mode() & 0o7777
        ));
    }
    if private && meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot make it private ({e})"))?;
    }
    Ok(())
}
