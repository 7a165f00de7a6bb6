//! Bytes on stdin, as a client might send them: everything the transport hands rmcp is an MCP
//! message, and every line it answers itself is a JSON-RPC parse error or invalid request.
#![no_main]

use libfuzzer_sys::fuzz_target;
use rmcp::transport::Transport;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fuzz_target!(|data: &[u8]| {
    // Nothing answers the requests here, so past the in-flight bound each one waits out its
    // timeout; with the clock paused those waits pass as soon as everything is idle.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let (mut client, server_in) = tokio::io::duplex(1 << 16);
        let (server_out, mut replies) = tokio::io::duplex(1 << 16);
        let stdio =
            jupyter_mcp_server::mcp::stdio::transport(Box::new(server_in), Box::new(server_out));
        let mut transport = stdio.transport;
        let input = data.to_vec();
        let feeder = tokio::spawn(async move {
            let _ = client.write_all(&input).await;
            drop(client);
        });
        // Answers are read as they come, as a client would: unread, they fill the pipe and the
        // transport rightly stops reading stdin.
        let collector = tokio::spawn(async move {
            let mut answered = Vec::new();
            replies
                .read_to_end(&mut answered)
                .await
                .expect("in-memory read");
            answered
        });
        // What reaches rmcp is typed: that it arrives at all is the check.
        while transport.receive().await.is_some() {}
        drop(transport);
        let _ = feeder.await;
        let _ = stdio.answers_written.await;
        let answered = collector.await.expect("the reader of answers");
        for line in answered.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            let reply: serde_json::Value = serde_json::from_slice(line).expect("replies are JSON");
            let code = &reply["error"]["code"];
            assert!(
                *code == -32700 || *code == -32600,
                "only parse errors and invalid requests are answered here: {reply}"
            );
        }
    });
});
