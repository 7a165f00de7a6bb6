//! A run as the execution tools ask for it, whole: the subject checked (the cell's version, the
//! notebook's structure), the run recorded as an [`Execution`], and run here, in the
//! background, or not at all when an earlier call with the same idempotency key began one. A
//! face sends one [`RunRequest`] and presents the one [`Ran`] it gets back.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use super::cells::{Expected, delete, insert, read_cell, unknown_id};
use super::execution::{Executed, ExecutionRequest, ProgressSink};
use super::executions::{Begun, Execution, NewExecution, Place, State};
use super::notebooks::NotebookInUse;
use super::{Domain, Error};
use crate::confirm;
use notebook_format::notebook::{Cell, CellType, Notebook};

/// What is to run.
pub enum Subject {
    /// Code in a kernel, saved nowhere: the kernel `kernel_id` names, else the current
    /// notebook's, else the default kernel.
    Code {
        code: String,
        kernel_id: Option<String>,
    },
    /// A notebook's code cell as it is now, addressed by id (which wins) or index; refused when
    /// its version is no longer `expected_version`.
    Cell {
        notebook: Option<String>,
        index: Option<i64>,
        id: Option<String>,
        expected_version: Option<String>,
    },
    /// A new code cell inserted into the current notebook at `index` (-1 appends), then run;
    /// refused when the notebook's structure is no longer `expected_notebook_version`.
    NewCell {
        index: i64,
        source: String,
        expected_notebook_version: Option<String>,
    },
}

/// A run as a caller asks for it.
pub struct RunRequest {
    pub subject: Subject,
    /// Seconds the caller allows: 0 means the configured default; clamped to the maximum.
    pub timeout_secs: f64,
    /// Answer once the run is under way instead of when it ends.
    pub background: bool,
    /// A repeat of a key gets the first run's execution; nothing runs again.
    pub idempotency_key: Option<String>,
    /// The MCP task the call became, if it did.
    pub task_id: Option<String>,
    /// The caller's cancellation: it stops a foreground run, and a background one until it is
    /// past the person's yes.
    pub cancel: CancellationToken,
    /// How often, and where, a foreground run reports how it goes.
    pub progress: Option<(Duration, ProgressSink)>,
}

/// How a run request was answered.
pub enum Ran {
    /// The run ended (or the earlier run with its key did).
    Ended(Ended),
    /// The run goes on in the background; `repeated` holds the state an earlier call's run was
    /// in when this call repeated its key.
    Started {
        execution: Arc<Execution>,
        repeated: Option<State>,
    },
}

/// A run that ended with a result; one that ended in error is answered as that error.
pub struct Ended {
    pub execution: Arc<Execution>,
    result: Arc<Result<Executed, Error>>,
}

impl Ended {
    fn answer(
        execution: Arc<Execution>,
        result: Arc<Result<Executed, Error>>,
    ) -> Result<Ran, Error> {
        match &*result {
            Ok(_) => Ok(Ran::Ended(Ended { execution, result })),
            Err(e) => Err(e.clone()),
        }
    }

    pub fn executed(&self) -> &Executed {
        match &*self.result {
            Ok(executed) => executed,
            Err(_) => unreachable!("Ended::answer keeps only results"),
        }
    }
}

impl Domain {
    /// Runs what `request` asks for, as one recorded execution.
    pub async fn run(self: &Arc<Self>, request: RunRequest) -> Result<Ran, Error> {
        let timeout = self.settings.execution.resolve(request.timeout_secs);
        let mut execution = ExecutionRequest::new(String::new(), timeout);
        execution.cancel = request.cancel.clone();
        execution.progress = request.progress.clone();
        match &request.subject {
            Subject::Code { code, kernel_id } => {
                let kernel = match kernel_id {
                    Some(id) => format!("kernel {id}"),
                    None => match self.notebooks.resolve(None) {
                        Ok(notebook) => format!("the kernel of notebook '{}'", notebook.name),
                        Err(_) => "the default kernel".to_owned(),
                    },
                };
                let (domain, kernel_id) = (self.clone(), kernel_id.clone());
                let run = move |request: ExecutionRequest| async move {
                    domain.execute_code(kernel_id.as_deref(), request).await
                };
                let place = Place::Code { kernel };
                self.recorded(&request, place, code.clone(), execution, run)
                    .await
            }
            Subject::Cell {
                notebook,
                index,
                id,
                expected_version,
            } => {
                let in_use = self.notebook(notebook.as_deref())?;
                // The cell alone: running a cell of a big notebook costs that cell.
                let (index, cell, _) = read_cell(&in_use, *index, id.as_deref()).await?;
                // What runs is the source just checked: a cell changed since it was read runs
                // nothing.
                let expected = Expected {
                    cell: expected_version.clone(),
                    notebook: None,
                };
                expected.check_cell(&in_use, &cell, index)?;
                self.run_recorded_cell(&request, &in_use, index, cell, execution)
                    .await
            }
            Subject::NewCell {
                index,
                source,
                expected_notebook_version,
            } => {
                let in_use = self.notebook(None)?;
                // A retry must not insert the cell a second time.
                if let Some(earlier) = request
                    .idempotency_key
                    .as_deref()
                    .and_then(|key| self.executions.earlier(key))
                {
                    return repeated(earlier).await;
                }
                let expected = Expected {
                    cell: None,
                    notebook: expected_notebook_version.clone(),
                };
                let new = Cell::new(CellType::Code, source.clone());
                let (index, id, saved) = insert(&in_use, *index, new, &expected).await?;
                let cell = saved
                    .cells
                    .iter()
                    .find(|c| c.id == id)
                    .cloned()
                    .ok_or_else(|| unknown_id(&id))?;
                let ran = self
                    .run_recorded_cell(&request, &in_use, index, cell, execution)
                    .await;
                // The person's yes went back to the client (a stateless request): its retry
                // inserts the cell again, so this one goes, and nothing is left of the round.
                if confirm::deferred() {
                    let inserted = |nb: &Notebook| {
                        nb.cells
                            .iter()
                            .position(|c| c.id == id)
                            .map(|i| vec![i])
                            .ok_or_else(|| unknown_id(&id))
                    };
                    if let Err(e) = delete(&in_use, inserted).await {
                        tracing::warn!(
                            "could not take back the cell inserted before the question: {}",
                            e.message()
                        );
                    }
                }
                ran
            }
        }
    }

    async fn run_recorded_cell(
        self: &Arc<Self>,
        request: &RunRequest,
        in_use: &Arc<NotebookInUse>,
        index: usize,
        cell: Cell,
        execution: ExecutionRequest,
    ) -> Result<Ran, Error> {
        let place = Place::Cell {
            notebook: in_use.name.clone(),
            path: in_use.path.clone(),
            cell_id: cell.id.clone(),
            index,
        };
        let code = cell.source.clone();
        let (domain, in_use) = (self.clone(), in_use.clone());
        let run = move |request: ExecutionRequest| async move {
            domain.run_cell(&in_use, index, &cell, request).await
        };
        self.recorded(request, place, code, execution, run).await
    }

    /// Runs `run` as a recorded execution: here (foreground), spawned (background), or not at
    /// all when an earlier call with the request's idempotency key began one.
    async fn recorded<R, Fut>(
        &self,
        request: &RunRequest,
        place: Place,
        code: String,
        mut execution: ExecutionRequest,
        run: R,
    ) -> Result<Ran, Error>
    where
        R: FnOnce(ExecutionRequest) -> Fut,
        Fut: Future<Output = Result<Executed, Error>> + Send + 'static,
    {
        execution.code = code.clone();
        let new = NewExecution {
            place,
            code,
            timeout: execution.timeout,
            background: request.background,
            idempotency_key: request.idempotency_key.clone(),
            task_id: request.task_id.clone(),
        };
        let record = match self.executions.begin(new) {
            Begun::Repeated(earlier) => return repeated(earlier).await,
            Begun::Fresh(record) => record,
        };
        execution.on_output = Some(record.output_sink());
        execution.on_sent = Some(record.sent_sink());
        if !request.background {
            let result = record.run_here(run(execution)).await;
            return Ended::answer(record, result);
        }
        // The run outlives the call: its own token, and no progress to a request that has ended.
        let stop = CancellationToken::new();
        execution.cancel = stop.clone();
        execution.progress = None;
        match record
            .run_in_background(run(execution), &request.cancel, stop)
            .await
        {
            None => Ok(Ran::Started {
                execution: record,
                repeated: None,
            }),
            // Refused or failed before running: answered as the call would be in the foreground.
            Some(result) => Ended::answer(record, result),
        }
    }
}

/// The answer to a call repeating an idempotency key: a background execution again, a
/// foreground one's result once it ended.
async fn repeated(earlier: Arc<Execution>) -> Result<Ran, Error> {
    if earlier.background {
        let (state, _) = earlier.status();
        return Ok(Ran::Started {
            execution: earlier,
            repeated: Some(state),
        });
    }
    let result = earlier.result().await;
    Ended::answer(earlier, result)
}
