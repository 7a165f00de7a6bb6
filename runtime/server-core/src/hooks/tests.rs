use super::*;

struct Recorder {
    name: String,
    critical: bool,
    fail_on: Option<HookKind>,
    seen: Mutex<Vec<(HookKind, Option<Value>)>>,
}

impl Recorder {
    fn new(name: &str, critical: bool, fail_on: Option<HookKind>) -> Arc<Self> {
        Arc::new(Recorder {
            name: name.into(),
            critical,
            fail_on,
            seen: Mutex::default(),
        })
    }
}

impl HookHandler for Recorder {
    fn name(&self) -> &str {
        &self.name
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
            let before = context.get("mark").cloned();
            context.insert("mark".into(), json!(self.name));
            self.seen.lock().unwrap().push((event.kind(), before));
            if self.fail_on == Some(event.kind()) {
                Err(format!("{} says no", self.name))
            } else {
                Ok(())
            }
        })
    }
}

#[tokio::test]
async fn a_replaced_handler_keeps_its_place_in_the_order() {
    let hooks = Hooks::default();
    let (a, b, c) = (
        Recorder::new("a", false, None),
        Recorder::new("b", false, None),
        Recorder::new("c", false, None),
    );
    hooks.register(a.clone());
    let b_id = hooks.register(b.clone());
    hooks.register(c.clone());
    let b2 = Recorder::new("b2", false, None);
    assert!(hooks.replace(b_id, b2.clone()));
    let order: Vec<String> = hooks
        .snapshot()
        .iter()
        .map(|(_, h)| h.name().to_owned())
        .collect();
    assert_eq!(order, ["a", "b2", "c"]);
    hooks
        .fire(&HookEvent::before_tool_call("t", &json!({})))
        .await
        .unwrap();
    assert!(b.seen.lock().unwrap().is_empty());
    assert_eq!(b2.seen.lock().unwrap().len(), 1);
    assert!(!hooks.replace(99, b2));
}

#[tokio::test]
async fn contexts_pair_up_per_handler_and_order_holds() {
    let hooks = Hooks::default();
    let a = Recorder::new("a", false, None);
    let b = Recorder::new("b", false, None);
    hooks.register(a.clone());
    let b_id = hooks.register(b.clone());
    let event = HookEvent::before_tool_call("t", &json!({}));
    let (pair, outcome) = hooks.before(&event).await;
    assert!(outcome.is_ok());
    hooks
        .after(
            pair,
            &HookEvent::after_tool_call("t", &json!({}), None, None),
        )
        .await
        .unwrap();
    // Each handler saw its own mark in the after event, never the other's.
    assert_eq!(
        a.seen.lock().unwrap()[1],
        (HookKind::AfterToolCall, Some(json!("a")))
    );
    assert_eq!(
        b.seen.lock().unwrap()[1],
        (HookKind::AfterToolCall, Some(json!("b")))
    );
    assert!(hooks.unregister(b_id));
    hooks
        .fire(&HookEvent::kernel_lifecycle("started", "k", "nb"))
        .await
        .unwrap();
    assert_eq!(b.seen.lock().unwrap().len(), 2);
    assert_eq!(a.seen.lock().unwrap().len(), 3);
}

/// A handler guarding executions: asks for the person's yes before any code runs.
struct Guard {
    critical: bool,
}

impl HookHandler for Guard {
    fn name(&self) -> &str {
        "guard"
    }
    fn propagate_errors(&self) -> bool {
        self.critical
    }
    fn on_event<'a>(&'a self, _: &'a HookEvent, _: &'a mut Map<String, Value>) -> HookFuture<'a> {
        Box::pin(async { Ok(()) })
    }
    fn decide<'a>(&'a self, before: Announced<'a>) -> DecisionFuture<'a> {
        Box::pin(async move {
            Ok(match before.event {
                HookEvent::BeforeExecute { .. } => Decision::Confirm("code from a stranger".into()),
                _ => Decision::Proceed,
            })
        })
    }
}

struct Person {
    answer: crate::confirm::Answer,
    asked: Mutex<Vec<String>>,
}

impl crate::confirm::Confirmer for Person {
    fn ask<'a>(&'a self, message: &'a str) -> crate::confirm::AnswerFuture<'a> {
        self.asked.lock().unwrap().push(message.to_owned());
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn a_critical_handler_can_hold_a_call_for_the_persons_yes() {
    use crate::confirm::{Answer, asking};
    let hooks = Hooks::default();
    hooks.register(Arc::new(Guard { critical: true }));
    let run = HookEvent::before_execute("k1", "import os");
    for (answer, allowed) in [
        (Answer::Accepted, true),
        (Answer::Declined, false),
        (Answer::Cancelled, false),
    ] {
        let person = Arc::new(Person {
            answer,
            asked: Mutex::default(),
        });
        let (_, outcome) = asking(person.clone(), hooks.before(&run)).await;
        assert_eq!(outcome.is_ok(), allowed, "{outcome:?}");
        let asked = person.asked.lock().unwrap();
        assert_eq!(asked.len(), 1);
        assert!(
            asked[0].contains("import os") && asked[0].contains("code from a stranger"),
            "{}",
            asked[0]
        );
        if let Err(refusal) = outcome {
            assert!(
                refusal.to_string().contains("Nothing ran in kernel k1"),
                "{refusal}"
            );
        }
    }
    // Nobody to ask: refused, never run unasked.
    let (_, outcome) = hooks.before(&run).await;
    assert!(outcome.unwrap_err().message.contains("elicitation"));
    // Other events are not held.
    let (_, outcome) = hooks
        .before(&HookEvent::before_tool_call("t", &json!({})))
        .await;
    assert!(outcome.is_ok());

    let optional = Hooks::default();
    optional.register(Arc::new(Guard { critical: false }));
    let (_, outcome) = optional.before(&run).await;
    assert!(
        outcome.is_ok(),
        "an optional handler observes, it does not hold calls"
    );
}

#[tokio::test]
async fn critical_errors_propagate_and_optional_ones_do_not() {
    let hooks = Hooks::default();
    hooks.register(Recorder::new("quiet", false, Some(HookKind::BeforeExecute)));
    let (_, ok) = hooks.before(&HookEvent::before_execute("k", "1")).await;
    assert!(ok.is_ok());
    let later = Recorder::new("later", false, None);
    hooks.register(Recorder::new("policy", true, Some(HookKind::BeforeExecute)));
    hooks.register(later.clone());
    let (pair, refused) = hooks.before(&HookEvent::before_execute("k", "1")).await;
    let refused = refused.unwrap_err();
    assert_eq!(
        refused.to_string(),
        "refused by hook handler 'policy': policy says no"
    );
    assert_eq!(
        HookEvent::before_execute("k", "1").to_json(),
        json!({"kernel_id": "k", "code": "1"})
            .as_object()
            .unwrap()
            .clone(),
        "the Python server's keyword arguments"
    );
    assert!(
        later.seen.lock().unwrap().is_empty(),
        "handlers after a refusal do not see the before event"
    );
    hooks
        .after(
            pair,
            &HookEvent::after_execute("k", &[], Some(refused.to_string())),
        )
        .await
        .unwrap();
    assert_eq!(
        later.seen.lock().unwrap().len(),
        1,
        "every handler sees the after event"
    );
}
