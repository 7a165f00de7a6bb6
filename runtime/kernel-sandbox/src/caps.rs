//! A kernel's caps, its subprocesses included: cgroups of its own (cgroup v2 where this
//! process's cgroup lets us make children with the memory and pids controllers, else the v1
//! memory and pids hierarchies), so the kernel is stopped at its cap rather than the machine's
//! out-of-memory killer taking something else. Where no cgroup can be made (no delegation, no
//! root), each process gets an address-space limit of the memory cap, and the kernel's user
//! namespace `RLIMIT_NPROC` (which Linux does not apply to root); the start log says which.

use std::path::{Path, PathBuf};

/// A kernel's caps as this machine holds them; its cgroups are removed when dropped.
#[derive(Debug)]
pub struct KernelCaps {
    /// The cgroup holding the memory cap (`true`: v2), whose kill count tells a kernel
    /// stopped at its cap.
    memory: Option<(PathBuf, bool)>,
    /// The cgroup holding the process cap, when not the memory one.
    pids: Option<PathBuf>,
    pids_in_memory_group: bool,
    /// Why a cap falls back to a per-process limit.
    why_not: Vec<String>,
}

impl KernelCaps {
    /// Makes the cgroups of kernel `name`: `megabytes` of memory, `processes` at once.
    pub fn create(name: &str, megabytes: u64, processes: u64) -> Self {
        let mut caps = KernelCaps {
            memory: None,
            pids: None,
            pids_in_memory_group: false,
            why_not: Vec::new(),
        };
        let bytes = megabytes.saturating_mul(1024 * 1024).to_string();
        let processes = processes.to_string();
        let (own, mounts) = match (
            std::fs::read_to_string("/proc/self/cgroup"),
            std::fs::read_to_string("/proc/self/mountinfo"),
        ) {
            (Ok(own), Ok(mounts)) => (own, mounts),
            (Err(e), _) | (_, Err(e)) => {
                caps.why_not
                    .push(format!("cannot read this process's cgroups: {e}"));
                return caps;
            }
        };
        if let (Some(mount), Some(path)) = (mount_of(&mounts, None), own_path(&own, "")) {
            match make_v2(&mount.join(path), name, &bytes, &processes) {
                Ok(dir) => {
                    caps.memory = Some((dir, true));
                    caps.pids_in_memory_group = true;
                    return caps;
                }
                Err(why) => caps.why_not.push(format!("cgroup v2: {why}")),
            }
        }
        let v1 = |controller: &str, setting: &str, value: &str| -> Result<PathBuf, String> {
            let (Some(mount), Some(path)) = (
                mount_of(&mounts, Some(controller)),
                own_path(&own, controller),
            ) else {
                return Err(format!("no cgroup v1 {controller} hierarchy is mounted"));
            };
            let dir = mount.join(path).join(name);
            make(&dir, &[(setting, value)]).map(|()| dir)
        };
        match v1("memory", "memory.limit_in_bytes", &bytes) {
            Ok(dir) => caps.memory = Some((dir, false)),
            Err(why) => caps.why_not.push(why),
        }
        match v1("pids", "pids.max", &processes) {
            Ok(dir) => caps.pids = Some(dir),
            Err(why) => caps.why_not.push(why),
        }
        caps
    }

    fn dirs(&self) -> impl Iterator<Item = &PathBuf> {
        self.memory
            .iter()
            .map(|(dir, _)| dir)
            .chain(self.pids.iter())
    }

    /// Moves the calling process (and so all it starts from now on) into the cgroups.
    pub fn join(&self) -> std::io::Result<()> {
        for dir in self.dirs() {
            std::fs::write(dir.join("cgroup.procs"), "0")?;
        }
        Ok(())
    }

    /// Whether memory is capped per process (no cgroup holds it).
    pub fn memory_per_process(&self) -> bool {
        self.memory.is_none()
    }

    /// Whether processes are capped by `RLIMIT_NPROC` (no cgroup holds them).
    pub fn processes_by_rlimit(&self) -> bool {
        self.pids.is_none() && !self.pids_in_memory_group
    }

    /// Whether the memory cgroup's own killer stopped a process since it was made.
    pub fn killed_at_cap(&self) -> bool {
        let Some((dir, v2)) = &self.memory else {
            return false;
        };
        let file = if *v2 {
            "memory.events"
        } else {
            "memory.oom_control"
        };
        std::fs::read_to_string(dir.join(file))
            .ok()
            .and_then(|text| {
                text.lines().find_map(|line| {
                    line.strip_prefix("oom_kill ")
                        .and_then(|n| n.trim().parse::<u64>().ok())
                })
            })
            .is_some_and(|kills| kills > 0)
    }

    /// What the start log says of them.
    pub fn describe(&self) -> String {
        let memory = match &self.memory {
            Some((_, v2)) => format!(
                "memory by a cgroup (v{}), its subprocesses included",
                if *v2 { 2 } else { 1 }
            ),
            None => "memory by an address-space limit per process".to_owned(),
        };
        let processes = if self.processes_by_rlimit() {
            "processes by RLIMIT_NPROC (not applied to root)"
        } else {
            "processes by a pids cgroup"
        };
        let mut said = format!("{memory}; {processes}");
        if !self.why_not.is_empty() && (self.memory.is_none() || self.processes_by_rlimit()) {
            said.push_str(&format!(" ({})", self.why_not.join("; ")));
        }
        said
    }
}

impl Drop for KernelCaps {
    fn drop(&mut self) {
        // The processes leave a moment after they die; a cgroup is removed once empty.
        for dir in self.dirs() {
            for _ in 0..50 {
                match std::fs::remove_dir(dir) {
                    Ok(()) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => break,
                    Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
                }
            }
        }
    }
}

fn make_v2(own: &Path, name: &str, bytes: &str, processes: &str) -> Result<PathBuf, String> {
    let has_both = |file: &str| {
        std::fs::read_to_string(own.join(file)).is_ok_and(|text| {
            ["memory", "pids"]
                .iter()
                .all(|wanted| text.split_whitespace().any(|c| c == *wanted))
        })
    };
    if !has_both("cgroup.controllers") {
        return Err(format!(
            "{} offers no memory and pids controllers",
            own.display()
        ));
    }
    if !has_both("cgroup.subtree_control") {
        std::fs::write(own.join("cgroup.subtree_control"), "+memory +pids").map_err(|e| {
            format!(
                "cannot enable the memory and pids controllers below {}: {e} (delegate a cgroup \
                 subtree to this user, e.g. run under `systemd-run --user --scope -p \
                 Delegate=yes`)",
                own.display()
            )
        })?;
    }
    let dir = own.join(name);
    make(
        &dir,
        &[
            ("memory.max", bytes),
            ("pids.max", processes),
            ("memory.swap.max", "0"),
            ("memory.oom.group", "1"),
        ],
    )?;
    Ok(dir)
}

/// Makes `dir` and writes `settings`; the caps must hold, the others (`memory.swap.max`,
/// `memory.oom.group`) are best effort: swap may be off, the kernel older.
fn make(dir: &Path, settings: &[(&str, &str)]) -> Result<(), String> {
    match std::fs::create_dir(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    for (file, value) in settings {
        let required = !matches!(*file, "memory.swap.max" | "memory.oom.group");
        if let Err(e) = std::fs::write(dir.join(file), value)
            && required
        {
            let _ = std::fs::remove_dir(dir);
            return Err(format!("cannot write {}: {e}", dir.join(file).display()));
        }
    }
    Ok(())
}

/// The mount point of the cgroup hierarchy: v2 when `controller` is `None`, else the v1
/// hierarchy holding it.
fn mount_of(mountinfo: &str, controller: Option<&str>) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut after = after.split_whitespace();
        let fstype = after.next()?;
        let options = after.nth(1).unwrap_or("");
        let mount_point = before.split_whitespace().nth(4)?;
        let wanted = match controller {
            None => fstype == "cgroup2",
            Some(name) => fstype == "cgroup" && options.split(',').any(|o| o == name),
        };
        wanted.then(|| PathBuf::from(mount_point))
    })
}

/// This process's cgroup in the hierarchy named `controllers` in `/proc/self/cgroup` ("" for
/// v2), relative to the hierarchy's root.
fn own_path(cgroup: &str, controller: &str) -> Option<PathBuf> {
    cgroup.lines().find_map(|line| {
        let mut fields = line.splitn(3, ':');
        let _id = fields.next()?;
        let names = fields.next()?;
        let path = fields.next()?;
        let matches = if controller.is_empty() {
            names.is_empty()
        } else {
            names.split(',').any(|n| n == controller)
        };
        matches.then(|| PathBuf::from(path.trim_start_matches('/')))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const MOUNTINFO: &str = "\
35 24 0:30 / /sys/fs/cgroup/memory rw,relatime shared:12 - cgroup cgroup rw,memory
36 24 0:31 / /sys/fs/cgroup/unified rw,relatime shared:13 - cgroup2 cgroup2 rw
37 24 0:32 / /sys/fs/cgroup/pids rw,relatime shared:14 - cgroup cgroup rw,pids";

    #[test]
    fn finds_each_hierarchy() {
        assert_eq!(
            mount_of(MOUNTINFO, None),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(
            mount_of(MOUNTINFO, Some("memory")),
            Some(PathBuf::from("/sys/fs/cgroup/memory"))
        );
        assert_eq!(mount_of(MOUNTINFO, Some("cpu")), None);
    }

    #[test]
    fn finds_own_cgroup_per_hierarchy() {
        let own = "4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/user.slice/x.scope\n";
        assert_eq!(
            own_path(own, "memory"),
            Some(PathBuf::from("process_api/abc"))
        );
        assert_eq!(own_path(own, "cpu"), Some(PathBuf::from("")));
        assert_eq!(own_path(own, ""), Some(PathBuf::from("user.slice/x.scope")));
    }
}
