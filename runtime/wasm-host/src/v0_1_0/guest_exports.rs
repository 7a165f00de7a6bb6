//! What a guest built against this version exports, called through host types only (see
//! `crate::api`, which picks the version): everything every version has (`common_exports.rs`),
//! no more.

use super::{EXTENSION_EXPORT, HOOKS_EXPORT, convert, extension_export, hooks_export};

guest_exports! {
    wit: "the WIT",
    lists: {}
    answers: {}
}
