//! MCP over stdio: newline-delimited JSON-RPC on stdin/stdout.
//!
//! rmcp silently drops a line that is not JSON; JSON-RPC asks for a parse error (-32700, id null)
//! instead, so a client that sent garbage learns it. Lines pass through a small filter that answers
//! those itself; everything else goes to rmcp unchanged. Both writers share one task, so a reply
//! line is never interleaved with another.

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};
use tokio::sync::mpsc;

/// Largest request line we accept; longer lines are answered with an error and skipped (without
/// being held in memory).
pub const MAX_LINE_BYTES: usize = super::MAX_REQUEST_BYTES;

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
            let repaired = match serde_json::from_slice::<serde_json::Value>(trimmed) {
                Ok(message) => super::compat::repair_initialize(&message, None),
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
            if to_rmcp.write_all(&forwarded).await.is_err()
                || to_rmcp.write_all(b"\n").await.is_err()
            {
                break;
            }
        }
        // Dropping `to_rmcp` is rmcp's end of input: the service finishes.
    });
    let writer = tokio::spawn(write_lines(from_rmcp, errors_rx, output));
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
) {
    let mut replies = BufReader::new(from_rmcp).lines();
    let mut errors_open = true;
    loop {
        let line = tokio::select! {
            reply = replies.next_line() => match reply {
                Ok(Some(line)) => line,
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
