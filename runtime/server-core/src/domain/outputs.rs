//! The whole outputs of recent `execute_code` calls, kept for the resources a shortened result
//! names.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

pub use notebook_format::outputs::*;

/// The URI scheme of kept outputs: `execution://{id}/outputs/{index}`.
pub const EXECUTION_SCHEME: &str = "execution://";

/// How many bytes the kept outputs of executions may hold together, and how many executions.
const KEPT_BYTES: usize = 64 << 20;
const KEPT_EXECUTIONS: usize = 512;

/// The whole outputs of recent `execute_code` calls, which keep no notebook copy: what a
/// shortened result points to (`execution://{id}/outputs/{index}`). Bounded in memory, the
/// oldest going first; an execution larger than the whole bound is not kept.
#[derive(Default)]
pub struct KeptOutputs {
    kept: Mutex<VecDeque<Kept>>,
}

/// One execution's outputs as kept, with the bytes they count for against the bound.
struct Kept {
    id: String,
    outputs: Arc<Vec<Output>>,
    bytes: usize,
}

impl KeptOutputs {
    /// Keeps these outputs; returns their id, or `None` when they alone exceed the bound.
    pub fn keep(&self, outputs: Vec<Output>) -> Option<String> {
        let size: usize = outputs.iter().map(|o| o.to_json().to_string().len()).sum();
        if size > KEPT_BYTES {
            return None;
        }
        let id = uuid::Uuid::new_v4().simple().to_string()[..12].to_owned();
        let mut kept = self.kept.lock().expect("kept outputs lock");
        let mut total: usize = kept.iter().map(|kept| kept.bytes).sum::<usize>() + size;
        while total > KEPT_BYTES || kept.len() >= KEPT_EXECUTIONS {
            let Some(dropped) = kept.pop_front() else {
                break;
            };
            total -= dropped.bytes;
        }
        kept.push_back(Kept {
            id: id.clone(),
            outputs: Arc::new(outputs),
            bytes: size,
        });
        Some(id)
    }

    pub fn get(&self, id: &str) -> Option<Arc<Vec<Output>>> {
        let kept = self.kept.lock().expect("kept outputs lock");
        kept.iter()
            .find(|kept| kept.id == id)
            .map(|kept| kept.outputs.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kept_outputs_are_bounded_oldest_first() {
        let kept = KeptOutputs::default();
        let big = || {
            vec![Output::stream(
                StreamName::Stdout,
                "x".repeat(KEPT_BYTES / 3),
            )]
        };
        let first = kept.keep(big()).unwrap();
        let second = kept.keep(big()).unwrap();
        let third = kept.keep(big()).unwrap();
        assert!(kept.get(&first).is_none(), "the oldest made room");
        assert!(kept.get(&second).is_some() && kept.get(&third).is_some());
        let huge = vec![Output::stream(
            StreamName::Stdout,
            "x".repeat(KEPT_BYTES + 1),
        )];
        assert!(kept.keep(huge).is_none());
    }
}
