//! The launcher's control channel and bridges: sequenced packets between its outer and inner
//! processes carrying descriptors (the inner one makes sockets inside the sandbox's network and
//! hands them out), and the bridges that join each connection Jupyter opens to a kernel port to
//! a connection made inside.

use std::io::{IoSlice, IoSliceMut};
use std::net::{Ipv4Addr, TcpStream};
use std::os::fd::{AsFd as _, AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};
use nix::sys::wait::{WaitStatus, waitpid};
use nix::unistd::Pid;

use crate::{SandboxError, sys};

/// How long a bridged connection waits for the kernel to listen on its port.
const KERNEL_LISTEN_WAIT: Duration = Duration::from_secs(120);

/// The outer and inner ends of the launcher's control channel: sequenced packets carrying
/// descriptors, which (unlike datagrams) tell one end when the other has gone.
pub(crate) fn control_pair() -> Result<(UnixDatagram, UnixDatagram), SandboxError> {
    use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
    let (outer, inner) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(|e| SandboxError::Io(e.into()))?;
    Ok((UnixDatagram::from(outer), UnixDatagram::from(inner)))
}

/// One kernel port: every connection Jupyter opens is joined to the kernel's port inside.
pub(crate) async fn bridge(
    listener: tokio::net::TcpListener,
    port: u16,
    control: Arc<std::sync::Mutex<UnixDatagram>>,
) {
    loop {
        let Ok((mut outside, _)) = listener.accept().await else {
            continue;
        };
        let _ = outside.set_nodelay(true);
        let control = control.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let inside = loop {
                let asked = control.clone();
                let answer =
                    tokio::task::spawn_blocking(move || connect_inside(&asked, port)).await;
                match answer {
                    Ok(Ok(stream)) => break Some(stream),
                    Ok(Err(error))
                        if error.kind() == std::io::ErrorKind::ConnectionRefused
                            && started.elapsed() < KERNEL_LISTEN_WAIT =>
                    {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    _ => break None,
                }
            };
            let Some(inside) = inside else { return };
            let _ = inside.set_nonblocking(true);
            let Ok(mut inside) = tokio::net::TcpStream::from_std(inside) else {
                return;
            };
            let _ = inside.set_nodelay(true);
            let _ = tokio::io::copy_bidirectional(&mut outside, &mut inside).await;
        });
    }
}

/// Asks the inner process for a connection to the kernel's `port` inside the sandbox.
pub(crate) fn connect_inside(
    control: &std::sync::Mutex<UnixDatagram>,
    port: u16,
) -> std::io::Result<TcpStream> {
    let control = control
        .lock()
        .map_err(|_| std::io::Error::other("control channel poisoned"))?;
    control.send(&port.to_be_bytes())?;
    let mut answer = [0u8; 8];
    let (said, fd) = recv_fd(&control, &mut answer)?;
    match fd {
        Some(fd) => Ok(TcpStream::from(fd)),
        None if said >= 4 => Err(std::io::Error::from_raw_os_error(i32::from_be_bytes([
            answer[0], answer[1], answer[2], answer[3],
        ]))),
        None => Err(std::io::Error::other("the sandbox's inner process is gone")),
    }
}

/// The inner process's loop: a connection per request, until the kernel or the outer process
/// ends. Returns the kernel's exit code.
pub(crate) fn serve_sockets(control: &UnixDatagram, kernel: Pid) -> i32 {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let Ok(kernel_fd) = sys::pidfd_open(kernel.as_raw()) else {
        return exit_code(waitpid(kernel, None));
    };
    loop {
        let mut fds = [
            PollFd::new(control.as_fd(), PollFlags::POLLIN),
            PollFd::new(kernel_fd.as_fd(), PollFlags::POLLIN),
        ];
        if poll(&mut fds, PollTimeout::NONE).is_err() {
            continue;
        }
        let kernel_ended = fds[1].any().unwrap_or(false);
        let asked = fds[0].any().unwrap_or(false);
        if kernel_ended {
            return exit_code(waitpid(kernel, None));
        }
        if asked {
            let mut request = [0u8; 2];
            match control.recv(&mut request) {
                Ok(2) => {
                    let port = u16::from_be_bytes(request);
                    let _ = match TcpStream::connect((Ipv4Addr::LOCALHOST, port)) {
                        Ok(stream) => send_fd(control, b"C", stream.as_raw_fd()),
                        Err(error) => control
                            .send(&error.raw_os_error().unwrap_or(nix::libc::EIO).to_be_bytes())
                            .map(|_| ()),
                    };
                }
                // The outer process is gone: nobody can reach the kernel any more.
                _ => {
                    let _ = nix::sys::signal::kill(kernel, Signal::SIGKILL);
                    return exit_code(waitpid(kernel, None));
                }
            }
        }
    }
}

pub(crate) fn send_fd(control: &UnixDatagram, message: &[u8], fd: RawFd) -> std::io::Result<()> {
    let fds = [fd];
    let rights = [ControlMessage::ScmRights(&fds)];
    sendmsg::<()>(
        control.as_raw_fd(),
        &[IoSlice::new(message)],
        &rights,
        MsgFlags::empty(),
        None,
    )
    .map(|_| ())
    .map_err(std::io::Error::from)
}

pub(crate) fn recv_fd(
    control: &UnixDatagram,
    buffer: &mut [u8],
) -> std::io::Result<(usize, Option<OwnedFd>)> {
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let mut iov = [IoSliceMut::new(buffer)];
    let message = recvmsg::<()>(
        control.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    let mut fd = None;
    for cmsg in message.cmsgs().map_err(std::io::Error::from)? {
        if let ControlMessageOwned::ScmRights(fds) = cmsg
            && let Some(&first) = fds.first()
        {
            fd = Some(owned(first));
        }
    }
    Ok((message.bytes, fd))
}

#[allow(unsafe_code)]
fn owned(fd: RawFd) -> OwnedFd {
    // SAFETY: a descriptor just received with SCM_RIGHTS belongs to this process alone.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

pub(crate) fn exit_code(status: nix::Result<WaitStatus>) -> i32 {
    match status {
        Ok(WaitStatus::Exited(_, code)) => code,
        Ok(WaitStatus::Signaled(_, signal, _)) => 128 + signal as i32,
        _ => 1,
    }
}
