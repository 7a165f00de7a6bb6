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

/// A version's `link_common`: links the interfaces that grant nothing (logging, the guest's
/// config, the types, the host's versions where the version has them), for store data
/// implementing their `Host` traits; the grantable units link their own.
macro_rules! link_common {
    ($($interface:ident),+) => {
        pub fn link_common<T>(linker: &mut wasmtime::component::Linker<T>) -> wasmtime::Result<()>
        where
            T: $($interface::Host +)+ 'static,
        {
            use wasmtime::component::HasSelf;
            $($interface::add_to_linker::<T, HasSelf<T>>(linker, |s| s)?;)+
            Ok(())
        }
    };
}

/// The host side of 0.2.0 and every later version: `types`, logging and config, the host's
/// versions, and a `notebook::Host` whose cell reads are the same in each, then the notebook
/// functions given, which take cells in this version's terms. Expects `API_VERSION`, `types`,
/// `host_info`, `log`, `config`, `notebook`, `host_error`, `cell_at` and `to_wit` in scope.
macro_rules! host_since_0_2 {
    ($($functions:tt)*) => {
        type HostResult<R> = Result<R, types::HostError>;

        impl types::Host for crate::host::GuestState {}

        logging_and_config_host!();

        impl host_info::Host for crate::host::GuestState {
            fn api_version(&mut self) -> String {
                API_VERSION.to_owned()
            }

            fn server_version(&mut self) -> String {
                env!("CARGO_PKG_VERSION").to_owned()
            }
        }

        notebook_host! {
            fn read_cells(&mut self, notebook: String) -> HostResult<Vec<types::Cell>> {
                let cells = self.notebook().read_cells(&notebook).map_err(host_error)?;
                Ok(cells
                    .iter()
                    .enumerate()
                    .map(|(index, cell)| to_wit(index, cell))
                    .collect())
            }

            fn read_cell(
                &mut self,
                notebook: String,
                cell: types::CellRef,
            ) -> HostResult<types::Cell> {
                let (index, cell) =
                    self.notebook().read_cell(&notebook, cell_at(cell)).map_err(host_error)?;
                Ok(to_wit(index, &cell))
            }

            $($functions)*
        }
    };
}
