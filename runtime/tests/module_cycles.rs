//! Data flows one way between the top-level modules of `src/` (transport → mcp → dispatch →
//! tools → domain → jupyter, with config, capabilities and hooks as shared services). A module
//! that reaches back up creates an import cycle; this test finds any and names it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every `crate::NAME` a file mentions.
fn crate_references(text: &str) -> BTreeSet<String> {
    text.match_indices("crate::")
        .map(|(at, prefix)| {
            text[at + prefix.len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|name| !name.is_empty())
        .collect()
}

fn collect(dir: &Path, top: Option<&str>, graph: &mut BTreeMap<String, BTreeSet<String>>) {
    for entry in std::fs::read_dir(dir).expect("src is readable") {
        let path = entry.expect("a directory entry").path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        let module = top.map_or(name.clone(), str::to_owned);
        if path.is_dir() {
            collect(&path, Some(&module), graph);
        } else if path.extension().is_some_and(|e| e == "rs")
            && !matches!(module.as_str(), "lib" | "main")
        {
            let text = std::fs::read_to_string(&path).expect("a source file");
            let edges = graph.entry(module.clone()).or_default();
            edges.extend(crate_references(&text).into_iter().filter(|m| *m != module));
        }
    }
}

/// A cycle through `start`, as the path of modules that closes it.
fn cycle_from(
    start: &str,
    graph: &BTreeMap<String, BTreeSet<String>>,
    path: &mut Vec<String>,
) -> Option<Vec<String>> {
    let here = path.last().expect("the path starts at start").clone();
    for next in graph.get(&here).into_iter().flatten() {
        if next == start {
            let mut cycle = path.clone();
            cycle.push(start.to_owned());
            return Some(cycle);
        }
        if !path.contains(next) {
            path.push(next.clone());
            if let Some(cycle) = cycle_from(start, graph, path) {
                return Some(cycle);
            }
            path.pop();
        }
    }
    None
}

fn cycles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    graph
        .keys()
        .filter_map(|start| cycle_from(start, graph, &mut vec![start.clone()]))
        .map(|cycle| cycle.join(" → "))
        .collect()
}

#[test]
fn top_level_modules_import_each_other_in_one_direction_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph = BTreeMap::new();
    collect(&src, None, &mut graph);
    assert!(graph.contains_key("domain") && graph["tools"].contains("domain"));
    let found = cycles(&graph);
    assert!(
        found.is_empty(),
        "import cycles between top-level modules of src/ (make the lower module not name the \
         higher one, e.g. by moving the shared piece down): {found:#?}"
    );
}

#[test]
fn the_check_finds_a_cycle() {
    let graph: BTreeMap<String, BTreeSet<String>> = [
        ("a", &["b"][..]),
        ("b", &["c"][..]),
        ("c", &["a"][..]),
        ("d", &[][..]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    assert_eq!(cycles(&graph)[0], "a → b → c → a");
    assert_eq!(
        crate_references("use crate::tools::X; crate::domain::f(); crate_x"),
        BTreeSet::from(["domain".to_owned(), "tools".to_owned()])
    );
}
