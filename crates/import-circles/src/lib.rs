//! Finds module import circles inside a crate. Two modules that import each other (directly or
//! through others) cannot be understood, tested or moved one at a time; the test command runs
//! this over every crate of the workspace and fails on the first circle.
//!
//! Measured from `use` declarations and paths in code that lead to the crate's own modules
//! (`crate::`, `super::`, `self::`, child modules and imported names), following re-exports to
//! the module that defines the item. Code under `#[cfg(test)]` is left out. At each module, its
//! own file and its children are compared: a parent that uses a child which uses the parent's
//! own items is a circle too; a parent that only declares and re-exports its children is not.

mod graph;
mod tree;

use std::fmt;
use std::path::{Path, PathBuf};

pub use graph::{Circle, Evidence, Node};
pub use tree::{LoadError, ModPath, Module, Tree};

/// The circles of one crate target (its library, binary or one of `src/bin/*.rs`).
pub struct Report {
    pub root: PathBuf,
    pub modules: usize,
    pub circles: Vec<Circle>,
}

/// Checks every target root of the crate in `dir` (`src/lib.rs`, `src/main.rs`, `src/bin/*.rs`).
pub fn check_crate(dir: &Path) -> Result<Vec<Report>, LoadError> {
    let src = dir.join("src");
    let mut roots: Vec<PathBuf> = ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.exists())
        .collect();
    if let Ok(entries) = std::fs::read_dir(src.join("bin")) {
        let mut bins: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "rs"))
            .collect();
        bins.sort();
        roots.extend(bins);
    }
    roots
        .into_iter()
        .map(|root| {
            let tree = Tree::load(&root)?;
            Ok(Report {
                modules: tree.modules.len(),
                circles: tree.circles(),
                root,
            })
        })
        .collect()
}

fn module_name(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_string()
    } else {
        format!("crate::{}", path.join("::"))
    }
}

fn node_name(within: &[String], node: &Node) -> String {
    match node {
        Some(child) => child.clone(),
        None if within.is_empty() => "(the crate root's own file)".to_string(),
        None => format!(
            "({}'s own file)",
            within.last().map(String::as_str).unwrap_or("")
        ),
    }
}

impl fmt::Display for Circle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<String> = self
            .nodes
            .iter()
            .map(|n| node_name(&self.within, n))
            .collect();
        writeln!(
            f,
            "circle in {}: {}",
            module_name(&self.within),
            names.join(", ")
        )?;
        for (a, b, evidence) in &self.edges {
            writeln!(
                f,
                "  {} -> {}: {} uses {}",
                node_name(&self.within, a),
                node_name(&self.within, b),
                module_name(&evidence.from),
                evidence.path
            )?;
        }
        Ok(())
    }
}
