//! Looking at a kernel's variables without touching them: one silent execute request (no
//! execution count, no history, nothing shown in the notebook) whose `user_expressions` runs a
//! small Python program in a namespace of its own, so the user's namespace gains nothing.

use std::time::Duration;

use serde::Deserialize;
use serde_json::{Value, json};

use super::notebooks::NotebookInUse;
use super::{Domain, Error, Step};
use crate::say;
use jupyter_client::kernel::{Completion, ExecuteError, ExecutionRequest, KernelError};

/// How long an inspection may take (it only reads).
const INSPECT_TIMEOUT: Duration = Duration::from_secs(30);

/// At most this many variables are described when no names are given.
pub const MAX_LISTED: usize = 100;

/// The program the kernel runs, with `ns` (the user namespace), `names` and `limit` given.
/// Modules, functions and classes are left out of a full listing, as are IPython's own names.
const PROGRAM: &str = r#"
import json, reprlib, types
short = reprlib.Repr()
short.maxstring, short.maxother, short.maxlist, short.maxtuple = 160, 200, 8, 8
short.maxdict, short.maxset, short.maxlevel = 6, 8, 2
def describe(name, value):
    kind = type(value)
    info = {"name": name, "type": kind.__name__ if kind.__module__ == "builtins"
            else kind.__module__.split(".")[0] + "." + kind.__qualname__}
    try:
        shape = getattr(value, "shape", None)
        if isinstance(shape, tuple) and all(isinstance(n, int) for n in shape):
            info["shape"] = list(shape)
    except Exception:
        pass
    if "shape" not in info and isinstance(value, (str, bytes, bytearray, list, tuple, dict, set, frozenset, range)):
        info["length"] = len(value)
    try:
        dtypes = getattr(value, "dtypes", None)
        if dtypes is not None and hasattr(dtypes, "items") and not isinstance(value, type):
            info["columns"] = {str(c): str(t) for c, t in list(dtypes.items())[:50]}
        else:
            dtype = getattr(value, "dtype", None)
            if dtype is not None and not callable(dtype):
                info["dtype"] = str(dtype)
    except Exception:
        pass
    try:
        info["repr"] = short.repr(value)
    except Exception as e:
        info["repr"] = "<repr failed: %s>" % type(e).__name__
    return info
hidden = {}
try:
    hidden = ns["get_ipython"]().user_ns_hidden
except Exception:
    pass
missing = object()
found, unknown, more = [], [], 0
if names is None:
    for name in sorted(ns):
        value = ns[name]
        if name.startswith("_") or hidden.get(name, missing) is value:
            continue
        if isinstance(value, (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, type)):
            continue
        if len(found) >= limit:
            more += 1
            continue
        found.append(describe(name, value))
else:
    for name in names:
        if name in ns:
            found.append(describe(name, ns[name]))
        else:
            unknown.append(name)
text = json.dumps({"variables": found, "unknown": unknown, "more": more}, ensure_ascii=True)
result = type("Inspected", (), {"__repr__": lambda self: text})()
"#;

/// One variable as the kernel describes it.
#[derive(Debug, Clone, Deserialize, serde::Serialize)]
pub struct Variable {
    pub name: String,
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<i64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub length: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dtype: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub columns: Option<serde_json::Map<String, Value>>,
    pub repr: String,
}

/// What an inspection found.
#[derive(Debug, Deserialize)]
pub struct Inspection {
    pub variables: Vec<Variable>,
    /// Names asked for that the kernel does not have.
    pub unknown: Vec<String>,
    /// Variables left out of a full listing beyond `MAX_LISTED`.
    pub more: usize,
}

/// The expression that runs `PROGRAM` in a namespace of its own and evaluates to its result.
fn expression(names: Option<&[String]>) -> String {
    let names = match names {
        Some(names) => json!(names).to_string(),
        None => "None".to_owned(),
    };
    // JSON string and list literals are Python literals too.
    format!(
        "(lambda d: (exec({program}, d), d['result'])[1])({{'ns': globals(), 'names': {names}, 'limit': {MAX_LISTED}}})",
        program = json!(PROGRAM),
    )
}

impl Domain {
    /// The user variables of the notebook's kernel (or just `names`), read without running a
    /// cell. Python kernels only; a busy kernel is refused rather than waited for.
    pub async fn inspect_variables(
        &self,
        in_use: &NotebookInUse,
        names: Option<&[String]>,
    ) -> Result<(Inspection, Option<String>), Error> {
        let ready = self.ready_kernel(in_use, None).await?;
        let kernel = &ready.kernel;
        let busy = |running: Option<(String, Duration)>| {
            let what = running.map_or_else(String::new, |(code, elapsed)| {
                format!(
                    " ({:.0}s so far: {})",
                    elapsed.as_secs_f64(),
                    first_line(&code)
                )
            });
            Error::Failed(say![
                format!(
                    "The kernel of '{}' is busy running code{what}; its variables are changing. \
                     Wait for it to finish, or call ",
                    in_use.name
                ),
                Step::InterruptKernel,
                "."
            ])
        };
        if let Some(running) = kernel.running() {
            return Err(busy(Some(running)));
        }
        let language = self.kernel_language(kernel.id()).await;
        if let Some(language) = language
            .as_deref()
            .filter(|l| !l.eq_ignore_ascii_case("python"))
        {
            return Err(Error::Failed(say![
                Step::InspectVariables,
                format!(
                    " reads Python kernels; the kernel of '{}' runs {language}. Use ",
                    in_use.name
                ),
                Step::ExecuteCode,
                " with that language's own way of listing variables."
            ]));
        }
        let mut request = ExecutionRequest::new("", INSPECT_TIMEOUT);
        request.silent = true;
        // Never queued behind a run: it would wait for the run and then see stale values.
        request.only_if_idle = true;
        request
            .user_expressions
            .insert("variables".into(), Value::String(expression(names)));
        let executed = match kernel.execute(request).await {
            Err(KernelError::Execute(ExecuteError::Busy { .. })) => {
                return Err(busy(kernel.running()));
            }
            other => other.map_err(|e| {
                super::execution::gone_or_failed(
                    e,
                    in_use,
                    self.capabilities.enabled(crate::capabilities::AUTO_RESTART),
                    self.kernel_endings.of(kernel.id()),
                )
            })?,
        };
        if executed.completion != Completion::Finished {
            return Err(Error::Failed(say![
                format!(
                    "The kernel of '{}' did not answer the inspection within {}s (it may be busy \
                     with code someone else started). Try again later, or call ",
                    in_use.name,
                    INSPECT_TIMEOUT.as_secs()
                ),
                Step::InterruptKernel,
                "."
            ]));
        }
        let answer = executed
            .user_expressions
            .as_ref()
            .and_then(|e| e.get("variables"))
            .cloned()
            .unwrap_or(Value::Null);
        let inspection = parse_answer(&answer).map_err(|reason| {
            Error::Failed(say![
                format!(
                    "The kernel of '{}' could not list its variables: {reason}. ",
                    in_use.name
                ),
                Step::InspectVariables,
                " needs an IPython-based Python kernel (ipykernel)."
            ])
        })?;
        Ok((inspection, ready.replaced))
    }

    /// The language of a kernel's spec, when Jupyter says.
    async fn kernel_language(&self, kernel_id: &str) -> Option<String> {
        let rest = self.jupyter().rest().clone();
        let model = rest.get_kernel(kernel_id).await.ok()?;
        let specs = rest.kernelspecs().await.ok()?;
        specs
            .kernelspecs
            .get(&model.name)
            .and_then(|s| s.spec.language.clone())
    }
}

/// Reads the kernel's answer to the expression: `{"status": "ok", "data": {"text/plain": json}}`.
fn parse_answer(answer: &Value) -> Result<Inspection, String> {
    match answer.get("status").and_then(Value::as_str) {
        Some("ok") => {}
        Some("error") => {
            let name = answer
                .get("ename")
                .and_then(Value::as_str)
                .unwrap_or("error");
            let value = answer.get("evalue").and_then(Value::as_str).unwrap_or("");
            return Err(format!("{name}: {value}"));
        }
        _ => return Err("the kernel's reply carried no result".into()),
    }
    let text = answer
        .pointer("/data/text~1plain")
        .and_then(Value::as_str)
        .ok_or("the result had no text")?;
    serde_json::from_str(text).map_err(|e| format!("the result could not be read ({e})"))
}

/// The first line of some code, shortened, for messages.
pub fn first_line(code: &str) -> String {
    let line = code.lines().next().unwrap_or("");
    let mut short: String = line.chars().take(60).collect();
    if short.len() < line.len() || code.lines().nth(1).is_some() {
        short.push('…');
    }
    short
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_read_and_errors_named() {
        let ok = json!({"status": "ok", "data": {"text/plain":
            r#"{"variables": [{"name": "x", "type": "int", "repr": "1"}], "unknown": ["y"], "more": 0}"#}});
        let found = parse_answer(&ok).unwrap();
        assert_eq!(found.variables[0].name, "x");
        assert_eq!(found.unknown, vec!["y"]);
        let error = json!({"status": "error", "ename": "NameError", "evalue": "globals"});
        assert_eq!(parse_answer(&error).unwrap_err(), "NameError: globals");
    }

    #[test]
    fn names_become_a_python_list() {
        let e = expression(Some(&["a\"b".to_owned()]));
        assert!(e.contains(r#"'names': ["a\"b"]"#), "{e}");
        assert!(expression(None).contains("'names': None"));
    }
}
