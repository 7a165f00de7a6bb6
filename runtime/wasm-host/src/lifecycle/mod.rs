//! Guests over the server's life: loaded and started off the handshake path (`loading`), all at
//! once for the benchmarks and `extension compile` (`batch`), added, reloaded and removed while
//! the server runs (`extensions`), and the watched folder (`watch`).

pub(crate) mod batch;
pub(crate) mod extensions;
pub(crate) mod loading;
pub(crate) mod watch;
