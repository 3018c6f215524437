//! `$setElementOrder/<field>`: a list reordered as the patch lists it.

use serde_json::Value;

use super::strategy::merge_key_fields;

/// Orders `list` as `$setElementOrder` asks: listed elements in that order,
/// server-only elements kept where they were relative to the listed ones
/// (the interleaving rule of strategicpatch's mergeSortedSlice).
pub(super) fn apply_element_order(
    list: Vec<Value>,
    order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let keys = key.map(merge_key_fields);
    let ident = |v: &Value| -> Value {
        match &keys {
            Some(ks) => Value::Array(
                ks.iter()
                    .map(|k| v.get(*k).cloned().unwrap_or(Value::Null))
                    .collect(),
            ),
            None => v.clone(),
        }
    };
    let order_ids: Vec<Value> = order.iter().map(ident).collect();
    let server_ids: Vec<Value> = list.iter().map(ident).collect();
    let mut left: Vec<(Value, usize)> = Vec::new();
    let mut right: Vec<(Value, usize)> = Vec::new();
    for (i, item) in list.into_iter().enumerate() {
        if order_ids.contains(&server_ids[i]) {
            left.push((item, i));
        } else {
            right.push((item, i));
        }
    }
    left.sort_by_key(|(item, _)| {
        let id = ident(item);
        order_ids
            .iter()
            .position(|o| *o == id)
            .unwrap_or(usize::MAX)
    });
    // As in mergeSortedSlice: server-only elements go first only when they
    // preceded the listed element in the server's list.
    let (left, right) = (right, left);
    let mut out = Vec::with_capacity(left.len() + right.len());
    let (mut li, mut ri) = (left.into_iter().peekable(), right.into_iter().peekable());
    loop {
        match (li.peek(), ri.peek()) {
            (Some((_, l)), Some((_, r))) => {
                if l < r {
                    out.extend(li.next().map(|x| x.0));
                } else {
                    out.extend(ri.next().map(|x| x.0));
                }
            }
            (Some(_), None) => out.extend(li.next().map(|x| x.0)),
            (None, Some(_)) => out.extend(ri.next().map(|x| x.0)),
            (None, None) => break,
        }
    }
    out
}
