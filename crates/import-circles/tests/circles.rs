//! The checker on small crates written to a temporary directory: each case is a set of files
//! and the circles expected, as `within: node, node` lines.

use std::path::Path;

use ferrometal_import_circles::{Node, check_crate};

fn circles_of(files: &[(&str, &str)]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let path = dir.path().join("src").join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let mut out = Vec::new();
    for report in check_crate(dir.path()).unwrap() {
        for circle in report.circles {
            let nodes: Vec<String> = circle
                .nodes
                .iter()
                .map(|n: &Node| n.clone().unwrap_or("self".into()))
                .collect();
            out.push(format!(
                "{}: {}",
                circle.within.join("::"),
                nodes.join(", ")
            ));
        }
    }
    out
}

#[test]
fn two_siblings_that_import_each_other_are_a_circle() {
    let found = circles_of(&[
        ("lib.rs", "mod a; mod b;"),
        ("a.rs", "use crate::b::B; pub struct A;"),
        ("b.rs", "pub struct B; fn f() -> crate::a::A { todo!() }"),
    ]);
    assert_eq!(found, [": a, b"]);
}

#[test]
fn a_chain_of_three_through_super_and_reexports_is_one_circle() {
    let found = circles_of(&[
        ("lib.rs", "mod steps;"),
        ("steps/mod.rs", "mod a; mod b; mod c; pub use c::C;"),
        ("steps/a.rs", "use super::b::B; pub struct A;"),
        ("steps/b.rs", "pub struct B; fn f(_: super::C) {}"),
        ("steps/c.rs", "pub struct C; fn g(_: crate::steps::a::A) {}"),
    ]);
    assert_eq!(found, ["steps: a, b, c"]);
}

#[test]
fn a_parent_that_uses_a_child_using_the_parents_items_is_a_circle() {
    let found = circles_of(&[
        ("lib.rs", "mod host;"),
        (
            "host/mod.rs",
            "mod reconcile; pub struct Timing; fn run() { reconcile::go() }",
        ),
        ("host/reconcile.rs", "use super::Timing; pub fn go() {}"),
    ]);
    assert_eq!(found, ["host: self, reconcile"]);
}

#[test]
fn downward_imports_reexports_tests_and_other_crates_are_not_circles() {
    let found = circles_of(&[
        (
            "lib.rs",
            "mod node; mod steps; pub use steps::run; use std::fmt; use serde::Serialize;",
        ),
        (
            "node.rs",
            "pub struct Node; #[cfg(test)] mod tests { use crate::steps::run; }",
        ),
        (
            "steps/mod.rs",
            "mod one; mod two; pub use one::run; pub use two::Two;",
        ),
        (
            "steps/one.rs",
            "use crate::node::Node; use super::Two; pub fn run(_: Node, _: Two) {}",
        ),
        (
            "steps/two.rs",
            "pub struct Two; #[cfg(test)] fn t() { super::one::run; }",
        ),
    ]);
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn an_import_through_a_glob_and_a_renamed_use_still_counts() {
    let found = circles_of(&[
        (
            "lib.rs",
            "mod a; mod b; mod shared { pub use crate::b::*; }",
        ),
        (
            "a.rs",
            "use crate::shared::*; pub struct A; fn f(_: crate::shared::B) {}",
        ),
        (
            "b.rs",
            "use crate::a as other; pub struct B; fn g(_: other::A) {}",
        ),
    ]);
    assert_eq!(found, [": a, b"]);
}

#[test]
fn the_workspace_has_no_circles() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs: Vec<_> = std::fs::read_dir(root.join("crates"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .chain([root.join("bench")])
        .collect();
    dirs.sort();
    let mut found = Vec::new();
    for dir in dirs {
        for report in check_crate(&dir).unwrap() {
            assert!(report.modules > 0, "{}", report.root.display());
            for circle in report.circles {
                found.push(format!("{}: {circle}", report.root.display()));
            }
        }
    }
    assert!(found.is_empty(), "{}", found.join(""));
}
