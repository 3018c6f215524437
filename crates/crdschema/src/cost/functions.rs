//! What calling each CEL function costs, beyond evaluating its receiver
//! and arguments, and what it returns, as cel-go estimates them.

use std::rc::Rc;

use super::abstract_value::{Abs, Shape, join, log2, tr};
use super::sizes::Sizes;
use crate::regexes::{self, Table};

/// The cost of calling `name` itself, beyond evaluating its receiver
/// and arguments (`p`, receiver first), and what it returns.
pub(super) fn function<'a>(
    sizes: &Sizes,
    regexes: &Table,
    name: &str,
    p: &[Abs<'a>],
    accumulating: bool,
    second_literal: Option<&str>,
) -> (u64, Abs<'a>) {
    let bottom = Abs::bottom();
    let arg = |i: usize| p.get(i).unwrap_or(&bottom);
    let (a, b) = (arg(0), arg(1));
    let leaf = Abs::leaf(0, 0);
    match name {
        "_&&_" | "_||_" => (0, leaf),
        "!_" | "@not_strictly_false" => (1, leaf),
        "_?_:_" => (0, join(b, arg(2), 0)),
        "_==_" | "_!=_" => (1 + tr(a.weight.min(b.weight)), leaf),
        "_<_" | "_<=_" | "_>_" | "_>=_" => (1 + tr(a.len.min(b.len)), leaf),
        "_+_" => {
            let len = a.len.saturating_add(b.len);
            let cost = if accumulating {
                // map() and filter() append in place.
                1 + b.len
            } else if a.is_list() || b.is_list() {
                1u64.saturating_add(len)
            } else {
                1 + tr(len)
            };
            let shape = match (&a.shape, &b.shape) {
                (Shape::Leaf, Shape::Leaf) => Shape::Leaf,
                _ => Shape::Built {
                    elem: Rc::new(join(&sizes.elem(a), &sizes.elem(b), 0)),
                    key: Rc::new(Abs::leaf(0, len)),
                    map: false,
                },
            };
            let value = Abs {
                len,
                weight: a.weight.saturating_add(b.weight),
                num: a.num.saturating_add(b.num),
                shape,
            };
            (cost, value)
        }
        "_-_" => (1, Abs::leaf(0, a.num.saturating_add(b.num))),
        "_*_" => (1, Abs::leaf(0, a.num.saturating_mul(b.num))),
        "_/_" | "_%_" | "-_" => (1, Abs::leaf(0, a.num)),
        "_[_]" | "_[?_]" | "_?._" => {
            let value = match second_literal {
                Some(field) if matches!(a.shape, Shape::Node { .. } | Shape::Meta) => {
                    sizes.select(a, field)
                }
                _ => sizes.elem(a),
            };
            (1, value)
        }
        "@in" => {
            let cost = if b.is_map() {
                1 + tr(a.len)
            } else {
                let each = 1 + tr(a.weight.min(sizes.elem(b).weight));
                1u64.saturating_add(b.len.saturating_mul(each))
            };
            (cost, leaf)
        }
        "size" => (1, Abs::leaf(0, a.len)),
        "contains" => (
            1u64.saturating_add(tr(a.len).saturating_mul(tr(b.len))),
            leaf,
        ),
        "startsWith" | "endsWith" => (1 + tr(b.len), leaf),
        "matches" | "@matches" | "find" | "findAll" => {
            // A literal pattern's size is known; another's is charged
            // by its length here, the rest as it runs.
            let size = match second_literal.and_then(|p| regexes.get(p)) {
                Some(e) => e.states,
                None => b.len,
            };
            let cost = 1u64.saturating_add(regexes::match_cost(a.len, size));
            let value = match name {
                "find" => Abs::leaf(a.len, 0),
                "findAll" => Abs::list(
                    a.len + 1,
                    a.len.saturating_mul(3).saturating_add(4),
                    Abs::leaf(a.len, 0),
                ),
                _ => leaf,
            };
            (cost, value)
        }
        "lowerAscii" | "upperAscii" | "trim" => (1 + tr(a.len), Abs::leaf(a.len, 0)),
        "reverse" if a.is_list() => (1u64.saturating_add(a.len), a.clone()),
        "reverse" => (1 + tr(a.len), Abs::leaf(a.len, 0)),
        "quote" | "strings.quote" => (
            1 + tr(a.len),
            Abs::leaf(a.len.saturating_mul(6).saturating_add(2), 0),
        ),
        "replace" => {
            let len = a.len.saturating_add((a.len + 1).saturating_mul(arg(2).len));
            (1 + tr(a.len.saturating_add(len)), Abs::leaf(len, 0))
        }
        "split" => {
            let n = a.len + 1;
            let value = Abs::list(n, a.len.saturating_add(n.saturating_mul(3)), {
                Abs::leaf(a.len, 0)
            });
            (1 + tr(a.len) + tr(n), value)
        }
        "join" => {
            let len = a
                .len
                .saturating_mul(sizes.elem(a).len.saturating_add(b.len));
            (
                1u64.saturating_add(a.len).saturating_add(tr(len)),
                Abs::leaf(len, 0),
            )
        }
        "substring" => (1 + tr(a.len), Abs::leaf(a.len, 0)),
        "charAt" => (1 + tr(a.len), Abs::leaf(4, 0)),
        "indexOf" | "lastIndexOf" => (
            1u64.saturating_add(tr(a.len).saturating_mul(tr(b.len))),
            Abs::leaf(0, a.len),
        ),
        "format" => {
            // At most 1400 characters per clause (of two characters at
            // least), plus what the arguments print as.
            let len = a
                .len
                .saturating_mul(700)
                .saturating_add(b.weight.saturating_mul(2));
            (
                1u64.saturating_add(b.len).saturating_add(tr(len)),
                Abs::leaf(len, 0),
            )
        }
        "string" | "bytes" => (1 + tr(a.len), Abs::leaf(a.len.max(32), 0)),
        "int" | "uint" => (1 + tr(a.len), Abs::leaf(0, u64::MAX)),
        "double" | "bool" | "duration" | "timestamp" => (1 + tr(a.len), leaf),
        "dyn" => (1, a.clone()),
        "type" | "hasValue" => (1, leaf),
        "isURL" => (1 + tr(a.len), leaf),
        "getFullYear" | "getMonth" | "getDate" | "getDayOfMonth" | "getDayOfWeek"
        | "getDayOfYear" | "getHours" | "getMinutes" | "getSeconds" | "getMilliseconds" => {
            (1, Abs::leaf(0, u64::MAX))
        }
        "isSorted" => {
            let each = 1 + tr(sizes.elem(a).len);
            (1u64.saturating_add(a.len.saturating_mul(each)), leaf)
        }
        "sum" => (
            1u64.saturating_add(a.len),
            Abs::leaf(0, a.len.saturating_mul(sizes.elem(a).num)),
        ),
        "min" | "max" => {
            // `list.min()`, `min(list)`: the list's elements; `min(a, b,
            // ...)`: the arguments.
            let (n, value) = match p {
                [list] => (list.len, sizes.elem(list)),
                _ => (
                    p.len() as u64,
                    p.iter().fold(Abs::bottom(), |v, x| join(&v, x, 0)),
                ),
            };
            let each = 1 + tr(value.len);
            (1u64.saturating_add(n.saturating_mul(each)), value)
        }
        "slice" => (1u64.saturating_add(a.len), a.clone()),
        "flatten" => {
            let mut len = 0u64;
            let mut level = a.clone();
            let mut scale = 1u64;
            let mut elem = Abs::bottom();
            for _ in 0..64 {
                if matches!(level.shape, Shape::Leaf) {
                    break;
                }
                scale = scale.saturating_mul(level.len);
                len = len.saturating_add(scale);
                level = sizes.elem(&level);
                elem = join(&elem, &level, 0);
                if matches!(level.shape, Shape::Top) {
                    break;
                }
            }
            let value = Abs::list(len, len.saturating_mul(elem.weight.max(1)), elem);
            (1u64.saturating_add(len), value)
        }
        "distinct" => {
            let each = 1 + tr(sizes.elem(a).weight);
            let cost = a.len.saturating_mul(a.len).saturating_mul(each);
            (cost.saturating_add(1), a.clone())
        }
        "sort" | "@sortByAssociatedKeys" => {
            let keys = if name == "sort" { a } else { b };
            let each = 1 + tr(sizes.elem(keys).len);
            let cost = a.len.saturating_mul(log2(a.len) + 1).saturating_mul(each);
            (cost.saturating_add(1), a.clone())
        }
        "lists.range" => {
            let len = a.num;
            (
                1u64.saturating_add(len),
                Abs::list(len, len.saturating_mul(9), Abs::leaf(0, len)),
            )
        }
        "optional.of" | "optional.ofNonZeroValue" | "value" => (1, a.clone()),
        "optional.none" => (1, Abs::bottom()),
        "or" | "orValue" => (1, join(a, b, 0)),
        _ => {
            // Nothing else is declared: calls to anything else fail.
            let traversed = p.iter().fold(0u64, |s, x| s.saturating_add(tr(x.weight)));
            (1u64.saturating_add(traversed), sizes.top())
        }
    }
}
