//! Guests over the server's life: loaded and started off the handshake path (`loading`), all at
//! once for the benchmarks and `extension compile` (`batch`), added, reloaded and removed while
//! the server runs (`extensions`), and the watched folder (`watch`).

pub(in crate::wasm) mod batch;
pub(in crate::wasm) mod extensions;
pub(in crate::wasm) mod loading;
pub(in crate::wasm) mod watch;
