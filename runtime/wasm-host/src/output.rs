//! What a guest writes to stdout and stderr: each line goes to the server's log, tagged with the
//! guest's name and capped in rate and length, and the last lines of stderr are kept for the
//! error of a call that traps (a JS exception's message and stack end up there, say).

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};

use super::limits::LINES_PER_SECOND;
use super::settings::GuestSettings;

/// A longer line is cut here in the log (and in the tail).
const MAX_LINE: usize = 1000;
/// Lines of stderr kept for a trap's error, and their total size.
const TAIL_LINES: usize = 20;
const TAIL_BYTES: usize = 4096;
/// What a single write may carry (WASI's usual permit).
const PERMIT: usize = 64 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stream {
    Stdout,
    Stderr,
}

impl Stream {
    fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// One instance's output: partial lines of each stream and the tail of stderr.
#[derive(Debug, Default)]
struct Buffers {
    stdout: Vec<u8>,
    stderr: Vec<u8>,
    tail: VecDeque<String>,
}

/// The stdout and stderr of one instance (cheap to clone: both streams share it).
#[derive(Clone)]
pub struct GuestOutput {
    settings: Arc<GuestSettings>,
    buffers: Arc<Mutex<Buffers>>,
}

impl GuestOutput {
    pub fn new(settings: Arc<GuestSettings>) -> Self {
        GuestOutput {
            settings,
            buffers: Arc::default(),
        }
    }

    fn buffers(&self) -> std::sync::MutexGuard<'_, Buffers> {
        self.buffers.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stdout(&self) -> impl StdoutStream + 'static {
        Writer {
            output: self.clone(),
            stream: Stream::Stdout,
        }
    }

    pub fn stderr(&self) -> impl StdoutStream + 'static {
        Writer {
            output: self.clone(),
            stream: Stream::Stderr,
        }
    }

    /// Forgets the last call's stderr: a trap reports only what its own call wrote.
    pub fn start_call(&self) {
        let mut buffers = self.buffers();
        buffers.tail.clear();
        buffers.stderr.clear();
    }

    /// The last lines the guest wrote to stderr in this call (a partial last line included).
    pub fn stderr_tail(&self) -> Option<String> {
        let mut buffers = self.buffers();
        let partial = std::mem::take(&mut buffers.stderr);
        if !partial.trim_ascii().is_empty() {
            let line = cut(&self
                .settings
                .revealed
                .redact(&String::from_utf8_lossy(&partial)));
            self.log(Stream::Stderr, &line);
            push_tail(&mut buffers.tail, line);
        }
        let lines: Vec<&str> = buffers.tail.iter().map(String::as_str).collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    }

    fn write(&self, stream: Stream, bytes: &[u8]) {
        let mut buffers = self.buffers();
        let buffers = &mut *buffers;
        let pending = match stream {
            Stream::Stdout => &mut buffers.stdout,
            Stream::Stderr => &mut buffers.stderr,
        };
        pending.extend_from_slice(bytes);
        // Whole lines go out; so does a partial one that grew past any sensible line.
        while let Some(end) = pending
            .iter()
            .position(|b| *b == b'\n')
            .or_else(|| (pending.len() > MAX_LINE).then_some(MAX_LINE))
        {
            let rest = pending.split_off((end + 1).min(pending.len()));
            let raw = std::mem::replace(pending, rest);
            let text = String::from_utf8_lossy(&raw);
            let line = cut(&self
                .settings
                .revealed
                .redact(text.trim_end_matches(['\n', '\r'])));
            if line.trim().is_empty() {
                continue;
            }
            self.log(stream, &line);
            if stream == Stream::Stderr {
                push_tail(&mut buffers.tail, line);
            }
        }
    }

    fn log(&self, stream: Stream, line: &str) {
        let (allowed, dropped) = self.settings.log_budget.take();
        let guest = self.settings.name();
        if dropped > 0 {
            tracing::warn!(
                guest,
                "{dropped} lines of the guest's output were not logged (more than \
                 {LINES_PER_SECOND} a second)"
            );
        }
        if allowed {
            tracing::info!(guest, stream = stream.name(), "{line}");
        }
    }
}

fn cut(line: &str) -> String {
    match line.char_indices().nth(MAX_LINE) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_owned(),
    }
}

fn push_tail(tail: &mut VecDeque<String>, line: String) {
    tail.push_back(line);
    while tail.len() > TAIL_LINES || tail.iter().map(String::len).sum::<usize>() > TAIL_BYTES {
        if tail.pop_front().is_none() {
            break;
        }
    }
}

/// One of the two streams, as WASI sees it: always ready, never full, never failing (a guest
/// whose print fails would panic).
struct Writer {
    output: GuestOutput,
    stream: Stream,
}

impl IsTerminal for Writer {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Writer {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(Writer {
            output: self.output.clone(),
            stream: self.stream,
        })
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(Writer {
            output: self.output.clone(),
            stream: self.stream,
        })
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Writer {
    async fn ready(&mut self) {}
}

impl OutputStream for Writer {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.output.write(self.stream, &bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(PERMIT)
    }
}

impl tokio::io::AsyncWrite for Writer {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        self.output.write(self.stream, buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stderr_lines_are_kept_per_call_and_bounded() {
        let output = GuestOutput::new(Arc::new(GuestSettings::for_tests("g")));
        output.write(Stream::Stdout, b"to the log only\n");
        output.write(Stream::Stderr, b"Error: boom\n  at f (app.js:3)\npartial");
        assert_eq!(
            output.stderr_tail().as_deref(),
            Some("Error: boom\n  at f (app.js:3)\npartial")
        );
        output.start_call();
        assert_eq!(output.stderr_tail(), None, "each call starts afresh");
        for i in 0..100 {
            output.write(Stream::Stderr, format!("line {i}\n").as_bytes());
        }
        let tail = output.stderr_tail().unwrap();
        assert_eq!(tail.lines().count(), TAIL_LINES);
        assert!(tail.ends_with("line 99"), "{tail}");
        output.write(Stream::Stderr, &[b'x'; 5000]);
        let tail = output.stderr_tail().unwrap();
        assert!(tail.len() <= TAIL_BYTES + 4, "{}", tail.len());
    }
}
