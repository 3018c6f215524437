//! Status helpers: conditions and the minimal merge patch between two statuses.

use ferrometal_api::Condition;
use serde_json::{Map, Value};

/// Sets condition `type_`; `lastTransitionTime` moves only when the status flips.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: &str,
    generation: Option<i64>,
) {
    match conditions.iter_mut().find(|c| c.type_ == type_) {
        Some(c) => {
            if c.status != status {
                c.status = status.into();
                c.last_transition_time = Some(now.into());
            }
            c.reason = reason.into();
            c.message = message.into();
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
            last_transition_time: Some(now.into()),
            observed_generation: generation,
        }),
    }
}

/// A JSON merge patch (RFC 7386) turning `old` into `new`: changed keys only, `null` for
/// removed ones, so fields our types omit when empty are really cleared on the server.
pub fn merge_diff(old: &Value, new: &Value) -> Option<Value> {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = Map::new();
            for (k, nv) in n {
                match o.get(k) {
                    Some(ov) => {
                        if let Some(d) = merge_diff(ov, nv) {
                            out.insert(k.clone(), d);
                        }
                    }
                    None => {
                        out.insert(k.clone(), nv.clone());
                    }
                }
            }
            for k in o.keys() {
                if !n.contains_key(k) {
                    out.insert(k.clone(), Value::Null);
                }
            }
            (!out.is_empty()).then_some(Value::Object(out))
        }
        (o, n) if o == n => None,
        (_, n) => Some(n.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn merge_diff_sets_changes_and_nulls_removals() {
        let old = json!({"a": 1, "b": {"c": 2, "d": 3}, "e": [1], "gone": "x"});
        let new = json!({"a": 1, "b": {"c": 5, "d": 3}, "e": [1, 2], "new": true});
        assert_eq!(
            merge_diff(&old, &new).unwrap(),
            json!({"b": {"c": 5}, "e": [1, 2], "new": true, "gone": null})
        );
        assert_eq!(merge_diff(&new, &new), None);
    }

    #[test]
    fn condition_transition_time_moves_only_on_flip() {
        let mut c = Vec::new();
        set_condition(&mut c, "Ready", "False", "Registering", "", "t1", Some(1));
        set_condition(&mut c, "Ready", "False", "Inspecting", "", "t2", Some(1));
        assert_eq!(c[0].last_transition_time.as_deref(), Some("t1"));
        set_condition(&mut c, "Ready", "True", "Available", "", "t3", Some(1));
        assert_eq!(c[0].last_transition_time.as_deref(), Some("t3"));
        assert_eq!(c[0].status, "True");
    }
}
