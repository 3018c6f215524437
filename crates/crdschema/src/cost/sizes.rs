//! Where the estimate takes the sizes of values from: the schema's bounds
//! or an object's actual values.

use super::abstract_value::{Abs, Shape, join};
use super::bounds::{MAX_NAME_LEN, MAX_TYPE_META_LEN, REQ, static_len, static_num};
use super::stats::{Stats, node_key};
use crate::node::{Additional, Node, Type};

/// Where the estimate takes sizes from.
pub(crate) enum Sizes<'a> {
    /// The schema's bounds, when a CRD is written.
    Static,
    /// An object's actual values, when it is validated.
    Runtime(&'a Stats),
}

impl Sizes<'_> {
    pub(super) fn top<'a>(&self) -> Abs<'a> {
        match self {
            Sizes::Static => Abs {
                len: REQ,
                weight: REQ,
                num: u64::MAX,
                shape: Shape::Top,
            },
            Sizes::Runtime(st) => Abs {
                len: st.top.len,
                weight: st.top.weight,
                num: st.top.num,
                shape: Shape::Top,
            },
        }
    }

    pub(super) fn node<'a>(&self, n: &'a Node, root: bool) -> Abs<'a> {
        let shape = Shape::Node { node: n, root };
        match self {
            Sizes::Static => {
                let len = static_len(n);
                Abs {
                    len,
                    // cel-go charges comparisons by size, not by depth.
                    weight: len.max(1),
                    num: static_num(n),
                    shape,
                }
            }
            Sizes::Runtime(st) if st.mismatch => self.top(),
            Sizes::Runtime(st) => {
                let s = st.nodes.get(&node_key(n)).copied().unwrap_or_default();
                Abs {
                    len: s.len,
                    weight: s.weight,
                    num: s.num,
                    shape,
                }
            }
        }
    }

    fn meta_string<'a>(&self) -> Abs<'a> {
        match self {
            Sizes::Static => Abs::leaf(MAX_NAME_LEN, 0),
            Sizes::Runtime(st) => Abs::leaf(st.meta_len, 0),
        }
    }

    fn type_meta_string<'a>(&self) -> Abs<'a> {
        match self {
            Sizes::Static => Abs::leaf(MAX_TYPE_META_LEN, 0),
            Sizes::Runtime(st) => Abs::leaf(st.type_meta_len, 0),
        }
    }

    fn key_len(&self, n: &Node) -> u64 {
        match self {
            Sizes::Runtime(st) => st.nodes.get(&node_key(n)).map(|s| s.key_len).unwrap_or(0),
            Sizes::Static => {
                let open = n.preserve_unknown
                    || matches!(
                        n.additional,
                        Additional::Schema(_) | Additional::Allowed(true)
                    );
                if open {
                    REQ - 2
                } else {
                    n.properties
                        .keys()
                        .map(|k| k.len() as u64)
                        .max()
                        .unwrap_or(0)
                }
            }
        }
    }

    /// `a.field`.
    pub(super) fn select<'a>(&self, a: &Abs<'a>, field: &str) -> Abs<'a> {
        match &a.shape {
            Shape::Node { node, root } => {
                if *root && field == "metadata" {
                    // CEL sees only name and generateName of it.
                    return Abs {
                        len: 2,
                        weight: self.meta_string().len.saturating_mul(2).saturating_add(30),
                        num: 0,
                        shape: Shape::Meta,
                    };
                }
                if let Some(p) = node.properties.get(field) {
                    return self.node(p, false);
                }
                if (*root || node.embedded) && matches!(field, "apiVersion" | "kind" | "metadata") {
                    return if *root {
                        self.type_meta_string()
                    } else {
                        self.top()
                    };
                }
                match &node.additional {
                    Additional::Schema(s) => self.node(s, false),
                    Additional::Allowed(true) => self.top(),
                    _ if node.preserve_unknown || node.ty.is_none() => self.top(),
                    _ => Abs::bottom(),
                }
            }
            Shape::Meta => match field {
                "name" | "generateName" => self.meta_string(),
                _ => Abs::bottom(),
            },
            Shape::Built { elem, .. } => (**elem).clone(),
            Shape::Top => self.top(),
            Shape::Leaf => Abs::bottom(),
        }
    }

    /// The elements of a list, or the values of a map.
    pub(super) fn elem<'a>(&self, a: &Abs<'a>) -> Abs<'a> {
        match &a.shape {
            Shape::Node { node, .. } => {
                if let Some(items) = &node.items {
                    self.node(items, false)
                } else if let Additional::Schema(s) = &node.additional {
                    self.node(s, false)
                } else if matches!(
                    node.ty,
                    Some(Type::String | Type::Integer | Type::Number | Type::Boolean)
                ) && !node.int_or_string
                {
                    Abs::bottom()
                } else {
                    // An object's properties, or anything.
                    self.top()
                }
            }
            Shape::Meta => self.meta_string(),
            Shape::Built { elem, .. } => (**elem).clone(),
            Shape::Top => self.top(),
            Shape::Leaf => Abs::bottom(),
        }
    }

    /// The keys of a map (or the indices of a list).
    pub(super) fn key<'a>(&self, a: &Abs<'a>) -> Abs<'a> {
        match &a.shape {
            Shape::Node { node, .. } => match node.ty {
                Some(Type::Object) => Abs::leaf(self.key_len(node), 0),
                Some(Type::Array) => Abs::leaf(0, a.len),
                None => join(&Abs::leaf(self.key_len(node), a.len), &self.top(), 0),
                _ => Abs::bottom(),
            },
            Shape::Meta => Abs::leaf(12, 0),
            Shape::Built { key, .. } => (**key).clone(),
            Shape::Top => self.top(),
            Shape::Leaf => Abs::bottom(),
        }
    }

    /// What a one-variable comprehension binds: list elements, map keys.
    pub(super) fn iterated<'a>(&self, range: &Abs<'a>) -> Abs<'a> {
        match &range.shape {
            Shape::Node { node, .. } if node.ty == Some(Type::Array) => self.elem(range),
            Shape::Node { node, .. } if node.ty == Some(Type::Object) => self.key(range),
            Shape::Built { map: false, .. } => self.elem(range),
            Shape::Built { map: true, .. } | Shape::Meta => self.key(range),
            _ => join(&self.elem(range), &self.key(range), 0),
        }
    }
}
