//! MCP over stdio: newline-delimited JSON-RPC on stdin/stdout.
//!
//! rmcp silently drops a line that is not JSON; JSON-RPC asks for a parse error (-32700, id null)
//! instead, so a client that sent garbage learns it. Lines pass through a small filter that answers
//! those itself; everything else goes to rmcp unchanged. Both writers share one task, so a reply
//! line is never interleaved with another.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::{Semaphore, mpsc};

/// Largest request line we accept; longer lines are answered with an error and skipped (without
/// being held in memory).
pub const MAX_LINE_BYTES: usize = super::MAX_REQUEST_BYTES;

/// How many requests from stdin rmcp may hold at once. rmcp starts a task for every request it
/// reads, so a client sending thousands without reading the answers made the server hold them
/// all (20,000 pings peaked at 170 MB on a busy machine); past this many, stdin waits.
const MAX_IN_FLIGHT: usize = 256;

/// How long a request waits for a free place before it goes on anyway: a request rmcp never
/// answered must not stop stdin for good.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(5);

/// The requests rmcp has read and not yet answered, counted by the lines going in and out.
struct InFlight(Semaphore);

impl InFlight {
    fn new() -> Self {
        InFlight(Semaphore::new(MAX_IN_FLIGHT))
    }

    async fn enter(&self) {
        match tokio::time::timeout(IN_FLIGHT_WAIT, self.0.acquire()).await {
            Ok(Ok(place)) => place.forget(),
            _ => tracing::debug!(
                "{MAX_IN_FLIGHT} requests unanswered for {IN_FLIGHT_WAIT:?}; reading on"
            ),
        }
    }

    /// One request answered (or cancelled). Capped: a request let in without a place, or a
    /// cancel of a finished request, must not raise the bound.
    fn leave(&self) {
        if self.0.available_permits() < MAX_IN_FLIGHT {
            self.0.add_permits(1);
        }
    }
}

/// Whether a JSON-RPC line is a request, a notification or an answer (by its `method` and `id`).
#[derive(serde::Deserialize)]
struct Shape {
    method: Option<String>,
    id: Option<serde::de::IgnoredAny>,
}

impl Shape {
    fn of(message: &serde_json::Value) -> Option<Shape> {
        serde::Deserialize::deserialize(message).ok()
    }

    fn is_answer(line: &str) -> bool {
        serde_json::from_str::<Shape>(line).is_ok_and(|shape| shape.method.is_none())
    }
}

/// Where requests come from (stdin).
pub type Input = Box<dyn AsyncRead + Unpin + Send>;
/// Where answers go (stdout).
pub type Output = Box<dyn AsyncWrite + Unpin + Send>;

/// Stdin and stdout as the server reads and writes them. MCP clients start a server with pipes
/// (or, from libuv programs such as Node, socket pairs) on both: those are polled on the
/// runtime's own threads, non-blocking, which spares every message a hop through tokio's
/// blocking pool each way (its `stdin`/`stdout` hand each read and write to a pool thread). A
/// terminal or a file keeps tokio's `stdin`/`stdout`: making it non-blocking would change it
/// for every other process sharing it (a shell). The descriptions of a client's pipes are ours
/// alone (the embedded Jupyter gets neither: `jupyter::launcher`).
pub fn standard_streams() -> (Input, Output) {
    let input = polled(std::io::stdin().as_fd().try_clone_to_owned(), |fd, kind| {
        Ok(match kind {
            Kind::Pipe => Box::new(tokio::net::unix::pipe::Receiver::from_owned_fd(fd)?) as Input,
            Kind::Socket => Box::new(socket(fd)?) as Input,
        })
    })
    .unwrap_or_else(|| Box::new(tokio::io::stdin()));
    let output = polled(
        std::io::stdout().as_fd().try_clone_to_owned(),
        |fd, kind| {
            Ok(match kind {
                Kind::Pipe => {
                    Box::new(tokio::net::unix::pipe::Sender::from_owned_fd(fd)?) as Output
                }
                Kind::Socket => Box::new(socket(fd)?) as Output,
            })
        },
    )
    .unwrap_or_else(|| Box::new(tokio::io::stdout()));
    (input, output)
}

enum Kind {
    Pipe,
    Socket,
}

/// A copy of a standard stream's descriptor opened as `open` says for a pipe or a socket, or
/// none (anything else, or a failure, which leaves the stream blocking as it was).
fn polled<T>(
    fd: std::io::Result<OwnedFd>,
    open: impl FnOnce(OwnedFd, Kind) -> std::io::Result<T>,
) -> Option<T> {
    let file = File::from(fd.ok()?);
    let kind = file.metadata().ok()?.file_type();
    let kind = if kind.is_fifo() {
        Kind::Pipe
    } else if kind.is_socket() {
        Kind::Socket
    } else {
        return None;
    };
    // Kept to put the stream back in blocking mode should registering it fail half-way.
    let keep = file.try_clone().ok()?;
    match open(OwnedFd::from(file), kind) {
        Ok(opened) => Some(opened),
        Err(e) => {
            tracing::debug!("stdio stays on tokio's blocking streams: {e}");
            let _ = make_blocking(&keep);
            None
        }
    }
}

/// A stream socket on a standard stream (a socket pair from the client), non-blocking.
fn socket(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let stream = std::os::unix::net::UnixStream::from(fd);
    stream.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(stream)
}

/// Clears O_NONBLOCK on the stream `file` is a copy of.
fn make_blocking(file: &File) -> nix::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(file, FcntlArg::F_GETFL)?);
    fcntl(file, FcntlArg::F_SETFL(flags - OFlag::O_NONBLOCK)).map(drop)
}

/// The two ends rmcp serves on, and the task writing its replies out.
pub struct FilteredStdio {
    pub input: DuplexStream,
    pub output: DuplexStream,
    /// Ends once every reply rmcp wrote has reached `output`.
    pub writer: tokio::task::JoinHandle<()>,
}

/// Builds the two ends rmcp serves on, fed from `input` and written to `output`.
pub fn filtered<R, W>(input: R, output: W) -> FilteredStdio
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_in, mut to_rmcp) = tokio::io::duplex(1 << 20);
    let (from_rmcp, rmcp_out) = tokio::io::duplex(1 << 20);
    // Bounded: a client flooding garbage without reading our answers is slowed down, not
    // allowed to grow our memory.
    let (errors_tx, errors_rx) = mpsc::channel::<String>(256);
    let in_flight = Arc::new(InFlight::new());
    let answered = in_flight.clone();
    tokio::spawn(async move {
        let mut reader = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            match read_bounded_line(&mut reader, &mut line).await {
                Ok(LineRead::Eof) => break,
                Ok(LineRead::TooLong) => {
                    let _ = errors_tx
                        .send(parse_error(&format!(
                            "request line longer than {MAX_LINE_BYTES} bytes"
                        )))
                        .await;
                    continue;
                }
                Ok(LineRead::Line) => {}
                Err(e) => {
                    tracing::error!("reading stdin failed: {e}");
                    break;
                }
            }
            let trimmed = line.trim_ascii();
            if trimmed.is_empty() {
                continue;
            }
            // Checked apart from the JSON: skipping a string's contents does not check its
            // UTF-8, and rmcp drops such a line without a word.
            if let Err(e) = std::str::from_utf8(trimmed) {
                let _ = errors_tx
                    .send(parse_error(&format!("the line is not UTF-8: {e}")))
                    .await;
                continue;
            }
            // A full parse, not a skim: skimming accepts numbers a parse refuses (1e999), and
            // rmcp drops such a line without a word (found by fuzzing).
            let (repaired, shape) = match serde_json::from_slice::<serde_json::Value>(trimmed) {
                Ok(message) => (super::compat::repair(&message, None), Shape::of(&message)),
                Err(e) => {
                    tracing::debug!("answering an unparsable line with a parse error: {e}");
                    let _ = errors_tx.send(parse_error(&e.to_string())).await;
                    continue;
                }
            };
            let forwarded: std::borrow::Cow<[u8]> = match &repaired {
                Some(message) => message.to_string().into_bytes().into(),
                None => trimmed.into(),
            };
            let cancels = match &shape {
                Some(Shape {
                    method: Some(_),
                    id: Some(_),
                }) => {
                    in_flight.enter().await;
                    false
                }
                Some(Shape {
                    method: Some(method),
                    id: None,
                }) => method == "notifications/cancelled",
                _ => false,
            };
            if to_rmcp.write_all(&forwarded).await.is_err()
                || to_rmcp.write_all(b"\n").await.is_err()
            {
                break;
            }
            // rmcp does not answer a cancelled request.
            if cancels {
                in_flight.leave();
            }
        }
        // Dropping `to_rmcp` is rmcp's end of input: the service finishes.
    });
    let writer = tokio::spawn(write_lines(from_rmcp, errors_rx, output, answered));
    FilteredStdio {
        input: rmcp_in,
        output: rmcp_out,
        writer,
    }
}

enum LineRead {
    Line,
    TooLong,
    Eof,
}

async fn read_bounded_line<R: AsyncBufReadExt + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<LineRead> {
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if line.is_empty() && !too_long {
                LineRead::Eof
            } else if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
        let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
            Some(i) => (&available[..=i], true),
            None => (available, false),
        };
        let used = chunk.len();
        if !too_long {
            if line.len() + used > MAX_LINE_BYTES {
                too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        reader.consume(used);
        if found {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

fn parse_error(detail: &str) -> String {
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": null,
        "error": { "code": -32700, "message": format!("Parse error: {detail}") },
    })
    .to_string()
}

async fn write_lines<W: AsyncWrite + Unpin>(
    from_rmcp: DuplexStream,
    mut errors: mpsc::Receiver<String>,
    mut output: W,
    in_flight: Arc<InFlight>,
) {
    let mut replies = BufReader::new(from_rmcp).lines();
    let mut errors_open = true;
    loop {
        let line = tokio::select! {
            reply = replies.next_line() => match reply {
                Ok(Some(line)) => {
                    if Shape::is_answer(&line) {
                        in_flight.leave();
                    }
                    line
                }
                _ => break,
            },
            error = errors.recv(), if errors_open => match error {
                Some(line) => line,
                None => { errors_open = false; continue; }
            },
        };
        if !write_line(&mut output, &line).await {
            return;
        }
    }
    // rmcp is done (stdin ended): parse errors still queued are answered too. The reader has
    // ended by now, so the queue closes once it is empty.
    while errors_open && let Some(line) = errors.recv().await {
        if !write_line(&mut output, &line).await {
            return;
        }
    }
}

/// Writes one line and flushes it; `false` when stdout is gone.
async fn write_line<W: AsyncWrite + Unpin>(output: &mut W, line: &str) -> bool {
    output.write_all(line.as_bytes()).await.is_ok()
        && output.write_all(b"\n").await.is_ok()
        && output.flush().await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn garbage_gets_a_parse_error_and_json_passes() {
        let (mut client_in, server_in) = tokio::io::duplex(4096);
        let (server_out, client_out) = tokio::io::duplex(4096);
        let FilteredStdio {
            input: rmcp_in,
            output: rmcp_out,
            ..
        } = filtered(server_in, server_out);
        client_in
            .write_all(b"{not json\n\n{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n")
            .await
            .unwrap();
        drop(client_in);
        let mut passed = String::new();
        let mut reader = BufReader::new(rmcp_in);
        reader.read_line(&mut passed).await.unwrap();
        assert_eq!(passed, "{\"jsonrpc\":\"2.0\",\"method\":\"x\"}\n");
        drop(rmcp_out);
        let mut lines = BufReader::new(client_out).lines();
        let error: serde_json::Value =
            serde_json::from_str(&lines.next_line().await.unwrap().unwrap()).unwrap();
        assert_eq!(error["error"]["code"], -32700);
        assert_eq!(error["id"], serde_json::Value::Null);
    }

    /// Lines rmcp receives within a short wait (none more once stdin is held back).
    async fn forwarded(reader: &mut tokio::io::Lines<BufReader<DuplexStream>>) -> usize {
        let mut count = 0;
        while let Ok(Ok(Some(_))) =
            tokio::time::timeout(Duration::from_millis(200), reader.next_line()).await
        {
            count += 1;
        }
        count
    }

    #[tokio::test]
    async fn requests_past_the_in_flight_bound_wait_for_answers_or_cancels() {
        let (mut client_in, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, client_out) = tokio::io::duplex(1 << 20);
        let FilteredStdio {
            input: rmcp_in,
            output: mut rmcp_out,
            ..
        } = filtered(server_in, server_out);
        let request =
            |id: usize| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n");
        let mut lines: String = (0..MAX_IN_FLIGHT).map(request).collect();
        // rmcp does not answer a cancelled request: the cancel frees its place for the next.
        lines += "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":5}}\n";
        lines += &request(1000);
        client_in.write_all(lines.as_bytes()).await.unwrap();
        let mut rmcp_reads = BufReader::new(rmcp_in).lines();
        assert_eq!(forwarded(&mut rmcp_reads).await, MAX_IN_FLIGHT + 2);
        // The bound is full again: further requests wait.
        let more: String = (2000..2010).map(request).collect();
        client_in.write_all(more.as_bytes()).await.unwrap();
        assert_eq!(forwarded(&mut rmcp_reads).await, 0);
        // Three answers (one without an id, as rmcp answers an invalid request) let three more in;
        // a request rmcp sends to the client does not.
        let answers = "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}\n\
             {\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"x\"}}\n\
             {\"jsonrpc\":\"2.0\",\"error\":{\"code\":-32600,\"message\":\"Invalid request\"}}\n\
             {\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"roots/list\"}\n";
        rmcp_out.write_all(answers.as_bytes()).await.unwrap();
        assert_eq!(forwarded(&mut rmcp_reads).await, 3);
        drop(client_out);
    }

    #[tokio::test]
    async fn invalid_utf8_is_a_parse_error() {
        let mut reader = BufReader::new(&b"\xff\xfe\n"[..]);
        let mut line = Vec::new();
        assert!(matches!(
            read_bounded_line(&mut reader, &mut line).await.unwrap(),
            LineRead::Line
        ));
        assert!(serde_json::from_slice::<serde::de::IgnoredAny>(line.trim_ascii()).is_err());
    }
}
