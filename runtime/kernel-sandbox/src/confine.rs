//! The confinement itself, in two steps:
//!
//! - [`enter_namespaces`] (in the launcher's inner process): a user namespace (so no privilege
//!   is needed), a network namespace with loopback only (the kernel reaches nothing outside
//!   but its proxy), a mount namespace where each denied path is covered by an empty,
//!   read-only mount and `/dev/shm` is private, and a PID namespace whose first process is the
//!   kernel: when the kernel ends, Linux kills everything it started, daemons included.
//! - [`restrict_self`] (in the kernel's process, just before `exec`): Landlock (writes only
//!   beneath the writable roots; no signal, ptrace or `/proc/PID/environ` outside the
//!   sandbox; no abstract UNIX sockets outside it), every capability dropped, and a seccomp
//!   filter refusing the system calls that would undo the rest.
//!
//! Both are inherited by everything the kernel starts (`sh -c`, `!cmd`, `%%bash`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr, RulesetCreatedAttr,
    Scope, path_beneath_rules,
};
use nix::libc;
use nix::mount::{MsFlags, mount};
use nix::sched::{CloneFlags, unshare};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

use crate::sys;

/// The Landlock ABI the sandbox needs: 6 (Linux 6.12) is the first that scopes signals.
pub const LANDLOCK_ABI: ABI = ABI::V6;

/// A step of the confinement that failed, and why.
#[derive(Debug)]
pub struct Failed {
    pub step: &'static str,
    pub error: String,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.step, self.error)
    }
}

fn failed(step: &'static str) -> impl Fn(&dyn std::fmt::Display) -> Failed {
    move |error| Failed {
        step,
        error: error.to_string(),
    }
}

/// User, mount, network and PID namespaces for this process (the PID one holds the children it
/// starts from now on, not itself); then the denied paths covered, `/dev/shm` private and
/// loopback up. `empty_file` is an empty file to cover denied files with.
pub fn enter_namespaces(deny_read: &[PathBuf], empty_file: &Path) -> Result<(), Failed> {
    let uid = nix::unistd::geteuid();
    let gid = nix::unistd::getegid();
    unshare(
        CloneFlags::CLONE_NEWUSER
            | CloneFlags::CLONE_NEWNS
            | CloneFlags::CLONE_NEWNET
            | CloneFlags::CLONE_NEWPID,
    )
    .map_err(|e| Failed {
        step: "creating user, mount, network and PID namespaces",
        error: format!(
            "{e}; unprivileged user namespaces may be switched off on this machine \
                 (kernel.unprivileged_userns_clone, user.max_user_namespaces, or an AppArmor \
                 restriction)"
        ),
    })?;
    // Our own ids, mapped one to one, so files keep their owners.
    std::fs::write("/proc/self/setgroups", "deny").map_err(|e| failed("writing setgroups")(&e))?;
    std::fs::write("/proc/self/uid_map", format!("{uid} {uid} 1"))
        .map_err(|e| failed("mapping the user id")(&e))?;
    std::fs::write("/proc/self/gid_map", format!("{gid} {gid} 1"))
        .map_err(|e| failed("mapping the group id")(&e))?;
    mount(
        None::<&str>,
        "/",
        None::<&str>,
        MsFlags::MS_REC | MsFlags::MS_PRIVATE,
        None::<&str>,
    )
    .map_err(|e| failed("making the mounts private")(&e))?;
    for path in deny_read {
        cover(path, empty_file)?;
    }
    if Path::new("/dev/shm").is_dir() {
        mount(
            Some("tmpfs"),
            "/dev/shm",
            Some("tmpfs"),
            MsFlags::MS_NOSUID | MsFlags::MS_NODEV,
            Some("mode=1777"),
        )
        .map_err(|e| failed("mounting a private /dev/shm")(&e))?;
    }
    sys::loopback_up().map_err(|e| failed("bringing up loopback")(&e))
}

/// Hides `path` under an empty, read-only directory or file that nobody may open (mode 000: the
/// kernel, without capabilities, gets "permission denied"). A path that is not there has nothing
/// to hide.
fn cover(path: &Path, empty_file: &Path) -> Result<(), Failed> {
    let Ok(meta) = std::fs::metadata(path) else {
        return Ok(());
    };
    let hide = failed("covering a denied path");
    let flags = MsFlags::MS_RDONLY | MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC;
    if meta.is_dir() {
        mount(
            Some("tmpfs"),
            path,
            Some("tmpfs"),
            flags,
            Some("size=4k,mode=000"),
        )
        .map_err(|e| hide(&format!("{}: {e}", path.display())))
    } else {
        mount(
            Some(empty_file),
            path,
            None::<&str>,
            MsFlags::MS_BIND,
            None::<&str>,
        )
        .map_err(|e| hide(&format!("{}: {e}", path.display())))?;
        mount(
            None::<&str>,
            path,
            None::<&str>,
            MsFlags::MS_BIND | MsFlags::MS_REMOUNT | flags,
            None::<&str>,
        )
        .map_err(|e| hide(&format!("{}: {e}", path.display())))
    }
}

/// Devices a kernel and its subprocesses write to and control: the null and random devices,
/// terminals (`pty` for pexpect and friends).
const DEVICES: [&str; 8] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/pts",
];

/// In the PID namespace's first process: a `/proc` that shows only the sandbox's processes.
/// Where the machine's own `/proc` has parts hidden under other mounts, Linux refuses a new one
/// in a user namespace; the kernel then keeps the machine's (it still cannot signal, trace or
/// read the environment of anything outside), and the caller says so.
pub fn own_proc() -> Result<(), Failed> {
    mount(
        Some("proc"),
        "/proc",
        Some("proc"),
        MsFlags::MS_NOSUID | MsFlags::MS_NODEV | MsFlags::MS_NOEXEC,
        None::<&str>,
    )
    .map_err(|e| failed("mounting the sandbox's own /proc")(&e))
}

/// The caps no cgroup holds, as limits inherited by all the kernel starts: `processes` at once
/// (threads included) in its user namespace, `memory_bytes` of address space each.
pub fn cap_processes(processes: Option<u64>, memory_bytes: Option<u64>) -> Result<(), Failed> {
    use nix::sys::resource::{Resource, setrlimit};
    if let Some(processes) = processes {
        setrlimit(Resource::RLIMIT_NPROC, processes, processes)
            .map_err(|e| failed("capping the kernel's processes")(&e))?;
    }
    if let Some(bytes) = memory_bytes {
        setrlimit(Resource::RLIMIT_AS, bytes, bytes)
            .map_err(|e| failed("capping the kernel's address space")(&e))?;
    }
    Ok(())
}

/// Landlock, capabilities, then seccomp, on this process (and so on all it starts).
pub fn restrict_self(writable: &[PathBuf]) -> Result<(), Failed> {
    let abi = LANDLOCK_ABI;
    let existing = |paths: &[PathBuf]| -> Vec<PathBuf> {
        paths.iter().filter(|p| p.exists()).cloned().collect()
    };
    let devices: Vec<PathBuf> = DEVICES.iter().map(PathBuf::from).collect();
    let status = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .and_then(|r| r.scope(Scope::from_all(abi)))
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi))))
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                existing(writable),
                AccessFs::from_all(abi),
            ))
        })
        .and_then(|r| {
            r.add_rules(path_beneath_rules(
                existing(&devices),
                AccessFs::from_read(abi)
                    | AccessFs::WriteFile
                    | AccessFs::IoctlDev
                    | AccessFs::Truncate,
            ))
        })
        .and_then(|r| r.restrict_self())
        .map_err(|e| Failed {
            step: "Landlock",
            error: format!(
                "{e}; the sandbox needs Landlock ABI 6 (Linux 6.12 or later, with landlock in \
                 the lsm= boot list)"
            ),
        })?;
    if !status.no_new_privs {
        return Err(Failed {
            step: "no_new_privs",
            error: "the kernel did not set it".into(),
        });
    }
    sys::drop_capabilities().map_err(|e| failed("dropping capabilities")(&e))?;
    let filters = seccomp_filters().map_err(|e| failed("building the seccomp filter")(&e))?;
    for filter in &filters {
        seccompiler::apply_filter(filter)
            .map_err(|e| failed("installing the seccomp filter")(&e))?;
    }
    Ok(())
}

fn condition(
    arg: u8,
    op: SeccompCmpOp,
    value: u64,
) -> Result<SeccompCondition, seccompiler::BackendError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
}

/// Refused with EPERM: sockets of any family but IPv4, IPv6 and netlink (the network namespace
/// holds those; pathname UNIX sockets such as a Docker or D-Bus socket it does not), new
/// namespaces (in `clone` too), mounts, io_uring (which would bypass this filter), BPF,
/// perf, keyrings, module and kexec loading. `clone3`, whose flags a filter cannot read, answers
/// ENOSYS so the C library falls back to `clone`.
fn seccomp_filters() -> Result<Vec<BpfProgram>, seccompiler::BackendError> {
    let arch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| seccompiler::BackendError::InvalidTargetArch(std::env::consts::ARCH.into()))?;
    let mut refused: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    refused.insert(
        libc::SYS_socket,
        vec![SeccompRule::new(vec![
            condition(0, SeccompCmpOp::Ne, libc::AF_INET as u64)?,
            condition(0, SeccompCmpOp::Ne, libc::AF_INET6 as u64)?,
            condition(0, SeccompCmpOp::Ne, libc::AF_NETLINK as u64)?,
        ])?],
    );
    let namespaces = [
        libc::CLONE_NEWUSER,
        libc::CLONE_NEWNS,
        libc::CLONE_NEWNET,
        libc::CLONE_NEWPID,
        libc::CLONE_NEWIPC,
        libc::CLONE_NEWUTS,
        libc::CLONE_NEWCGROUP,
    ];
    let mut clone_rules = Vec::new();
    for flag in namespaces {
        let flag = flag as u64;
        clone_rules.push(SeccompRule::new(vec![SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(flag),
            flag,
        )?])?);
    }
    refused.insert(libc::SYS_clone, clone_rules);
    for call in [
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_open_tree,
        libc::SYS_move_mount,
        libc::SYS_fsopen,
        libc::SYS_fsmount,
        libc::SYS_fsconfig,
        libc::SYS_fspick,
        libc::SYS_mount_setattr,
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_userfaultfd,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_kexec_file_load,
        libc::SYS_open_by_handle_at,
    ] {
        refused.insert(call, vec![]);
    }
    let eperm = SeccompFilter::new(
        refused,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )?;
    let mut no_clone3 = BTreeMap::new();
    no_clone3.insert(libc::SYS_clone3, vec![]);
    let enosys = SeccompFilter::new(
        no_clone3,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )?;
    Ok(vec![eperm.try_into()?, enosys.try_into()?])
}

/// The mechanisms the confinement uses, in words for the start log and refusals
/// ([`crate::check::check`] tries them for real).
pub fn describe() -> String {
    format!(
        "user, mount, network and PID namespaces; Landlock ABI {} (files, signals, ptrace, abstract \
         UNIX sockets); seccomp-bpf; capabilities dropped",
        LANDLOCK_ABI as i32
    )
}
