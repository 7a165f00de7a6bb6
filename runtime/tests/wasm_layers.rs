//! The shape of `src/wasm/` and of what `src/tools/` may name, checked on the source text:
//! - no circle of files inside `wasm/` (a file names another through `super::`, `self::`,
//!   `crate::wasm::` or a child module's name; a name a `mod.rs` re-exports counts as the file
//!   it comes from, so a folder's `mod.rs` that only declares and re-exports is no link);
//! - inside `wasm/host/`, a capability's unit names no other unit and not their sum (`state.rs`),
//!   only the `HostUnit` traits (`unit.rs`), so a unit can be copied into a new one;
//! - `wasm/` names neither `crate::dispatch` nor `crate::tools`: guests enter at the domain, and
//!   the layer owning the tool table makes their tools its own;
//! - `tools/` names nothing of `crate::jupyter`: tools present domain operations.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Files of `tools/` allowed to name `crate::jupyter`: none, since the notebook lifecycle moved
/// into the domain. Kept as a list so that a needed exception is written down, with its reason.
const TOOLS_NAMING_JUPYTER: &[&str] = &[];

/// The text without comments, string literals and character literals.
fn code_of(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < chars.len() && !(chars[i] == '*' && chars[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == 'r' && next == Some('#') && chars.get(i + 2) == Some(&'"') {
            i += 3;
            while i + 1 < chars.len() && !(chars[i] == '"' && chars[i + 1] == '#') {
                i += 1;
            }
            i += 2;
            out.push_str("\"\"");
        } else if c == '\'' && next == Some('\\') {
            i += 2;
            while i < chars.len() && chars[i] != '\'' {
                i += 1;
            }
            i += 1;
        } else if c == '\'' && chars.get(i + 2) == Some(&'\'') {
            i += 3;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// Every path the code names (`a::b::c`), `use` groups expanded; each with whether it is a
/// `pub use` (a re-export).
fn paths(code: &str) -> Vec<(Vec<String>, bool)> {
    let chars: Vec<char> = code.chars().collect();
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let starts =
            is_ident(chars[i]) && (i == 0 || !(is_ident(chars[i - 1]) || chars[i - 1] == ':'));
        if !starts {
            i += 1;
            continue;
        }
        let before: String = chars[i.saturating_sub(24)..i].iter().collect();
        let reexport = before.trim_end().ends_with("pub use")
            || before.trim_end().ends_with("pub(crate) use")
            || before.trim_end().ends_with("pub(super) use");
        let mut expanded = Vec::new();
        i = path_at(&chars, i, Vec::new(), &mut expanded);
        // `pub(in crate::wasm)` names a visibility, not a file.
        if !before.trim_end().ends_with("(in") {
            found.extend(expanded.into_iter().map(|p| (p, reexport)));
        }
    }
    found
}

/// Reads one path (with `{...}` groups) from `i`; returns where it ends.
fn path_at(chars: &[char], mut i: usize, prefix: Vec<String>, out: &mut Vec<Vec<String>>) -> usize {
    let mut path = prefix;
    loop {
        let start = i;
        while i < chars.len() && is_ident(chars[i]) {
            i += 1;
        }
        if i > start {
            path.push(chars[start..i].iter().collect());
        }
        if chars.get(i) == Some(&':') && chars.get(i + 1) == Some(&':') {
            i += 2;
            if chars.get(i) == Some(&'{') {
                i += 1;
                loop {
                    while i < chars.len() && chars[i].is_whitespace() {
                        i += 1;
                    }
                    match chars.get(i) {
                        Some('}') => return i + 1,
                        Some(',') => i += 1,
                        Some(c) if is_ident(*c) => i = path_at(chars, i, path.clone(), out),
                        Some('*') => i += 1,
                        _ => return i,
                    }
                }
            }
            if chars.get(i) == Some(&'*') {
                return i + 1;
            }
            continue;
        }
        if path.len() > 1 {
            out.push(path);
        }
        return i;
    }
}

/// The modules of a tree: module path → file.
fn modules(root: &Path) -> BTreeMap<Vec<String>, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("a readable folder") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).unwrap().with_extension("");
                let mut module: Vec<String> = relative
                    .iter()
                    .map(|s| s.to_string_lossy().into_owned())
                    .collect();
                if module.last().is_some_and(|m| m == "mod") {
                    module.pop();
                }
                found.insert(module, path);
            }
        }
    }
    found
}

/// The file-level links inside `root` (a module of the crate named `crate::ROOT`), and every
/// `crate::NAME` each file names.
struct Tree {
    modules: BTreeMap<Vec<String>, PathBuf>,
    /// Per module: what its `use`s bring in, by name (re-exports and private uses alike).
    uses: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
    /// Per module: the paths it names, absolute inside the tree, and whether each re-exports.
    named: BTreeMap<Vec<String>, Vec<(Vec<String>, bool)>>,
    /// Per module: the top-level modules of the crate it names.
    crate_names: BTreeMap<Vec<String>, BTreeSet<String>>,
}

impl Tree {
    fn read(root: &Path, name: &str) -> Tree {
        let modules = modules(root);
        let mut tree = Tree {
            modules: modules.clone(),
            uses: BTreeMap::new(),
            named: BTreeMap::new(),
            crate_names: BTreeMap::new(),
        };
        for (module, file) in &modules {
            let is_folder = file.file_name().is_some_and(|f| f == "mod.rs");
            let code = code_of(&std::fs::read_to_string(file).expect("a source file"));
            let mut named = Vec::new();
            for (path, reexport) in paths(&code) {
                if path[0] == "crate" {
                    tree.crate_names
                        .entry(module.clone())
                        .or_default()
                        .insert(path[1].clone());
                }
                let Some(absolute) = absolute(&path, module, is_folder, name, &modules) else {
                    continue;
                };
                named.push((absolute, reexport));
            }
            // What each `use` brings in, under its last name.
            for (path, _) in &named {
                if let Some(last) = path.last() {
                    tree.uses
                        .entry(module.clone())
                        .or_default()
                        .entry(last.clone())
                        .or_insert_with(|| path.clone());
                }
            }
            tree.named.insert(module.clone(), named);
        }
        tree
    }

    /// The file an absolute path ends in: the deepest module it names, through re-exports.
    fn file_of(&self, path: &[String], depth: usize) -> Vec<String> {
        let mut module = Vec::new();
        for (at, segment) in path.iter().enumerate() {
            let mut deeper = module.clone();
            deeper.push(segment.clone());
            if self.modules.contains_key(&deeper) {
                module = deeper;
                continue;
            }
            // A name the module brings in from elsewhere is that place's.
            if depth < 8
                && let Some(source) = self.uses.get(&module).and_then(|u| u.get(segment))
                && source.as_slice() != &path[..=at]
            {
                return self.file_of(source, depth + 1);
            }
            break;
        }
        module
    }

    /// File → files it names (re-exports of a `mod.rs` are not links of its own).
    fn links(&self) -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
        let mut links = BTreeMap::new();
        for (module, named) in &self.named {
            let edges: &mut BTreeSet<Vec<String>> = links.entry(module.clone()).or_default();
            for (path, reexport) in named {
                if *reexport {
                    continue;
                }
                let target = self.file_of(path, 0);
                // A module naming itself is no link.
                if target != *module {
                    edges.insert(target);
                }
            }
        }
        links
    }
}

/// A path as it is absolute inside the tree, when it points inside it.
fn absolute(
    path: &[String],
    module: &[String],
    is_folder: bool,
    name: &str,
    modules: &BTreeMap<Vec<String>, PathBuf>,
) -> Option<Vec<String>> {
    let (mut base, rest): (Vec<String>, &[String]) = match path[0].as_str() {
        "crate" if path.get(1).map(String::as_str) == Some(name) => (Vec::new(), &path[2..]),
        "super" => {
            // The module `super` is taken from: a file's own module (its inline `mod tests`
            // names the file as `super`, which is the same file).
            let mut base = module.to_vec();
            let mut rest = path;
            let mut first = !is_folder;
            while rest.first().map(String::as_str) == Some("super") {
                if first {
                    first = false;
                    base.pop();
                } else {
                    base.pop();
                }
                rest = &rest[1..];
            }
            (base, rest)
        }
        "self" => (module.to_vec(), &path[1..]),
        child => {
            let mut deeper = module.to_vec();
            deeper.push(child.to_owned());
            if !is_folder || !modules.contains_key(&deeper) {
                return None;
            }
            (module.to_vec(), path)
        }
    };
    base.extend(rest.iter().cloned());
    Some(base)
}

fn shown(module: &[String]) -> String {
    if module.is_empty() {
        "mod.rs".into()
    } else {
        module.join("/")
    }
}

/// Circles of files, each as the path that closes it.
fn circles(links: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>) -> Vec<String> {
    fn from(
        start: &Vec<String>,
        links: &BTreeMap<Vec<String>, BTreeSet<Vec<String>>>,
        path: &mut Vec<Vec<String>>,
    ) -> Option<Vec<Vec<String>>> {
        let here = path.last().unwrap().clone();
        for next in links.get(&here).into_iter().flatten() {
            if next == start {
                let mut circle = path.clone();
                circle.push(start.clone());
                return Some(circle);
            }
            if next > start && !path.contains(next) {
                path.push(next.clone());
                if let Some(circle) = from(start, links, path) {
                    return Some(circle);
                }
                path.pop();
            }
        }
        None
    }
    links
        .keys()
        .filter_map(|start| from(start, links, &mut vec![start.clone()]))
        .map(|circle| {
            circle
                .iter()
                .map(|m| shown(m))
                .collect::<Vec<_>>()
                .join(" → ")
        })
        .collect()
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn the_files_of_wasm_name_each_other_in_one_direction_only() {
    let tree = Tree::read(&src().join("wasm"), "wasm");
    let links = tree.links();
    assert!(
        links
            .get(&vec!["tool".to_owned()])
            .is_some_and(|l| l.contains(&vec!["slot".to_owned()])),
        "the check sees tool.rs naming slot.rs: {links:#?}"
    );
    let found = circles(&links);
    assert!(
        found.is_empty(),
        "circles of files inside src/wasm/ (move the piece both sides need into a file of its \
         own, or make the lower file not name the higher one): {found:#?}"
    );
}

#[test]
fn the_host_units_name_neither_each_other_nor_their_sum() {
    let tree = Tree::read(&src().join("wasm"), "wasm");
    let links = tree.links();
    let host = |file: &str| vec!["host".to_owned(), file.to_owned()];
    assert!(
        links
            .get(&host("state"))
            .is_some_and(|l| l.contains(&host("storage"))),
        "the check sees host/state.rs naming host/storage.rs: {links:#?}"
    );
    let shared = [host("unit")];
    let units: Vec<&Vec<String>> = tree
        .modules
        .keys()
        .filter(|m| m.len() == 2 && m[0] == "host" && m[1] != "state" && m[1] != "unit")
        .collect();
    assert!(units.len() >= 4, "the units of src/wasm/host/: {units:?}");
    let crossing: Vec<String> = units
        .iter()
        .flat_map(|unit| {
            links
                .get(*unit)
                .into_iter()
                .flatten()
                .filter(|to| to.first().map(String::as_str) == Some("host") && !shared.contains(to))
                .map(move |to| format!("{} → {}", shown(unit), shown(to)))
        })
        .collect();
    assert!(
        crossing.is_empty(),
        "a unit of src/wasm/host/ names another unit or state.rs (put what both need in unit.rs, \
         or reach the store through a `Holds` bound): {crossing:?}"
    );
}

#[test]
fn wasm_names_neither_dispatch_nor_tools() {
    let tree = Tree::read(&src().join("wasm"), "wasm");
    let offenders: Vec<String> = tree
        .crate_names
        .iter()
        .filter(|(_, names)| names.contains("dispatch") || names.contains("tools"))
        .map(|(module, _)| shown(module))
        .collect();
    assert!(
        offenders.is_empty(),
        "src/wasm/ must not name crate::dispatch or crate::tools (guests enter at the domain; \
         give the layer owning the tool table a trait in host types to implement): {offenders:?}"
    );
}

#[test]
fn tools_name_nothing_of_jupyter_beyond_the_shrinking_allowance() {
    let root = src().join("tools");
    let tree = Tree::read(&root, "tools");
    let naming: BTreeSet<String> = tree
        .crate_names
        .iter()
        .filter(|(_, names)| names.contains("jupyter"))
        .map(|(module, _)| {
            let file = &tree.modules[module];
            file.strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let allowed: BTreeSet<String> = TOOLS_NAMING_JUPYTER.iter().map(|s| s.to_string()).collect();
    let new: Vec<&String> = naming.difference(&allowed).collect();
    assert!(
        new.is_empty(),
        "files of src/tools/ that name crate::jupyter (call a domain operation instead): {new:?}"
    );
}

#[test]
fn the_checks_see_paths_groups_and_circles() {
    let code = code_of(
        "use super::{a::B, c}; // super::ignored\nlet s = \"crate::x::y\"; crate::wasm::d::e();",
    );
    let found: Vec<String> = paths(&code)
        .into_iter()
        .map(|(p, _)| p.join("::"))
        .collect();
    assert_eq!(found, ["super::a::B", "super::c", "crate::wasm::d::e"]);
    let key = |s: &str| vec![s.to_owned()];
    let links: BTreeMap<Vec<String>, BTreeSet<Vec<String>>> = [
        (key("a"), BTreeSet::from([key("b")])),
        (key("b"), BTreeSet::from([key("c")])),
        (key("c"), BTreeSet::from([key("a")])),
        (key("d"), BTreeSet::new()),
    ]
    .into_iter()
    .collect();
    assert_eq!(circles(&links), ["a → b → c → a"]);
}
