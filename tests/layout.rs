//! The shape of the code, checked: no two modules of a crate refer to each other (an import
//! circle: each then needs the other to be read first), and no function of the operator's tool
//! (its code or its tests) is longer than a reader holds in view (150 lines). Read from the
//! sources (circles: comments and tests left out); no server.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// The module path of `file` under the crate's `src` (`a/b.rs` and `a/b/mod.rs`: `a::b`).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        parts.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        parts.pop();
    }
    parts
}

/// The code of a file before its tests, each line without its `//` comment.
fn code_of(file: &Path) -> String {
    let text = std::fs::read_to_string(file).unwrap();
    let before_tests = text.split("#[cfg(test)]").next().unwrap_or_default();
    before_tests
        .lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The paths of a `use` tree (`a::{b, c::{d}}` gives `a::b`, `a::c::d`).
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        return vec![tree.to_string()];
    };
    let (prefix, rest) = tree.split_at(open);
    let inner = &rest[1..rest.rfind('}').unwrap_or(rest.len())];
    let (mut parts, mut depth, mut current) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    parts.push(current);
    parts
        .iter()
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| expand(p).into_iter().map(|e| format!("{prefix}{e}")))
        .collect()
}

/// The `crate::`, `super::` and `self::` paths a module's code names: its `use` trees and the
/// paths written inline.
fn paths_named(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for stmt in code.split(';') {
        let stmt = stmt.trim();
        let stmt = stmt
            .strip_prefix("pub(crate) ")
            .or_else(|| stmt.strip_prefix("pub(super) "))
            .or_else(|| stmt.strip_prefix("pub "))
            .unwrap_or(stmt);
        if let Some(tree) = stmt.strip_prefix("use ") {
            paths.extend(expand(&tree.replace('\n', " ")));
        }
    }
    let bytes = code.as_bytes();
    for start in ["crate::", "super::", "self::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start) {
            let at = from + at;
            from = at + start.len();
            let word_before =
                at > 0 && (bytes[at - 1].is_ascii_alphanumeric() || bytes[at - 1] == b'_');
            if word_before {
                continue;
            }
            let end = code[at..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(code.len(), |e| at + e);
            paths.push(code[at..end].to_string());
        }
    }
    paths
}

/// The modules `module`'s code refers to, neither its ancestors nor its descendants.
fn refers_to(
    module: &[String],
    code: &str,
    modules: &BTreeSet<Vec<String>>,
) -> BTreeSet<Vec<String>> {
    let mut out = BTreeSet::new();
    for path in paths_named(code) {
        let words: Vec<String> = path
            .split("::")
            .map(|w| w.split(" as ").next().unwrap_or(w).trim().to_string())
            .filter(|w| !w.is_empty())
            .collect();
        let (mut base, rest): (Vec<String>, &[String]) = match words.first().map(String::as_str) {
            Some("crate") => (Vec::new(), &words[1..]),
            Some("self") => (module.to_vec(), &words[1..]),
            Some("super") => (
                module[..module.len().saturating_sub(1)].to_vec(),
                &words[1..],
            ),
            _ => continue,
        };
        let mut rest = rest;
        while rest.first().is_some_and(|w| w == "super") {
            base.pop();
            rest = &rest[1..];
        }
        let target = (0..=rest.len()).rev().find_map(|k| {
            let mut candidate = base.clone();
            candidate.extend_from_slice(&rest[..k]);
            modules.contains(&candidate).then_some(candidate)
        });
        if let Some(target) = target {
            let related = module.starts_with(&target) || target.starts_with(module);
            if !related {
                out.insert(target);
            }
        }
    }
    out
}

#[test]
fn no_two_modules_of_a_crate_refer_to_each_other() {
    let mut circles = Vec::new();
    for src in ["src", "engine/src", "tool/src", "harness/src", "bench/src"] {
        let src = root().join(src);
        let files: BTreeMap<Vec<String>, PathBuf> = rust_files(&src)
            .into_iter()
            .map(|f| (module_of(&src, &f), f))
            .collect();
        let modules: BTreeSet<Vec<String>> = files.keys().cloned().collect();
        let edges: BTreeMap<&Vec<String>, BTreeSet<Vec<String>>> = files
            .iter()
            .map(|(m, f)| (m, refers_to(m, &code_of(f), &modules)))
            .collect();
        for (a, targets) in &edges {
            for b in targets {
                if *a < b && edges.get(b).is_some_and(|t| t.contains(*a)) {
                    circles.push(format!(
                        "{}: {} <-> {}",
                        src.display(),
                        a.join("::"),
                        b.join("::")
                    ));
                }
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_rooms_of_the_tool_stand_apart() {
    // The tool's top-level modules (its rooms: cli, cluster, predict, plan, apply, members,
    // reply, client, output) must not refer to each other either: a room that needs another
    // which needs it back is one room.
    let src = root().join("tool/src");
    let files: BTreeMap<Vec<String>, PathBuf> = rust_files(&src)
        .into_iter()
        .map(|f| (module_of(&src, &f), f))
        .collect();
    let modules: BTreeSet<Vec<String>> = files.keys().cloned().collect();
    let mut rooms: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, f) in &files {
        let Some(room) = m.first() else { continue };
        for target in refers_to(m, &code_of(f), &modules) {
            if let Some(other) = target.first().filter(|o| *o != room) {
                rooms.entry(room.clone()).or_default().insert(other.clone());
            }
        }
    }
    let mut circles = Vec::new();
    for (a, targets) in &rooms {
        for b in targets {
            if a < b && rooms.get(b).is_some_and(|t| t.contains(a)) {
                circles.push(format!("{a} <-> {b}"));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "rooms of the tool that need each other: {circles:?}"
    );
}

#[test]
fn the_circle_finder_sees_a_circle() {
    // Two modules that name each other, the one in a use tree, the other inline.
    let modules: BTreeSet<Vec<String>> = [vec![], vec!["a".to_string()], vec!["b".to_string()]]
        .into_iter()
        .collect();
    let a = refers_to(&["a".into()], "use super::{b::Thing, x};", &modules);
    let b = refers_to(
        &["b".into()],
        "fn f() -> crate::a::Other { todo!() }",
        &modules,
    );
    assert!(a.contains(&vec!["b".to_string()]) && b.contains(&vec!["a".to_string()]));
    assert_eq!(
        expand("a::{b, c::{d, e}}"),
        vec!["a::b", "a::c::d", "a::c::e"]
    );
}

/// Each function of `code` that is longer than `limit` lines: its name and length.
fn long_functions(code: &str, limit: usize) -> Vec<(String, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let after = ["pub(crate) fn ", "pub(super) fn ", "pub fn ", "fn "]
            .iter()
            .find_map(|p| trimmed.strip_prefix(p));
        let Some(after) = after else { continue };
        let name: String = after
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let (mut depth, mut opened) = (0i32, false);
        for (j, l) in lines.iter().enumerate().skip(i) {
            // String literals with braces are rare in this code; quotes are stripped roughly.
            let plain: String = l.split('"').step_by(2).collect();
            for c in plain.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        opened = true;
                    }
                    '}' => depth -= 1,
                    _ => {}
                }
            }
            if !opened && plain.trim_end().ends_with(';') {
                break;
            }
            if opened && depth == 0 {
                if j - i + 1 > limit {
                    out.push((name.clone(), j - i + 1));
                }
                break;
            }
        }
    }
    out
}

#[test]
fn no_function_of_the_tool_is_longer_than_150_lines() {
    // Its code and its tests alike: a test is read by whoever changes what it checks.
    let mut long = Vec::new();
    let files = [
        rust_files(&root().join("tool/src")),
        rust_files(&root().join("tool/tests")),
    ];
    for file in files.concat() {
        let text = std::fs::read_to_string(&file).unwrap();
        for (name, lines) in long_functions(&text, 150) {
            long.push(format!("{} {name}: {lines} lines", file.display()));
        }
    }
    assert!(long.is_empty(), "{}", long.join("\n"));
    let sample = format!("fn f() {{\n{}}}\n", "    let x = 1;\n".repeat(200));
    assert_eq!(long_functions(&sample, 150), vec![("f".to_string(), 202)]);
}
