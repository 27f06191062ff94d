//! The daemon's modules (src/gateway/*) import each other without a cycle: a module's job can be read,
//! tested and replaced without the rest of the daemon coming along. The graph is read from the source
//! (`super::x`, `super::super::x` in a directory module, `crate::gateway::x`; test modules left out),
//! so a new cycle fails here with its path printed.
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The source of one top-level module of `gateway`, without its `#[cfg(test)]` parts.
fn without_tests(text: &str) -> String {
    match text.find("#[cfg(test)]") {
        Some(at) => text[..at].to_string(),
        None => text.to_string(),
    }
}

/// The first path segment of each item after `prefix` ("a" for `prefix a::b`, "a", "b" for
/// `prefix {a, b::c}`).
fn targets_after(text: &str, prefix: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(found) = text[from..].find(prefix) {
        let at = from + found;
        from = at + prefix.len();
        let rest = &text[from..];
        // A match inside a longer path (`super::super::x` holds `super::x`) or at the start of
        // one (`super::super::x` is no `super::` path) is not this prefix's.
        if text[..at].ends_with("::") || rest.starts_with(prefix) {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            let end = group.find('}').unwrap_or(group.len());
            for item in group[..end].split(',') {
                out.push(first_segment(item));
            }
        } else {
            out.push(first_segment(rest));
        }
    }
    out.retain(|s| !s.is_empty() && s != "self");
    out
}

fn first_segment(s: &str) -> String {
    s.trim_start()
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect()
}

/// Module name -> the sibling modules it uses.
fn graph(dir: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut sources: BTreeMap<String, Vec<(bool, String)>> = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().into_owned();
        if path.is_dir() {
            for f in std::fs::read_dir(&path).unwrap() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "rs") {
                    // In a directory module, `super::` means the gateway only from its mod.rs.
                    let is_mod = f.file_name().unwrap() == "mod.rs";
                    let text = without_tests(&std::fs::read_to_string(&f).unwrap());
                    sources
                        .entry(name.clone())
                        .or_default()
                        .push((is_mod, text));
                }
            }
        } else if name != "mod" && path.extension().is_some_and(|e| e == "rs") {
            let text = without_tests(&std::fs::read_to_string(&path).unwrap());
            sources.entry(name).or_default().push((true, text));
        }
    }
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    sources
        .iter()
        .map(|(name, files)| {
            let mut uses = BTreeSet::new();
            for (super_is_gateway, text) in files {
                let mut found = targets_after(text, "crate::gateway::");
                found.extend(targets_after(
                    text,
                    if *super_is_gateway {
                        "super::"
                    } else {
                        "super::super::"
                    },
                ));
                uses.extend(
                    found
                        .into_iter()
                        .filter(|t| t != name && modules.contains(t)),
                );
            }
            (name.clone(), uses)
        })
        .collect()
}

/// A cycle (its modules in order, the first again at the end), if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        g: &BTreeMap<String, BTreeSet<String>>,
        node: &str,
        stack: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == node) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        stack.push(node.to_string());
        for next in g.get(node).into_iter().flatten() {
            if let Some(c) = visit(g, next, stack, done) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    g.keys()
        .find_map(|n| visit(g, n, &mut Vec::new(), &mut done))
}

#[test]
fn the_daemons_modules_import_each_other_without_a_cycle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/gateway");
    let g = graph(&dir);
    // The reader must see the graph at all: these edges exist and are not cycles.
    assert!(
        g["control"].contains("state") && g["master"].contains("control"),
        "{g:?}"
    );
    assert!(
        g["worker"].contains("flow") && g["peer"].contains("sys"),
        "{g:?}"
    );
    if let Some(cycle) = find_cycle(&g) {
        panic!(
            "import cycle among the daemon's modules: {}",
            cycle.join(" -> ")
        );
    }
}

#[test]
fn the_reader_finds_a_cycle_when_there_is_one() {
    let g: BTreeMap<String, BTreeSet<String>> = [
        ("a", vec!["b"]),
        ("b", vec!["c"]),
        ("c", vec!["a"]),
        ("d", vec![]),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.into_iter().map(String::from).collect()))
    .collect();
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
    assert_eq!(
        targets_after("use super::{ipc, log::x, self};", "super::"),
        ["ipc", "log"]
    );
    assert_eq!(
        targets_after("use super::super::sys;", "super::"),
        Vec::<String>::new()
    );
}
