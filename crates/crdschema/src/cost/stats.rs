//! The sizes an object's values actually have, gathered once per
//! validation for the estimates made before each rule runs.

use std::collections::HashMap;

use serde_json::Value;

use crate::node::Node;
use crate::value::type_matches;

/// How deep values are looked at for their sizes: twice the depth rules are
/// run at, as a rule deep in the object sees values deeper still.
const MAX_VALUE_DEPTH: usize = 512;

#[derive(Debug, Default, Clone, Copy)]
pub(super) struct NodeStats {
    pub len: u64,
    pub weight: u64,
    pub num: u64,
    pub key_len: u64,
}

impl NodeStats {
    fn merge(&mut self, other: NodeStats) {
        self.len = self.len.max(other.len);
        self.weight = self.weight.max(other.weight);
        self.num = self.num.max(other.num);
        self.key_len = self.key_len.max(other.key_len);
    }
}

/// The largest sizes an object (and its old version) holds at each node of
/// the schema, gathered once per validation.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub(super) nodes: HashMap<usize, NodeStats>,
    /// Over every value CEL can see, wherever it is.
    pub(super) top: NodeStats,
    /// The longest root `metadata.name`/`generateName`.
    pub(super) meta_len: u64,
    /// The longest root `apiVersion`/`kind`.
    pub(super) type_meta_len: u64,
    /// Some value does not have its node's type: the schema says nothing
    /// reliable about its children, so every node is sized as `top`.
    pub(super) mismatch: bool,
}

pub(super) fn node_key(n: &Node) -> usize {
    n as *const Node as usize
}

impl Stats {
    pub(crate) fn collect(root: &Node, values: &[&Value]) -> Stats {
        let mut stats = Stats::default();
        for v in values {
            stats.visit(Some(root), v, 0, true);
        }
        stats
    }

    /// Records `v` and its children; returns `v`'s weight, roughly its
    /// serialized size.
    fn visit(&mut self, n: Option<&Node>, v: &Value, depth: usize, root: bool) -> u64 {
        if depth > MAX_VALUE_DEPTH {
            return 4;
        }
        let mut s = NodeStats::default();
        match v {
            Value::Null => s.weight = 4,
            Value::Bool(_) => s.weight = 5,
            Value::Number(x) => {
                s.weight = 8;
                s.num = x
                    .as_i64()
                    .map(i64::unsigned_abs)
                    .or_else(|| x.as_u64())
                    .unwrap_or(0);
            }
            Value::String(x) => {
                s.len = x.len() as u64;
                s.weight = s.len + 2;
            }
            Value::Array(items) => {
                let item = n.and_then(|n| n.items.as_deref());
                s.len = items.len() as u64;
                s.weight = 2;
                for i in items {
                    let w = self.visit(item, i, depth + 1, false);
                    s.weight = s.weight.saturating_add(w + 1);
                }
            }
            Value::Object(obj) => {
                s.len = obj.len() as u64;
                s.weight = 2;
                for (k, val) in obj {
                    s.key_len = s.key_len.max(k.len() as u64);
                    let w = if root && k == "metadata" {
                        // CEL sees only name and generateName of it.
                        let mut w = 2;
                        for f in ["name", "generateName"] {
                            if let Some(Value::String(x)) = val.get(f) {
                                self.meta_len = self.meta_len.max(x.len() as u64);
                                w += x.len() as u64 + f.len() as u64 + 6;
                            }
                        }
                        w
                    } else {
                        if root
                            && (k == "apiVersion" || k == "kind")
                            && let Value::String(x) = val
                        {
                            self.type_meta_len = self.type_meta_len.max(x.len() as u64);
                        }
                        let child = n.and_then(|n| n.child(k));
                        self.visit(child, val, depth + 1, false)
                    };
                    s.weight = s.weight.saturating_add(k.len() as u64 + 3 + w);
                }
            }
        }
        self.top.merge(s);
        if let Some(n) = n {
            if !v.is_null() && !type_matches(n, v) {
                self.mismatch = true;
            }
            self.nodes.entry(node_key(n)).or_default().merge(s);
        }
        s.weight
    }
}
