//! The few system calls no safe wrapper offers. Each is called only from the launcher's
//! single-threaded processes (before any runtime starts), which is what makes `fork` sound.
#![allow(unsafe_code)]

use std::io;

use nix::libc;
use nix::sys::signal::{SigHandler, Signal, signal};
use nix::unistd::{ForkResult, fork};

/// Forks this process. Called only while it has one thread.
pub fn fork_single_threaded() -> io::Result<ForkResult> {
    // SAFETY: the launcher forks before it starts any thread (no runtime, no other thread
    // exists), so the child's copy of memory holds no lock another thread owned.
    unsafe { fork() }.map_err(io::Error::from)
}

pub fn ignore(signals: &[Signal]) {
    for &one in signals {
        // SAFETY: SIG_IGN installs no handler code, so nothing runs in signal context.
        let _ = unsafe { signal(one, SigHandler::SigIgn) };
    }
}

/// Back to the default action: ignored dispositions would survive `exec` into the kernel.
pub fn default_action(signals: &[Signal]) {
    for &one in signals {
        // SAFETY: SIG_DFL installs no handler code.
        let _ = unsafe { signal(one, SigHandler::SigDfl) };
    }
}

/// Brings up the loopback interface of this (new) network namespace.
pub fn loopback_up() -> io::Result<()> {
    let socket = nix::sys::socket::socket(
        nix::sys::socket::AddressFamily::Inet,
        nix::sys::socket::SockType::Datagram,
        nix::sys::socket::SockFlag::SOCK_CLOEXEC,
        None,
    )?;
    let fd = std::os::fd::AsRawFd::as_raw_fd(&socket);
    // SAFETY: ifreq is plain data; zeroed is a valid value for it.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, byte) in request.ifr_name.iter_mut().zip(b"lo\0") {
        *slot = *byte as libc::c_char;
    }
    // SAFETY: SIOCGIFFLAGS and SIOCSIFFLAGS read and write the flags member of a valid ifreq.
    unsafe {
        if libc::ioctl(fd, libc::SIOCGIFFLAGS, &mut request) < 0 {
            return Err(io::Error::last_os_error());
        }
        request.ifr_ifru.ifru_flags |= (libc::IFF_UP | libc::IFF_RUNNING) as libc::c_short;
        if libc::ioctl(fd, libc::SIOCSIFFLAGS, &request) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Drops every capability for good: the bounding set emptied, ambient ones cleared, and
/// root's special treatment at `exec` switched off, so a kernel that is uid 0 in its user
/// namespace gains nothing there either.
pub fn drop_capabilities() -> io::Result<()> {
    let last: libc::c_ulong = std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|text| text.trim().parse().ok())
        .unwrap_or(40);
    const SECBIT_NOROOT: libc::c_ulong = 1 << 0;
    const SECBIT_NOROOT_LOCKED: libc::c_ulong = 1 << 1;
    const SECBIT_NO_SETUID_FIXUP: libc::c_ulong = 1 << 2;
    const SECBIT_NO_SETUID_FIXUP_LOCKED: libc::c_ulong = 1 << 3;
    const SECBIT_KEEP_CAPS_LOCKED: libc::c_ulong = 1 << 5;
    const SECBIT_NO_CAP_AMBIENT_RAISE: libc::c_ulong = 1 << 6;
    const SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED: libc::c_ulong = 1 << 7;
    // SAFETY: prctl with integer arguments only.
    unsafe {
        for cap in 0..=last {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 {
                let error = io::Error::last_os_error();
                // Capabilities above what this kernel knows are not there to drop.
                if error.raw_os_error() != Some(libc::EINVAL) {
                    return Err(error);
                }
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) < 0
        {
            return Err(io::Error::last_os_error());
        }
        let bits = SECBIT_NOROOT
            | SECBIT_NOROOT_LOCKED
            | SECBIT_NO_SETUID_FIXUP
            | SECBIT_NO_SETUID_FIXUP_LOCKED
            | SECBIT_KEEP_CAPS_LOCKED
            | SECBIT_NO_CAP_AMBIENT_RAISE
            | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;
        if libc::prctl(libc::PR_SET_SECUREBITS, bits, 0, 0, 0) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// A file descriptor that becomes readable when process `pid` ends.
pub fn pidfd_open(pid: libc::pid_t) -> io::Result<std::os::fd::OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor was just returned to us and is owned by nobody else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd as i32) })
}

/// Whether every write end of the pipe `read_end` reads from is closed (its writer is gone).
pub fn closed_by_writer(read_end: &std::os::fd::OwnedFd) -> bool {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    use std::os::fd::AsFd as _;
    let mut fds = [PollFd::new(read_end.as_fd(), PollFlags::POLLIN)];
    match poll(&mut fds, PollTimeout::ZERO) {
        Ok(_) => fds[0]
            .revents()
            .is_some_and(|events| events.contains(PollFlags::POLLHUP)),
        Err(_) => true,
    }
}
