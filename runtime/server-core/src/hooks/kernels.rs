//! The hooks bus as the Jupyter client's kernel observer: executions become `before_execute` /
//! `after_execute` pairs and lifecycle changes `kernel_lifecycle` events. Lifecycle events
//! cannot be refused, so a handler's error on one is only logged.

use jupyter_client::kernel::observer::{KernelObserver, ObserverFuture, PairState, Refusal};
use serde_json::Value;

use super::{HookError, HookEvent, Hooks, Pair};

impl From<HookError> for Refusal {
    fn from(error: HookError) -> Self {
        Refusal(error.to_string())
    }
}

impl KernelObserver for Hooks {
    fn is_idle(&self) -> bool {
        self.is_empty()
    }

    fn before_execute<'a>(
        &'a self,
        kernel_id: &'a str,
        code: &'a str,
    ) -> ObserverFuture<'a, (PairState, Result<(), Refusal>)> {
        Box::pin(async move {
            let (pair, refused) = self
                .before(&HookEvent::before_execute(kernel_id, code))
                .await;
            (Box::new(pair) as PairState, refused.map_err(Refusal::from))
        })
    }

    fn after_execute<'a>(
        &'a self,
        pair: PairState,
        kernel_id: &'a str,
        outputs: &'a [Value],
        error: Option<String>,
    ) -> ObserverFuture<'a, Result<(), Refusal>> {
        Box::pin(async move {
            // Only `before_execute` above makes these states.
            let pair = pair
                .downcast::<Pair>()
                .map(|pair| *pair)
                .unwrap_or_default();
            let event = HookEvent::after_execute(kernel_id, outputs, error);
            self.after(pair, &event).await.map_err(Refusal::from)
        })
    }

    fn lifecycle<'a>(
        &'a self,
        event_type: &'a str,
        kernel_id: &'a str,
        kernel_name: &'a str,
    ) -> ObserverFuture<'a, ()> {
        Box::pin(async move {
            let event = HookEvent::kernel_lifecycle(event_type, kernel_id, kernel_name);
            if let Err(e) = self.fire(&event).await {
                tracing::warn!("{e}");
            }
        })
    }
}
