//! CEL validation rules: compiled against a schema (with its cost estimate) and evaluated on
//! an object, as a create and as an update (transition rules).

use ferrometal_crdschema::Schema;
use serde_json::{Value, json};

/// The object every rule runs on, as created and as updated from `old`: the same for every
/// input, so built once.
fn objects() -> &'static (Value, Value) {
    static OBJECTS: std::sync::OnceLock<(Value, Value)> = std::sync::OnceLock::new();
    OBJECTS.get_or_init(|| {
        let object = json!({"spec": {"name": "web", "count": 3, "ratio": 0.5, "on": true,
            "items": ["a", "b"], "labels": {"k": "v"}, "nested": {"deep": [{"v": 1}, {"v": -2}]}}});
        let old = json!({"spec": {"name": "web", "count": 2, "ratio": 1.5, "on": false,
            "items": [], "labels": {}, "nested": {"deep": []}}});
        (object, old)
    })
}

/// One input.
pub fn run(data: &[u8]) {
    let Ok(rule) = std::str::from_utf8(data) else {
        return;
    };
    if rule.len() > 4096 {
        return;
    }
    let schema = json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "maxLength": 64},
                "count": {"type": "integer"},
                "ratio": {"type": "number"},
                "on": {"type": "boolean"},
                "items": {"type": "array", "maxItems": 16, "items": {"type": "string", "maxLength": 32}},
                "labels": {"type": "object", "maxProperties": 8,
                           "additionalProperties": {"type": "string", "maxLength": 32}},
                "nested": {"type": "object", "properties": {"deep": {"type": "array", "maxItems": 4,
                           "items": {"type": "object", "properties": {"v": {"type": "integer"}}}}}}
            },
            "x-kubernetes-validations": [
                {"rule": rule},
                // Fails on both objects, so the input is evaluated as its message too.
                {"rule": "self.count < 0", "messageExpression": rule}
            ]
        }}
    });
    let Ok(schema) = Schema::compile(&schema) else {
        return;
    };
    let (object, old) = objects();
    let _ = schema.validate(object, None);
    let _ = schema.validate(object, Some(old));
}
