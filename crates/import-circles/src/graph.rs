//! From the paths each module uses to the modules they lead to, and from those edges to the
//! circles: at each module, its own file and its child modules are the nodes, and an edge from
//! anywhere under one of them to anywhere under another is an edge between the two.

use std::collections::{BTreeMap, BTreeSet};

use crate::tree::{ModPath, Tree};

/// Resolution follows imports at most this deep; deeper chains are cut short (their owner
/// module is taken as the target).
const MAX_HOPS: usize = 16;

/// One node of a module's level: its own file (`None`) or one of its children.
pub type Node = Option<String>;

/// Why one node depends on another: a module that uses a path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Evidence {
    pub from: ModPath,
    pub path: String,
}

#[derive(Debug, PartialEq, Eq)]
pub struct Circle {
    /// The module whose children (and own file) form the circle.
    pub within: ModPath,
    pub nodes: Vec<Node>,
    /// One example use per edge of the circle.
    pub edges: Vec<(Node, Node, Evidence)>,
}

impl Tree {
    /// The module that defines what `segments` names, seen from module `from`; `None` for
    /// paths that leave the crate (other crates, `std`, `Self`, locals).
    pub fn resolve(&self, from: &[String], segments: &[String]) -> Option<ModPath> {
        self.resolve_hops(from, segments, 0)
    }

    fn resolve_hops(&self, from: &[String], segments: &[String], hops: usize) -> Option<ModPath> {
        let mut current: ModPath = from.to_vec();
        let mut rest = segments;
        match rest.first().map(String::as_str) {
            Some("crate") => {
                current.clear();
                rest = &rest[1..];
            }
            Some("self") => rest = &rest[1..],
            Some("super") => {
                while rest.first().is_some_and(|s| s == "super") {
                    current.pop()?;
                    rest = &rest[1..];
                }
            }
            Some(first) => {
                let module = self.modules.get(&current)?;
                if !module.children.contains(first) && !module.imports.contains_key(first) {
                    return None;
                }
            }
            None => return None,
        }
        while let Some((segment, tail)) = rest.split_first() {
            let module = self.modules.get(&current)?;
            if module.children.contains(segment) {
                current.push(segment.clone());
                rest = tail;
                continue;
            }
            if module.items.contains(segment) {
                return Some(current);
            }
            if hops >= MAX_HOPS {
                return Some(current);
            }
            if let Some(target) = module.imports.get(segment) {
                let mut path = target.clone();
                path.extend_from_slice(tail);
                return self.resolve_hops(&current, &path, hops + 1);
            }
            for glob in &module.globs {
                let mut path = glob.clone();
                path.extend_from_slice(rest);
                if let Some(found) = self.resolve_hops(&current, &path, hops + 1)
                    && self.defines(&found, segment)
                {
                    return Some(found);
                }
            }
            return Some(current);
        }
        Some(current)
    }

    fn defines(&self, module: &ModPath, name: &str) -> bool {
        self.modules.get(module).is_some_and(|m| {
            m.items.contains(name) || m.children.contains(name) || m.imports.contains_key(name)
        })
    }

    /// Every circle in the tree, outermost level first.
    pub fn circles(&self) -> Vec<Circle> {
        // level -> (from node, to node) -> first evidence
        let mut levels: BTreeMap<ModPath, BTreeMap<(Node, Node), Evidence>> = BTreeMap::new();
        for (from, module) in &self.modules {
            for used in &module.uses {
                let Some(to) = self.resolve(from, used) else {
                    continue;
                };
                if &to == from {
                    continue;
                }
                let shared = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
                let level: ModPath = from[..shared].to_vec();
                let a = from.get(shared).cloned();
                let b = to.get(shared).cloned();
                if a == b {
                    continue;
                }
                levels
                    .entry(level)
                    .or_default()
                    .entry((a, b))
                    .or_insert_with(|| Evidence {
                        from: from.clone(),
                        path: used.join("::"),
                    });
            }
        }
        let mut circles = Vec::new();
        for (within, edges) in levels {
            for component in strongly_connected(&edges) {
                let inside: BTreeSet<&Node> = component.iter().collect();
                let evidence = edges
                    .iter()
                    .filter(|((a, b), _)| inside.contains(a) && inside.contains(b))
                    .map(|((a, b), e)| (a.clone(), b.clone(), e.clone()))
                    .collect();
                circles.push(Circle {
                    within: within.clone(),
                    nodes: component,
                    edges: evidence,
                });
            }
        }
        circles
    }
}

/// Tarjan's algorithm; only components of two or more nodes are returned, each sorted.
fn strongly_connected(edges: &BTreeMap<(Node, Node), Evidence>) -> Vec<Vec<Node>> {
    let mut graph: BTreeMap<&Node, Vec<&Node>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        graph.entry(a).or_default().push(b);
        graph.entry(b).or_default();
    }
    struct State<'a> {
        index: BTreeMap<&'a Node, usize>,
        low: BTreeMap<&'a Node, usize>,
        stack: Vec<&'a Node>,
        on_stack: BTreeSet<&'a Node>,
        next: usize,
        out: Vec<Vec<Node>>,
    }
    fn visit<'a>(node: &'a Node, graph: &BTreeMap<&'a Node, Vec<&'a Node>>, s: &mut State<'a>) {
        s.index.insert(node, s.next);
        s.low.insert(node, s.next);
        s.next += 1;
        s.stack.push(node);
        s.on_stack.insert(node);
        for &next in &graph[node] {
            if !s.index.contains_key(next) {
                visit(next, graph, s);
                let low = s.low[node].min(s.low[next]);
                s.low.insert(node, low);
            } else if s.on_stack.contains(next) {
                let low = s.low[node].min(s.index[next]);
                s.low.insert(node, low);
            }
        }
        if s.low[node] == s.index[node] {
            let mut component = Vec::new();
            while let Some(top) = s.stack.pop() {
                s.on_stack.remove(top);
                component.push(top.clone());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut state = State {
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        next: 0,
        out: Vec::new(),
    };
    for node in graph.keys() {
        if !state.index.contains_key(node) {
            visit(node, &graph, &mut state);
        }
    }
    state.out
}
