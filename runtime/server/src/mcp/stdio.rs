//! MCP over stdio: newline-delimited JSON-RPC on stdin/stdout, as rmcp's transport.
//!
//! rmcp's own stdio transport silently drops a line that is not JSON; JSON-RPC asks for a parse
//! error (-32700, id null) instead, so a client that sent garbage learns it. Ours answers those
//! itself, bounds the requests rmcp holds at once, and writes every line whole.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{ClientNotification, JsonRpcMessage};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
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

/// The requests rmcp has read and not yet answered, counted by the messages going in and out.
struct InFlight(Semaphore);

impl InFlight {
    fn new() -> Self {
        InFlight(Semaphore::new(MAX_IN_FLIGHT))
    }

    /// Takes a place, waiting for one until `deadline` at the most. Cancel-safe: a wait given
    /// up takes nothing.
    async fn enter_by(&self, deadline: tokio::time::Instant) {
        match tokio::time::timeout_at(deadline, self.0.acquire()).await {
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
/// alone (the embedded Jupyter gets neither: `jupyter_client::launcher`).
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

/// Where every line to the client goes: rmcp's replies and our own answers, one whole line
/// (a single write when the pipe has room) at a time.
type SharedOutput = Arc<tokio::sync::Mutex<Output>>;

/// rmcp's transport on stdin and stdout, with no task or buffer between them and rmcp: the
/// service loop reads stdin itself and each reply is written by the task that sends it. (A
/// filter in front of rmcp's own transport cost every call two more task hops and three more
/// JSON parses.) Lines rmcp would drop without a word get an answer here: a parse error
/// (-32700) for a line that is not JSON, an invalid request (-32600, with the request's id when
/// it has one) for JSON that is not an MCP message.
pub struct StdioTransport {
    lines: LineReader,
    output: SharedOutput,
    in_flight: Arc<InFlight>,
    /// A request read and waiting, until the deadline, for a place among those in flight.
    waiting: Option<(RxJsonRpcMessage<RoleServer>, tokio::time::Instant)>,
    /// Our own answers, written in order by their own task so that `receive` never stops
    /// half-way through a write.
    answers: mpsc::Sender<String>,
    /// An answer made while that queue was full (a client flooding garbage without reading).
    unsent: Option<String>,
}

/// The transport, and the task writing our own answers, which ends once every answer made
/// before the transport was dropped is out.
pub struct Stdio {
    pub transport: StdioTransport,
    pub answers_written: tokio::task::JoinHandle<()>,
}

/// Serves MCP on `input` and `output`.
pub fn transport(input: Input, output: Output) -> Stdio {
    let output: SharedOutput = Arc::new(tokio::sync::Mutex::new(output));
    // Bounded: a client flooding garbage without reading our answers is slowed down, not
    // allowed to grow our memory.
    let (answers, mut queued) = mpsc::channel::<String>(256);
    let writer = output.clone();
    let answers_written = tokio::spawn(async move {
        while let Some(line) = queued.recv().await {
            let mut line = line.into_bytes();
            line.push(b'\n');
            if write_line(&mut *writer.lock().await, &line).await.is_err() {
                return;
            }
        }
    });
    Stdio {
        transport: StdioTransport {
            lines: LineReader::new(input),
            output,
            in_flight: Arc::new(InFlight::new()),
            waiting: None,
            answers,
            unsent: None,
        },
        answers_written,
    }
}

impl Transport<RoleServer> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleServer>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let output = self.output.clone();
        let in_flight = self.in_flight.clone();
        async move {
            let answers = matches!(item, JsonRpcMessage::Response(_) | JsonRpcMessage::Error(_));
            let mut line = serde_json::to_vec(&item).map_err(std::io::Error::other)?;
            line.push(b'\n');
            let written = write_line(&mut *output.lock().await, &line).await;
            if answers {
                in_flight.leave();
            }
            written
        }
    }

    /// Cancel-safe, as rmcp needs (it polls this inside a `select!`): everything read so far
    /// lives in `self`, never in the future.
    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleServer>> {
        loop {
            if self.unsent.is_some() {
                match self.answers.reserve().await {
                    Ok(place) => place.send(self.unsent.take().unwrap_or_default()),
                    // The writer is gone with stdout: nobody can read the answer.
                    Err(_) => self.unsent = None,
                }
            }
            if let Some((_, deadline)) = &self.waiting {
                self.in_flight.enter_by(*deadline).await;
                return self.waiting.take().map(|(message, _)| message);
            }
            let line = match self.lines.next().await {
                Ok(LineRead::Line(line)) => line,
                Ok(LineRead::TooLong) => {
                    self.answer(parse_error(&format!(
                        "request line longer than {MAX_LINE_BYTES} bytes"
                    )));
                    continue;
                }
                Ok(LineRead::Eof) => return None,
                Err(e) => {
                    tracing::error!("reading stdin failed: {e}");
                    return None;
                }
            };
            match incoming(&line) {
                Incoming::Message(message) => {
                    let message = *message;
                    match &message {
                        JsonRpcMessage::Request(_) => {
                            let deadline = tokio::time::Instant::now() + IN_FLIGHT_WAIT;
                            self.waiting = Some((message, deadline));
                            continue;
                        }
                        // rmcp does not answer a cancelled request: its place is free.
                        JsonRpcMessage::Notification(notification)
                            if matches!(
                                notification.notification,
                                ClientNotification::CancelledNotification(_)
                            ) =>
                        {
                            self.in_flight.leave();
                        }
                        _ => {}
                    }
                    return Some(message);
                }
                Incoming::Answer(answer) => self.answer(answer),
                Incoming::Nothing => {}
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        self.output.lock().await.flush().await
    }
}

impl StdioTransport {
    /// Queues one of our own answers; when the queue is full it is sent before the next read.
    fn answer(&mut self, line: String) {
        match self.answers.try_send(line) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(line)) => self.unsent = Some(line),
            Err(mpsc::error::TrySendError::Closed(_)) => {}
        }
    }
}

/// What one line from the client comes to.
enum Incoming {
    /// Boxed: a message is large beside the other cases.
    Message(Box<RxJsonRpcMessage<RoleServer>>),
    /// Our own answer to it.
    Answer(String),
    /// An empty line, or a notification rmcp could not read (notifications get no answer).
    Nothing,
}

fn incoming(line: &[u8]) -> Incoming {
    let trimmed = line.trim_ascii();
    if trimmed.is_empty() {
        return Incoming::Nothing;
    }
    // Checked apart from the JSON: skipping a string's contents does not check its UTF-8.
    if let Err(e) = std::str::from_utf8(trimmed) {
        return Incoming::Answer(parse_error(&format!("the line is not UTF-8: {e}")));
    }
    // A full parse, not a skim: skimming accepts numbers a parse refuses (1e999), and rmcp
    // would drop such a line without a word (found by fuzzing).
    let value = match serde_json::from_slice::<serde_json::Value>(trimmed) {
        Ok(value) => value,
        Err(e) => {
            tracing::debug!("answering an unparsable line with a parse error: {e}");
            return Incoming::Answer(parse_error(&e.to_string()));
        }
    };
    // Read from the text, as rmcp's own transport reads it (a repaired message from its value).
    let read = match super::compat::repair(&value, None) {
        Some(repaired) => serde_json::from_value(repaired),
        None => serde_json::from_slice(trimmed),
    };
    match read {
        Ok(message) => Incoming::Message(Box::new(message)),
        Err(e) if value.get("method").is_some() && value.get("id").is_none() => {
            tracing::debug!("dropping a notification that is not an MCP message: {e}");
            Incoming::Nothing
        }
        Err(e) => Incoming::Answer(invalid_request(&value, &e.to_string())),
    }
}

/// Reads lines of at most `MAX_LINE_BYTES`, cancel-safe: a line read in part stays here.
struct LineReader {
    reader: BufReader<Input>,
    line: Vec<u8>,
    too_long: bool,
}

enum LineRead {
    Line(Vec<u8>),
    TooLong,
    Eof,
}

impl LineReader {
    fn new(input: Input) -> Self {
        LineReader {
            reader: BufReader::new(input),
            line: Vec::new(),
            too_long: false,
        }
    }

    /// The next line (longer ones are skipped without being held in memory); a last line
    /// without a newline counts.
    async fn next(&mut self) -> std::io::Result<LineRead> {
        loop {
            let available = self.reader.fill_buf().await?;
            if available.is_empty() {
                return Ok(if std::mem::take(&mut self.too_long) {
                    LineRead::TooLong
                } else if self.line.is_empty() {
                    LineRead::Eof
                } else {
                    LineRead::Line(std::mem::take(&mut self.line))
                });
            }
            let (chunk, found) = match available.iter().position(|&b| b == b'\n') {
                Some(i) => (&available[..=i], true),
                None => (available, false),
            };
            let used = chunk.len();
            if !self.too_long {
                if self.line.len() + used > MAX_LINE_BYTES {
                    self.too_long = true;
                    self.line = Vec::new();
                } else {
                    self.line.extend_from_slice(chunk);
                }
            }
            self.reader.consume(used);
            if found {
                return Ok(if std::mem::take(&mut self.too_long) {
                    LineRead::TooLong
                } else {
                    LineRead::Line(std::mem::take(&mut self.line))
                });
            }
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

/// The answer to JSON that is not an MCP message: with its id when it has a usable one, so
/// the client can match it to its request.
fn invalid_request(message: &serde_json::Value, detail: &str) -> String {
    let id = message
        .get("id")
        .filter(|id| id.is_string() || id.is_i64() || id.is_u64())
        .cloned()
        .unwrap_or_default();
    serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {
            "code": -32600,
            "message": format!(
                "Invalid request: {detail}. Send a JSON-RPC 2.0 message with \"jsonrpc\": \"2.0\", \
                 a \"method\" and, for that method, \"params\" of the shape the MCP \
                 specification gives."
            ),
        },
    })
    .to_string()
}

/// Writes one whole line and flushes it.
async fn write_line(output: &mut Output, line: &[u8]) -> std::io::Result<()> {
    output.write_all(line).await?;
    output.flush().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, DuplexStream};

    /// A transport on in-memory pipes: the client's end of stdin and of stdout.
    fn on_pipes(capacity: usize) -> (Stdio, DuplexStream, DuplexStream) {
        let (client_in, server_in) = tokio::io::duplex(capacity);
        let (server_out, client_out) = tokio::io::duplex(capacity);
        (
            transport(Box::new(server_in), Box::new(server_out)),
            client_in,
            client_out,
        )
    }

    fn lines_of(bytes: &[u8]) -> Vec<serde_json::Value> {
        bytes
            .split(|b| *b == b'\n')
            .filter(|line| !line.is_empty())
            .map(|line| serde_json::from_slice(line).expect("only JSON lines"))
            .collect()
    }

    #[tokio::test]
    async fn garbage_is_answered_and_messages_pass() {
        let (stdio, mut client_in, mut client_out) = on_pipes(4096);
        let mut transport = stdio.transport;
        client_in
            .write_all(
                b"{not json\n\n{\"jsonrpc\":\"2.0\",\"id\":9,\"params\":{}}\n\
                  {\"jsonrpc\":\"2.0\",\"params\":{}}\n\
                  {\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n",
            )
            .await
            .unwrap();
        drop(client_in);
        let passed = transport.receive().await.expect("the notification");
        assert!(matches!(
            passed,
            JsonRpcMessage::Notification(n)
                if matches!(n.notification, ClientNotification::InitializedNotification(_))
        ));
        assert!(transport.receive().await.is_none(), "stdin ended");
        drop(transport);
        stdio.answers_written.await.unwrap();
        let mut answered = Vec::new();
        client_out.read_to_end(&mut answered).await.unwrap();
        let answers = lines_of(&answered);
        assert_eq!(answers.len(), 3, "{answers:?}");
        assert_eq!(answers[0]["error"]["code"], -32700);
        assert_eq!(answers[0]["id"], serde_json::Value::Null);
        // JSON that is no MCP message: refused, with the id it came with when it has one.
        assert_eq!(answers[1]["error"]["code"], -32600);
        assert_eq!(answers[1]["id"], 9);
        assert_eq!(answers[2]["error"]["code"], -32600);
        assert_eq!(answers[2]["id"], serde_json::Value::Null);
    }

    #[tokio::test]
    async fn a_reply_is_one_whole_line() {
        let (stdio, _client_in, mut client_out) = on_pipes(4096);
        let mut transport = stdio.transport;
        let reply: TxJsonRpcMessage<RoleServer> =
            serde_json::from_str("{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{}}").unwrap();
        transport.send(reply).await.unwrap();
        let mut buffer = vec![0; 4096];
        let read = client_out.read(&mut buffer).await.unwrap();
        assert_eq!(&buffer[read - 1..read], b"\n");
        assert_eq!(lines_of(&buffer[..read])[0]["id"], 3);
    }

    #[tokio::test]
    async fn a_line_read_in_part_survives_a_cancelled_receive() {
        let (stdio, mut client_in, _client_out) = on_pipes(4096);
        let mut transport = stdio.transport;
        client_in
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,")
            .await
            .unwrap();
        // rmcp drops `receive` whenever another branch of its loop is ready first.
        let cut = tokio::time::timeout(Duration::from_millis(50), transport.receive()).await;
        assert!(cut.is_err());
        client_in
            .write_all(b"\"method\":\"ping\"}\n")
            .await
            .unwrap();
        let message = transport.receive().await.expect("the whole request");
        assert!(matches!(message, JsonRpcMessage::Request(r) if r.id.to_string() == "1"));
    }

    /// Messages rmcp receives within a short wait (none more once stdin is held back).
    async fn received(transport: &mut StdioTransport) -> usize {
        let mut count = 0;
        while let Ok(Some(_)) =
            tokio::time::timeout(Duration::from_millis(200), transport.receive()).await
        {
            count += 1;
        }
        count
    }

    #[tokio::test]
    async fn requests_past_the_in_flight_bound_wait_for_answers_or_cancels() {
        let (stdio, mut client_in, client_out) = on_pipes(1 << 20);
        let mut transport = stdio.transport;
        let request =
            |id: usize| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}\n");
        let mut lines: String = (0..MAX_IN_FLIGHT).map(request).collect();
        // rmcp does not answer a cancelled request: the cancel frees its place for the next.
        lines += "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\",\"params\":{\"requestId\":5}}\n";
        lines += &request(1000);
        client_in.write_all(lines.as_bytes()).await.unwrap();
        assert_eq!(received(&mut transport).await, MAX_IN_FLIGHT + 2);
        // The bound is full again: further requests wait.
        let more: String = (2000..2010).map(request).collect();
        client_in.write_all(more.as_bytes()).await.unwrap();
        assert_eq!(received(&mut transport).await, 0);
        // Three answers (one without an id, as an invalid request is answered) let three more
        // in; a request we send to the client does not.
        for sent in [
            "{\"jsonrpc\":\"2.0\",\"id\":0,\"result\":{}}",
            "{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32601,\"message\":\"x\"}}",
            "{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32600,\"message\":\"x\"}}",
            "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"roots/list\"}",
        ] {
            let message: TxJsonRpcMessage<RoleServer> = serde_json::from_str(sent).unwrap();
            transport.send(message).await.unwrap();
        }
        assert_eq!(received(&mut transport).await, 3);
        drop(client_out);
    }

    #[test]
    fn invalid_utf8_is_a_parse_error() {
        let Incoming::Answer(answer) = incoming(b"\xff\xfe\n") else {
            panic!("not answered");
        };
        let answer: serde_json::Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["error"]["code"], -32700);
    }
}
