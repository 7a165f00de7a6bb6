//! The operator's secrets for guests (WIT 0.3.0's `secrets`), by name.
//!
//! - **Slice** ([`SecretsState`]): the guest's settings only; a value read is remembered in the
//!   settings' `revealed`, so the guest's log lines and errors are redacted from then on.
//! - **Policy check** ([`SecretsState::get`]): `secret:NAME` must be granted for that name; the
//!   store is the `SecretSource` connected to the `HostLink` (the server's secret store), read
//!   off the guest's CPU clock.
//! - **Linker registration** ([`link`]): the `secrets` interface of WIT 0.3.0.
//! - **Spans**: one `extension.secret` use per read: the name, allowed, found; never the value.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use opentelemetry::KeyValue;
use wasmtime::component::{HasSelf, Linker};
use wasmtime_wasi::WasiCtxBuilder;

use super::unit::{HostCallError, HostResult, HostUnit};
use crate::asking::{self, NotAsked};
use crate::policy::Snapshot;
use crate::policy::grants::Wanted;
use crate::settings::GuestSettings;
use crate::v0_3_0;
use server_core::hooks::{CallScope, GuestUse};

/// The secrets' slice of a guest's store.
pub struct SecretsState {
    settings: Arc<GuestSettings>,
}

impl HostUnit for SecretsState {
    fn new(settings: &Arc<GuestSettings>, _: &Snapshot, _: &mut WasiCtxBuilder) -> Self {
        SecretsState {
            settings: settings.clone(),
        }
    }
}

/// The `secrets` interface of WIT 0.3.0, for store data implementing it.
pub fn link<T>(linker: &mut Linker<T>) -> wasmtime::Result<()>
where
    T: v0_3_0::secrets::Host + 'static,
{
    v0_3_0::secrets::add_to_linker::<T, HasSelf<T>>(linker, |s| s)
}

impl SecretsState {
    /// The secret `name`'s value, when granted (or granted when asked, before `deadline`) and
    /// stored.
    pub fn get(&mut self, name: &str, deadline: Instant) -> HostResult<String> {
        let settings = self.settings.clone();
        let started = SystemTime::now();
        let policy = settings.policy.get();
        let permitted = asking::permit(&settings, &policy, deadline, Wanted::Secret(name));
        let granted = permitted.is_ok();
        let outcome = if let Err(why) = permitted {
            Err(refuse(&settings, name, &why))
        } else {
            match settings.link.secrets() {
                None => Err(HostCallError::NotAvailable(
                    "this server has no secret store connected, so no secret can be read; the \
                     operator stores secrets with `jupyter-mcp-server secret set NAME`"
                        .to_owned(),
                )),
                Some(source) => match source.get(name) {
                    Ok(Some(value)) => {
                        settings.revealed.add(&value);
                        Ok(value)
                    }
                    Ok(None) => Err(HostCallError::NotFound(format!(
                        "the operator has no secret named '{name}'; they can add it with \
                         `jupyter-mcp-server secret set {name}`"
                    ))),
                    Err(why) => Err(HostCallError::Failed(format!(
                        "the secret store could not be read ({why}); tell the operator"
                    ))),
                },
            }
        };
        let mut attributes = vec![
            KeyValue::new("extension.name", settings.name().to_owned()),
            KeyValue::new("secret.name", name.to_owned()),
            KeyValue::new("allowed", granted),
            KeyValue::new("secret.found", outcome.is_ok()),
        ];
        if let Err(e) = &outcome {
            attributes.push(KeyValue::new("error", true));
            attributes.push(KeyValue::new("error.message", format!("{e:?}")));
        }
        GuestUse::ended("extension.secret", started, attributes)
            .record(CallScope::current().as_ref());
        outcome
    }
}

/// The refusal, with a line in the operator's log saying how to grant it.
fn refuse(settings: &GuestSettings, name: &str, why: &NotAsked) -> HostCallError {
    tracing::warn!(
        guest = settings.name(),
        "refused reading secret '{name}': not granted{note}. To allow it, add \"secret:{name}\" \
         to grants of this guest's [[extension]] entry in the config file{hint}",
        note = why.note(),
        hint = why.hint()
    );
    HostCallError::NotGranted(format!(
        "secret '{name}' is not granted to '{}'; the operator can add \"secret:{name}\" to this \
         guest's grants{}",
        settings.name(),
        why.note()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::settings::SecretSource;

    struct Store;

    impl SecretSource for Store {
        fn get(&self, name: &str) -> Result<Option<String>, String> {
            Ok((name == "API_KEY").then(|| "tok-1234567".to_owned()))
        }
    }

    fn far() -> Instant {
        Instant::now() + std::time::Duration::from_secs(5)
    }

    fn state(grants: &[&str], store: bool) -> SecretsState {
        let settings = Arc::new(GuestSettings::for_tests_with("g", grants));
        if store {
            settings.link.provide_secrets(Arc::new(Store));
        }
        SecretsState::new(
            &settings,
            &settings.policy.snapshot(),
            &mut WasiCtxBuilder::new(),
        )
    }

    #[test]
    fn a_secret_needs_its_grant_and_its_value_is_redacted_afterwards() {
        match state(&["secret:OTHER"], true).get("API_KEY", far()) {
            Err(HostCallError::NotGranted(m)) => {
                assert!(m.contains("\"secret:API_KEY\""), "{m}")
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            state(&["secret:API_KEY"], false).get("API_KEY", far()),
            Err(HostCallError::NotAvailable(_))
        ));
        let mut granted = state(&["secret:API_KEY", "secret:NONE"], true);
        assert!(matches!(
            granted.get("NONE", far()),
            Err(HostCallError::NotFound(_))
        ));
        assert_eq!(granted.get("API_KEY", far()).unwrap(), "tok-1234567");
        assert_eq!(
            granted.settings.revealed.redact("key=tok-1234567"),
            "key=[redacted]"
        );
    }
}
