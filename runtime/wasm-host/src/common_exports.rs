//! A guest's exports called with host types, the same in every WIT version: written once as a
//! macro each version's `guest_exports.rs` invokes, so that `hooks_export`, `extension_export`
//! and `convert` name that version's bindings and conversions.

/// Defines `Indices` (a `VersionIndices`) and `Exports` (a `GuestApi`) for the version in
/// scope, whose module provides `HOOKS_EXPORT`, `EXTENSION_EXPORT`, `hooks_export`,
/// `extension_export` and a `convert` with `hook_event`, `hook_reply` (its `on-event` answer as a
/// `HookReply`), `guest_error` (a guest's error in the caller's words), `capability_declaration`,
/// `tool_declaration` and `tool_answer`.
///
/// `wit` names the WIT in the error of an export that does not match it. `lists` and `answers`
/// are the `GuestApi` methods the version adds to those every version has: a list an
/// `extension-api` function returns, each item converted (`method: export_fn => convert_fn ->
/// Item;`), and an answer to a call with string arguments (`method(args): export_fn =>
/// convert_fn -> Answer;`), its error converted by `guest_error`.
macro_rules! guest_exports {
    (
        wit: $wit:literal,
        lists: { $($list:ident: $list_call:ident => $list_item:ident -> $item:ty;)* }
        answers: {
            $($answer:ident($($arg:ident),*): $answer_call:ident => $convert:ident -> $ty:ty;)*
        }
    ) => {
        /// Where this version's exports are in a component, found once per guest.
        pub struct Indices {
            hooks: Option<hooks_export::GuestIndices>,
            extension: Option<extension_export::GuestIndices>,
        }

        impl Indices {
            /// `None` when the component exports neither interface of this version.
            pub fn of(
                pre: &wasmtime::component::InstancePre<crate::host::GuestState>,
                exports: &[String],
            ) -> Result<Option<Box<dyn crate::api::VersionIndices>>, String> {
                let has = |name: &str| exports.iter().any(|e| e == name);
                if !has(HOOKS_EXPORT) && !has(EXTENSION_EXPORT) {
                    return Ok(None);
                }
                let mismatch = |what: &str, e: wasmtime::Error| {
                    format!("its {what} export does not match {}: {e}", $wit)
                };
                Ok(Some(Box::new(Indices {
                    hooks: has(HOOKS_EXPORT)
                        .then(|| hooks_export::GuestIndices::new(pre))
                        .transpose()
                        .map_err(|e| mismatch("hooks", e))?,
                    extension: has(EXTENSION_EXPORT)
                        .then(|| extension_export::GuestIndices::new(pre))
                        .transpose()
                        .map_err(|e| mismatch("extension-api", e))?,
                })))
            }
        }

        impl crate::api::VersionIndices for Indices {
            fn handles_hooks(&self) -> bool {
                self.hooks.is_some()
            }

            fn is_extension(&self) -> bool {
                self.extension.is_some()
            }

            fn load(
                &self,
                store: &mut wasmtime::Store<crate::host::GuestState>,
                instance: &wasmtime::component::Instance,
            ) -> wasmtime::Result<crate::api::Exports> {
                let hooks = self.hooks.as_ref().map(|i| i.load(&mut *store, instance));
                let hooks = hooks.transpose()?;
                let extension = self.extension.as_ref().map(|i| i.load(&mut *store, instance));
                let extension = extension.transpose()?;
                Ok(Box::new(Exports { hooks, extension }))
            }
        }

        /// One instance's exports.
        pub struct Exports {
            hooks: Option<hooks_export::Guest>,
            extension: Option<extension_export::Guest>,
        }

        impl Exports {
            fn hooks(&self) -> wasmtime::Result<&hooks_export::Guest> {
                self.hooks
                    .as_ref()
                    .ok_or_else(|| wasmtime::format_err!("the guest does not export hooks"))
            }

            fn extension(&self) -> wasmtime::Result<&extension_export::Guest> {
                self.extension
                    .as_ref()
                    .ok_or_else(|| wasmtime::format_err!("the guest does not export extension-api"))
            }
        }

        impl crate::api::GuestApi for Exports {
            fn propagate_errors(
                &self,
                store: &mut wasmtime::Store<crate::host::GuestState>,
            ) -> wasmtime::Result<bool> {
                self.hooks()?.call_propagate_errors(store)
            }

            fn on_event(
                &self,
                store: &mut wasmtime::Store<crate::host::GuestState>,
                event: &server_core::hooks::HookEvent,
                context: &str,
            ) -> wasmtime::Result<Result<crate::answers::HookReply, String>> {
                let event = convert::hook_event(event);
                let answer = self.hooks()?.call_on_event(store, &event, context)?;
                Ok(answer.map(convert::hook_reply).map_err(convert::guest_error))
            }

            fn identity(
                &self,
                store: &mut wasmtime::Store<crate::host::GuestState>,
            ) -> wasmtime::Result<String> {
                Ok(self.extension()?.call_identity(store)?.name)
            }

            guest_exports!(@lists
                capabilities: call_capabilities => capability_declaration
                    -> crate::distribution::manifest::CapabilityDeclaration;
                tools: call_tools => tool_declaration -> crate::distribution::manifest::ToolDeclaration;
                $($list: $list_call => $list_item -> $item;)*
            );

            guest_exports!(@answers
                call_tool(name, arguments): call_call_tool => tool_answer
                    -> crate::answers::ToolAnswer;
                $($answer($($arg),*): $answer_call => $convert -> $ty;)*
            );
        }
    };

    (@lists $($list:ident: $call:ident => $convert:ident -> $item:ty;)*) => {$(
        fn $list(
            &self,
            store: &mut wasmtime::Store<crate::host::GuestState>,
        ) -> wasmtime::Result<Vec<$item>> {
            let list = self.extension()?.$call(store)?;
            Ok(list.into_iter().map(convert::$convert).collect())
        }
    )*};

    (@answers $($answer:ident($($arg:ident),*): $call:ident => $convert:ident -> $ty:ty;)*) => {$(
        fn $answer(
            &self,
            store: &mut wasmtime::Store<crate::host::GuestState>,
            $($arg: &str),*
        ) -> wasmtime::Result<Result<$ty, String>> {
            let answer = self.extension()?.$call(store, $($arg),*)?;
            Ok(answer.map(convert::$convert).map_err(convert::guest_error))
        }
    )*};
}

/// The exports of a version with resources, resource templates and prompts (0.2.0 and later):
/// everything every version has, and those.
macro_rules! served_guest_exports {
    ($wit:literal) => {
        guest_exports! {
            wit: $wit,
            lists: {
                resources: call_resources => resource_declaration -> ResourceDeclaration;
                resource_templates: call_resource_templates => template_declaration -> TemplateDeclaration;
                prompts: call_prompts => prompt_declaration -> PromptDeclaration;
            }
            answers: {
                read_resource(uri): call_read_resource => resource_answers -> Vec<ResourceAnswer>;
                get_prompt(name, arguments): call_get_prompt => prompt_answer -> PromptAnswer;
            }
        }
    };
}
