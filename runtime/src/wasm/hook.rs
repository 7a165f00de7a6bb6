//! A hook-handler guest on the hooks bus, treated exactly like a native handler: same events and
//! data, its own context per before/after pair, its own `propagate_errors`.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::guest::{CallKind, Guest, GuestError};
use super::v0_1_0::{convert, types};
use crate::hooks::{HookEvent, HookFuture, HookHandler, HookKind};

pub struct WasmHookHandler {
    guest: Arc<Guest>,
    critical: bool,
}

impl WasmHookHandler {
    pub fn new(guest: Arc<Guest>, critical: bool) -> Self {
        WasmHookHandler { guest, critical }
    }

    /// The event as the WIT carries it.
    pub fn to_wit(event: &HookEvent) -> types::HookEvent {
        convert::hook_event(event)
    }

    /// One event into the guest; `Ok(Some(map))` replaces the handler's context.
    pub async fn deliver(
        &self,
        event: &HookEvent,
        context: &Map<String, Value>,
    ) -> Result<Result<Option<Map<String, Value>>, String>, GuestError> {
        let wit = Self::to_wit(event);
        let context = Value::Object(context.clone()).to_string();
        let answer = self
            .guest
            .call(CallKind::Hook, move |live| live.on_event(&wit, &context))
            .await?;
        match answer {
            Ok(Some(text)) => match serde_json::from_str(&text) {
                Ok(Value::Object(map)) => Ok(Ok(Some(map))),
                _ => Err(GuestError::BadAnswer {
                    guest: self.guest.name().to_owned(),
                    reason: "the context it returned is not a JSON object".into(),
                }),
            },
            Ok(None) => Ok(Ok(None)),
            Err(refusal) => Ok(Err(refusal)),
        }
    }
}

impl HookHandler for WasmHookHandler {
    fn name(&self) -> &str {
        self.guest.name()
    }

    fn propagate_errors(&self) -> bool {
        self.critical
    }

    fn on_event<'a>(
        &'a self,
        event: &'a HookEvent,
        context: &'a mut Map<String, Value>,
    ) -> HookFuture<'a> {
        Box::pin(async move {
            if self.guest.is_stopped() {
                // Shutting down: the clean-up's events skip the guest; a critical one still
                // refuses what it guards.
                let guards = matches!(
                    event.kind(),
                    HookKind::BeforeToolCall | HookKind::BeforeExecute
                );
                return if self.critical && guards {
                    Err(format!(
                        "'{}' is stopped: the server is shutting down",
                        self.name()
                    ))
                } else {
                    Ok(())
                };
            }
            match self.deliver(event, context).await {
                Ok(Ok(Some(map))) => {
                    *context = map;
                    Ok(())
                }
                Ok(Ok(None)) => Ok(()),
                Ok(Err(refusal)) => Err(refusal),
                // A critical guest that cannot answer fails the call it guards (fail closed: a
                // policy that can be crashed must not be a way around it); the guest's failure
                // was logged where it happened.
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn shutdown(&self) {
        self.guest.stop();
    }
}
