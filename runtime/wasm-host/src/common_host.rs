//! What every WIT version's host side shares word for word, written once.

/// The host functions every WIT version has in the same shape (`log`, `config`), implemented
/// once over that version's binding modules, which must be in scope as `log` and `config`.
macro_rules! logging_and_config_host {
    () => {
        impl log::Host for crate::host::GuestState {
            fn log(&mut self, level: log::Level, message: String) {
                let level = match level {
                    log::Level::Trace => tracing::Level::TRACE,
                    log::Level::Debug => tracing::Level::DEBUG,
                    log::Level::Info => tracing::Level::INFO,
                    log::Level::Warn => tracing::Level::WARN,
                    log::Level::Error => tracing::Level::ERROR,
                };
                crate::host::GuestState::log(self, level, &message);
            }
        }

        impl config::Host for crate::host::GuestState {
            fn get_config(&mut self) -> String {
                self.settings.config_json.clone()
            }
        }
    };
}

/// A version's `notebook::Host`: `execute-code`, the same in every version, and then the
/// functions given, which take cells in this version's terms. Expects `notebook`, `HostResult`
/// and `host_error` in scope.
macro_rules! notebook_host {
    ($($functions:tt)*) => {
        impl notebook::Host for crate::host::GuestState {
            fn execute_code(
                &mut self,
                notebook: String,
                code: String,
                timeout_seconds: Option<u32>,
            ) -> HostResult<String> {
                self.notebook()
                    .execute_code(&notebook, code, timeout_seconds)
                    .map_err(host_error)
            }

            $($functions)*
        }
    };
}
