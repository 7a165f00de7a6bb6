//! A use an extension made of what its policy grants — a host function, an HTTP request, a file
//! in a granted directory, or the extension's tool call itself — recorded in the tool call's
//! [`CallScope`](super::CallScope), where the OpenTelemetry handler turns each into a child span
//! of the tool call. Recorded from the guest's thread or from the task carrying an HTTP
//! exchange: only a push onto a list.

use std::sync::Arc;
use std::time::SystemTime;

use opentelemetry::KeyValue;

use super::CallScope;

/// One use: a span-to-be with its own times.
#[derive(Debug, Clone)]
pub struct GuestUse {
    /// The span's name, e.g. `extension.http`.
    pub name: String,
    pub start: SystemTime,
    pub end: SystemTime,
    /// `extension.name`, what was used, `allowed`, sizes.
    pub attributes: Vec<KeyValue>,
}

impl GuestUse {
    /// A use that began at `start` and ends now.
    pub fn ended(name: &str, start: SystemTime, attributes: Vec<KeyValue>) -> Self {
        GuestUse {
            name: name.to_owned(),
            start,
            end: SystemTime::now(),
            attributes,
        }
    }

    /// Adds it to the tool call it belongs to (outside a tool call it is only logged).
    pub fn record(self, scope: Option<&Arc<CallScope>>) {
        match scope {
            Some(scope) => scope
                .uses
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(self),
            None => tracing::debug!(use_ = self.name, "extension use outside a tool call"),
        }
    }
}
