//! What the estimate knows of a value: abstract values and how they
//! combine.

use std::rc::Rc;

use cel::common::ast::LiteralValue;

use crate::node::{Node, Type};

/// How deep two derived values are merged before giving up on their shape.
const MAX_JOIN_DEPTH: usize = 8;

/// What the estimate knows of a value: upper bounds of its `size()`, of the
/// work of traversing it whole, and of its magnitude as an integer, and
/// where its children come from.
#[derive(Clone, Debug)]
pub(super) struct Abs<'a> {
    pub len: u64,
    pub weight: u64,
    pub num: u64,
    pub shape: Shape<'a>,
}

#[derive(Clone, Debug)]
pub(super) enum Shape<'a> {
    /// A scalar or a string: no children.
    Leaf,
    /// A value of a schema node.
    Node { node: &'a Node, root: bool },
    /// The root's `metadata`: `name` and `generateName`.
    Meta,
    /// A list or map made by the rule.
    Built {
        elem: Rc<Abs<'a>>,
        key: Rc<Abs<'a>>,
        map: bool,
    },
    /// Anything: its children are anything too.
    Top,
}

impl<'a> Abs<'a> {
    pub(super) fn leaf(len: u64, num: u64) -> Abs<'a> {
        Abs {
            len,
            weight: len.saturating_add(8),
            num,
            shape: Shape::Leaf,
        }
    }

    pub(super) fn bottom() -> Abs<'a> {
        Abs {
            len: 0,
            weight: 0,
            num: 0,
            shape: Shape::Leaf,
        }
    }

    pub(super) fn list(len: u64, weight: u64, elem: Abs<'a>) -> Abs<'a> {
        Abs {
            len,
            weight,
            num: 0,
            shape: Shape::Built {
                elem: Rc::new(elem),
                key: Rc::new(Abs::leaf(0, len)),
                map: false,
            },
        }
    }

    pub(super) fn is_list(&self) -> bool {
        match &self.shape {
            Shape::Node { node, .. } => node.ty == Some(Type::Array) || node.ty.is_none(),
            Shape::Built { map, .. } => !map,
            Shape::Top => true,
            Shape::Leaf | Shape::Meta => false,
        }
    }

    pub(super) fn is_map(&self) -> bool {
        match &self.shape {
            Shape::Node { node, .. } => node.ty == Some(Type::Object),
            Shape::Built { map, .. } => *map,
            Shape::Meta => true,
            Shape::Leaf | Shape::Top => false,
        }
    }
}

pub(super) fn join<'a>(a: &Abs<'a>, b: &Abs<'a>, depth: usize) -> Abs<'a> {
    let shape = match (&a.shape, &b.shape) {
        (Shape::Leaf, s) | (s, Shape::Leaf) => s.clone(),
        (Shape::Node { node: x, root: rx }, Shape::Node { node: y, root: ry })
            if std::ptr::eq(*x, *y) =>
        {
            Shape::Node {
                node: x,
                root: *rx || *ry,
            }
        }
        (Shape::Meta, Shape::Meta) => Shape::Meta,
        (
            Shape::Built {
                elem: e1,
                key: k1,
                map: m1,
            },
            Shape::Built {
                elem: e2,
                key: k2,
                map: m2,
            },
        ) if depth < MAX_JOIN_DEPTH => Shape::Built {
            elem: Rc::new(join(e1, e2, depth + 1)),
            key: Rc::new(join(k1, k2, depth + 1)),
            map: *m1 || *m2,
        },
        _ => Shape::Top,
    };
    Abs {
        len: a.len.max(b.len),
        weight: a.weight.max(b.weight),
        num: a.num.max(b.num),
        shape,
    }
}

/// cel-go's cost of traversing `n` characters.
pub(super) fn tr(n: u64) -> u64 {
    n.div_ceil(10)
}

pub(super) fn log2(n: u64) -> u64 {
    u64::from(64 - n.leading_zeros())
}

pub(super) fn literal<'a>(l: &LiteralValue) -> Abs<'a> {
    match l {
        LiteralValue::String(s) => Abs::leaf(s.inner().len() as u64, 0),
        LiteralValue::Bytes(b) => Abs::leaf(b.inner().len() as u64, 0),
        LiteralValue::Int(i) => Abs::leaf(0, i.inner().unsigned_abs()),
        LiteralValue::UInt(u) => Abs::leaf(0, *u.inner()),
        LiteralValue::Double(_) | LiteralValue::Boolean(_) | LiteralValue::Null => Abs::leaf(0, 0),
    }
}
