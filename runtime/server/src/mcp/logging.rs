//! MCP logging: the server's log lines for one client's request, sent to that client as
//! `notifications/message` at or above the level it asked for.
//!
//! A client asks for a level per session (`logging/setLevel`, 2025-11-25) or per request
//! (`_meta["io.modelcontextprotocol/logLevel"]`, 2026-07-28; it wins over the session's). A
//! request that asked for nothing gets no log notifications at all. The lines are ordinary
//! `tracing` events: [`ClientLogLayer`] copies those raised while a request's [`CLIENT_LOG`] scope
//! is active into its queue, and the request's own task sends them (rmcp routes notifications to
//! the right HTTP stream through task-locals, as for progress).

#![allow(deprecated)] // Logging is deprecated in 2026-07-28 but still part of both revisions.

use std::fmt::Write as _;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use serde_json::Value;
use tokio::sync::mpsc;
use tracing::field::{Field, Visit};
use tracing_subscriber::layer::Context;

tokio::task_local! {
    /// Where the log lines of the request being served go, and from which level.
    pub static CLIENT_LOG: ClientLog;
}

/// A request's log sink: the lowest level it wants and the queue its task drains.
#[derive(Clone)]
pub struct ClientLog {
    pub level: LoggingLevel,
    pub queue: mpsc::UnboundedSender<LoggingMessageNotificationParam>,
}

/// Severity rank of an MCP level (debug lowest).
fn rank(level: LoggingLevel) -> u8 {
    level as u8
}

/// The MCP level of a `tracing` level.
pub fn level_of(level: &tracing::Level) -> LoggingLevel {
    match *level {
        tracing::Level::ERROR => LoggingLevel::Error,
        tracing::Level::WARN => LoggingLevel::Warning,
        tracing::Level::INFO => LoggingLevel::Info,
        _ => LoggingLevel::Debug,
    }
}

/// Whether a line at `line` passes a client's `wanted` level.
pub fn passes(line: LoggingLevel, wanted: LoggingLevel) -> bool {
    rank(line) >= rank(wanted)
}

/// The level a request's lines are sent at: its own `_meta` level, else the session's; `None`
/// means none are sent.
pub fn effective_level(
    request: Option<LoggingLevel>,
    session: Option<LoggingLevel>,
) -> Option<LoggingLevel> {
    request.or(session)
}

/// The `tracing` layer that copies events into the current request's sink. It only sees events
/// of our crates (see `filter`), so rmcp's own lines about sending never loop back.
pub struct ClientLogLayer;

impl ClientLogLayer {
    /// The events the layer may forward: our crates', down to debug, whatever the operator's
    /// stderr filter says.
    pub fn filter() -> tracing_subscriber::filter::Targets {
        tracing_subscriber::filter::Targets::new().with_targets(
            crate::logs::OUR_CRATES
                .iter()
                .map(|name| (*name, tracing::Level::DEBUG)),
        )
    }
}

impl<S: tracing::Subscriber> tracing_subscriber::Layer<S> for ClientLogLayer {
    fn on_event(&self, event: &tracing::Event<'_>, _ctx: Context<'_, S>) {
        let level = level_of(event.metadata().level());
        let _ = CLIENT_LOG.try_with(|sink| {
            if !passes(level, sink.level) {
                return;
            }
            let mut text = TextVisitor::default();
            event.record(&mut text);
            let mut param = LoggingMessageNotificationParam::new(level, Value::String(text.done()));
            param.logger = Some(crate::logs::logger_name(event.metadata().target()));
            let _ = sink.queue.send(param);
        });
    }
}

/// Renders an event as one line: the message, then `key=value` for each other field.
#[derive(Default)]
struct TextVisitor {
    message: String,
    fields: String,
}

impl TextVisitor {
    fn done(self) -> String {
        if self.fields.is_empty() {
            self.message
        } else if self.message.is_empty() {
            self.fields.trim_start().to_owned()
        } else {
            format!("{}{}", self.message, self.fields)
        }
    }
}

impl Visit for TextVisitor {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.message = value.to_owned();
        } else {
            let _ = write!(self.fields, " {}={value}", field.name());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        } else {
            let _ = write!(self.fields, " {}={value:?}", field.name());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing_subscriber::layer::SubscriberExt;

    #[test]
    fn levels_order_as_the_protocol_lists_them() {
        assert!(passes(LoggingLevel::Error, LoggingLevel::Warning));
        assert!(passes(LoggingLevel::Info, LoggingLevel::Info));
        assert!(!passes(LoggingLevel::Debug, LoggingLevel::Info));
        assert!(!passes(LoggingLevel::Warning, LoggingLevel::Emergency));
        assert_eq!(
            effective_level(Some(LoggingLevel::Error), Some(LoggingLevel::Debug)),
            Some(LoggingLevel::Error)
        );
        assert_eq!(effective_level(None, None), None);
    }

    #[tokio::test]
    async fn only_lines_inside_a_scope_at_or_above_its_level_are_queued() {
        use tracing_subscriber::Layer as _;
        let subscriber = tracing_subscriber::registry()
            .with(ClientLogLayer.with_filter(ClientLogLayer::filter()));
        let _guard = tracing::subscriber::set_default(subscriber);
        let (queue, mut lines) = mpsc::unbounded_channel();
        tracing::warn!("outside any request");
        CLIENT_LOG
            .scope(
                ClientLog {
                    level: LoggingLevel::Info,
                    queue,
                },
                async {
                    tracing::debug!("too detailed");
                    tracing::info!(kernel = "k1", "kernel started");
                    tracing::error!("it failed");
                },
            )
            .await;
        let first = lines.recv().await.unwrap();
        assert_eq!(first.data, Value::String("kernel started kernel=k1".into()));
        assert_eq!(first.level, LoggingLevel::Info);
        let second = lines.recv().await.unwrap();
        assert_eq!(second.level, LoggingLevel::Error);
        assert!(lines.recv().await.is_none(), "nothing else was queued");
    }
}
