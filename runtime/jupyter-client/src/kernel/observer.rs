//! Who watches the kernels this client drives. The client tells an observer before and after each
//! execution (and lets it refuse one before it starts) and of each lifecycle change: a kernel
//! started, restarted, stopped, lost. The core's hooks bus implements this trait. This crate only
//! calls it, so it names nothing above itself.

use std::any::Any;
use std::future::Future;
use std::pin::Pin;

use notebook_format::outputs::Output;

pub type ObserverFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The observer's own state for one before/after pair, handed back to it with the after event.
pub type PairState = Box<dyn Any + Send>;

/// What `after_execute` answers: whether the observer lets the execution's success stand.
pub type AfterFuture<'a> = ObserverFuture<'a, Result<(), Refusal>>;

/// How an execution ended, as an observer hears it.
#[derive(Debug, Clone, Copy)]
pub struct Executed<'a> {
    pub kernel_id: &'a str,
    /// Its outputs.
    pub outputs: &'a [Output],
    /// Why it failed, when it did.
    pub error: Option<&'a str>,
}

/// An observer refused an execution, or failed it afterwards. The message says who and why.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
#[error("{0}")]
pub struct Refusal(pub String);

pub trait KernelObserver: Send + Sync {
    /// Nobody is listening, so no event needs to be built.
    fn is_idle(&self) -> bool;

    /// Before code is sent to `kernel_id`. A refusal keeps the code from running.
    fn before_execute<'a>(
        &'a self,
        kernel_id: &'a str,
        code: &'a str,
    ) -> ObserverFuture<'a, (PairState, Result<(), Refusal>)>;

    /// After the execution ended. A refusal fails an execution that had succeeded.
    fn after_execute<'a>(&'a self, pair: PairState, executed: Executed<'a>) -> AfterFuture<'a>;

    /// A lifecycle change (`started`, `restarted`, `stopped`, `lost`, …). It cannot be refused.
    fn lifecycle<'a>(
        &'a self,
        event_type: &'a str,
        kernel_id: &'a str,
        kernel_name: &'a str,
    ) -> ObserverFuture<'a, ()>;
}
