//! Files only this user may read: created 0600 from the first byte (no window before a chmod),
//! refusing an existing file or a symlink at the path. The embedded Jupyter's token file and the
//! compile cache's artifacts and key are written this way.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
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
