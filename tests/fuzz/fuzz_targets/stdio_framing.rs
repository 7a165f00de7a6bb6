//! Bytes on stdin, as a client might send them: every line our filter answers itself must be a
//! JSON-RPC parse error, and every line it passes on must be JSON rmcp can try to read.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fuzz_target!(|data: &[u8]| {
    // Nothing answers the requests here, so past the filter's in-flight bound each one waits
    // out its timeout; with the clock paused those waits pass as soon as everything is idle.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (mut client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, mut replies) = tokio::io::duplex(1 << 16);
        let mut stdio = jupyter_mcp_server::mcp::stdio::filtered(server_in, server_out);
        let input = data.to_vec();
        let feeder = tokio::spawn(async move {
            let _ = client.write_all(&input).await;
            drop(client);
        });
        // Answers are read as they come, as a client would: unread, they fill the pipe and the
        // filter rightly stops reading stdin.
        let collector = tokio::spawn(async move {
            let mut answered = Vec::new();
            replies
                .read_to_end(&mut answered)
                .await
                .expect("in-memory read");
            answered
        });
        // What reaches rmcp: one JSON value per line.
        let mut passed = Vec::new();
        stdio
            .input
            .read_to_end(&mut passed)
            .await
            .expect("in-memory read");
        for line in passed.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            serde_json::from_slice::<serde_json::Value>(line).expect("only JSON is passed on");
            let _ = serde_json::from_slice::<rmcp::model::ClientJsonRpcMessage>(line);
        }
        drop(stdio.output);
        let _ = feeder.await;
        let _ = stdio.writer.await;
        let answered = collector.await.expect("the reader of answers");
        for line in answered.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let reply: serde_json::Value = serde_json::from_slice(line).expect("replies are JSON");
            assert_eq!(
                reply["error"]["code"], -32700,
                "only parse errors are answered here"
            );
        }
    });
});
