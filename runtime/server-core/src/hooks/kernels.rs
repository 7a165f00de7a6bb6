//! The hooks bus as the Jupyter client's kernel observer: executions become `before_execute` /
//! `after_execute` pairs and lifecycle changes `kernel_lifecycle` events. Lifecycle events
//! cannot be refused, so a handler's error on one is only logged.

use jupyter_client::kernel::observer::{
    AfterFuture, Executed, KernelObserver, ObserverFuture, PairState, Refusal,
};

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

    fn after_execute<'a>(&'a self, pair: PairState, executed: Executed<'a>) -> AfterFuture<'a> {
        Box::pin(async move {
            // Only `before_execute` above makes these states.
            let pair = pair
                .downcast::<Pair>()
                .map(|pair| *pair)
                .unwrap_or_default();
            let error = executed.error.map(str::to_owned);
            let event = HookEvent::after_execute(executed.kernel_id, executed.outputs, error);
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
