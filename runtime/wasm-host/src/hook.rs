//! A hook-handler guest on the hooks bus, treated exactly like a native handler: same events and
//! data, its own context per before/after pair, its own `propagate_errors`.
//!
//! It is registered before its guest is compiled, so it keeps its place in the operator's order.
//! While the guest loads, an optional handler lets events pass (it is not there yet); a critical
//! one makes the calls it guards wait for the guest, up to its deadline, then refuses them: a
//! policy must not be a way around itself while it starts.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use serde_json::{Map, Value};

use super::guest::{CallKind, Guest, GuestError};
use super::slot::GuestSlot;
use server_core::hooks::{
    Announced, Decision, DecisionFuture, HookEvent, HookFuture, HookHandler, HookKind,
};

const UNDECIDED: u8 = 0;
const OPTIONAL: u8 = 1;
const CRITICAL: u8 = 2;

pub struct WasmHookHandler {
    guest: Arc<GuestSlot>,
    /// Until the guest says (or the operator decided), it counts as optional.
    critical: AtomicU8,
    /// How long a critical handler's event waits for a guest still loading.
    wait: Duration,
    /// Its guest once seen ready, whose declared name names the handler from then on.
    loaded: std::sync::OnceLock<Arc<Guest>>,
    /// Its name until then (the file's, or what it declared at an earlier start).
    name: String,
}

impl WasmHookHandler {
    pub fn new(guest: Arc<Guest>, critical: bool) -> Self {
        let handler = Self::pending(GuestSlot::ready(guest.clone()), Duration::ZERO);
        handler.decide(critical);
        handler
    }

    /// A handler for a guest that may still be loading; `decide` says whether it is critical.
    pub fn pending(guest: Arc<GuestSlot>, wait: Duration) -> Self {
        WasmHookHandler {
            name: guest.name(),
            loaded: std::sync::OnceLock::new(),
            guest,
            critical: AtomicU8::new(UNDECIDED),
            wait,
        }
    }

    pub fn decide(&self, critical: bool) {
        self.critical.store(
            if critical { CRITICAL } else { OPTIONAL },
            Ordering::Release,
        );
    }

    fn critical(&self) -> bool {
        self.critical.load(Ordering::Acquire) == CRITICAL
    }

    /// Its guest, waiting for it when the events it guards must not pass without it.
    async fn guest(&self) -> Result<Option<Arc<Guest>>, String> {
        if let Some(guest) = self.loaded.get() {
            return Ok(Some(guest.clone()));
        }
        match self.guest.now() {
            Some(Ok(guest)) => Ok(Some(self.loaded.get_or_init(|| guest).clone())),
            // Refused at load: the server goes on without it, as when it was never configured.
            Some(Err(_)) => Ok(None),
            None if !self.critical() => Ok(None),
            None => match self.guest.wait(self.wait).await {
                Ok(guest) => Ok(Some(self.loaded.get_or_init(|| guest).clone())),
                Err(super::slot::SlotError::Refused { .. }) => Ok(None),
                Err(e) => Err(format!(
                    "{e}; it is critical, so what it guards waits for it"
                )),
            },
        }
    }

    /// One event into the guest; `Ok(Some(map))` replaces the handler's context, and the
    /// reason beside it asks the person first (WIT 0.3.0's hook reply).
    pub async fn deliver(
        guest: &Arc<Guest>,
        event: &HookEvent,
        context: &Map<String, Value>,
    ) -> Result<Result<(Option<Map<String, Value>>, Option<String>), String>, GuestError> {
        let event = event.clone();
        let context = Value::Object(context.clone()).to_string();
        let answer = guest
            .call(CallKind::Hook, move |api, store| {
                api.on_event(store, &event, &context)
            })
            .await?;
        let reply = match answer {
            Ok(reply) => reply,
            Err(refusal) => return Ok(Err(guest.redact(&refusal))),
        };
        let context = match reply.context {
            Some(text) => match serde_json::from_str(&text) {
                Ok(Value::Object(map)) => Some(map),
                _ => {
                    return Err(GuestError::BadAnswer {
                        guest: guest.name().to_owned(),
                        reason: "the context it returned is not a JSON object".into(),
                    });
                }
            },
            None => None,
        };
        Ok(Ok((context, reply.confirm)))
    }

    /// An event through the guest, whatever its kind: the handler's context updated, and the
    /// confirmation its guest asks for (if any).
    async fn handle(
        &self,
        event: &HookEvent,
        context: &mut Map<String, Value>,
    ) -> Result<Option<String>, String> {
        let guest = match self.guest().await {
            Ok(Some(guest)) => guest,
            Ok(None) => return Ok(None),
            Err(refusal) => return Err(refusal),
        };
        if guest.is_stopped() {
            // Shutting down: the clean-up's events skip the guest; a critical one still
            // refuses what it guards.
            let guards = matches!(
                event.kind(),
                HookKind::BeforeToolCall | HookKind::BeforeExecute
            );
            return if self.critical() && guards {
                Err(format!(
                    "'{}' is stopped: the server is shutting down",
                    self.name()
                ))
            } else {
                Ok(None)
            };
        }
        match Self::deliver(&guest, event, context).await {
            Ok(Ok((replaced, confirm))) => {
                if let Some(map) = replaced {
                    *context = map;
                }
                Ok(confirm)
            }
            Ok(Err(refusal)) => Err(refusal),
            // A critical guest that cannot answer fails the call it guards (fail closed: a
            // policy that can be crashed must not be a way around it); the guest's failure
            // was logged where it happened.
            Err(e) => Err(e.to_string()),
        }
    }
}

impl HookHandler for WasmHookHandler {
    fn name(&self) -> &str {
        self.loaded.get().map_or(&self.name, |guest| guest.name())
    }

    fn propagate_errors(&self) -> bool {
        self.critical()
    }

    fn on_event<'a>(
        &'a self,
        event: &'a HookEvent,
        context: &'a mut Map<String, Value>,
    ) -> HookFuture<'a> {
        Box::pin(async move {
            if let Some(reason) = self.handle(event, context).await? {
                // Only a before event's confirmation holds a call (`decide`).
                tracing::debug!(
                    handler = self.name(),
                    event = event.kind().as_str(),
                    "the hook handler asked for confirmation ({reason}) on an event that holds \
                     no call; ignored"
                );
            }
            Ok(())
        })
    }

    /// A before event: the guest's `confirm` becomes the bus's `Decision::Confirm`, which the
    /// bus follows for a critical handler (and logs and ignores for an optional one).
    fn decide<'a>(&'a self, before: Announced<'a>) -> DecisionFuture<'a> {
        Box::pin(async move {
            let confirm = self.handle(before.event, before.context).await?;
            Ok(confirm.map_or(Decision::Proceed, Decision::Confirm))
        })
    }

    fn shutdown(&self) {
        if let Some(Ok(guest)) = self.guest.now() {
            guest.stop();
        }
    }
}
