//! Feeds pseudo-random JSON through every entry point: none may panic.

use ferrometal_apimachinery::{apply, openapi, patch, selector, table};
use serde_json::{Map, Value, json};

/// A small deterministic generator so failures reproduce.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[(self.next() as usize) % xs.len()]
    }
}

const KEYS: &[&str] = &[
    "metadata",
    "labels",
    "managedFields",
    "ownerReferences",
    "finalizers",
    "uid",
    "name",
    "spec",
    "status",
    "$patch",
    "$retainKeys",
    "$setElementOrder/finalizers",
    "$deleteFromPrimitiveList/finalizers",
    "fieldsV1",
    "f:spec",
    "k:{\"uid\":\"1\"}",
    ".",
    "operation",
    "manager",
    "op",
    "path",
    "value",
    "creationTimestamp",
    "type",
];

const STRINGS: &[&str] = &[
    "",
    "1",
    "delete",
    "replace",
    "merge",
    "Apply",
    "Update",
    "add",
    "/spec",
    "2024-01-01T00:00:00Z",
    "x",
];

fn gen_value(r: &mut Lcg, depth: u32) -> Value {
    let choice = if depth == 0 {
        r.next() % 4
    } else {
        r.next() % 7
    };
    match choice {
        0 => Value::Null,
        1 => json!(r.next().is_multiple_of(3)),
        2 => json!((r.next() % 5) as i64 - 2),
        3 => json!(r.pick(STRINGS)),
        4 | 5 => {
            let n = r.next() % 4;
            let mut m = Map::new();
            for _ in 0..n {
                let k = r.pick(KEYS).to_string();
                m.insert(k, gen_value(r, depth - 1));
            }
            Value::Object(m)
        }
        _ => {
            let n = r.next() % 4;
            Value::Array((0..n).map(|_| gen_value(r, depth - 1)).collect())
        }
    }
}

#[test]
fn random_inputs_never_panic() {
    let mut r = Lcg(42);
    let opts = apply::ApplyOptions {
        manager: "m",
        force: false,
        now: "2024-01-01T00:00:00Z",
        api_version: "v1",
        subresource: None,
    };
    let columns = table::columns_for_builtin("Event");
    for i in 0..1500u32 {
        let a = gen_value(&mut r, 4);
        let b = gen_value(&mut r, 4);

        let mut t = a.clone();
        patch::merge_patch(&mut t, &b);
        let mut t = a.clone();
        let _ = patch::json_patch(&mut t, &b);
        let mut t = a.clone();
        let _ = patch::strategic_merge_patch(&mut t, &b, &|p| {
            patch::builtin_list_strategy("Namespace", p)
        });

        let _ = apply::apply(Some(&a), &b, &opts);
        let _ = apply::apply(
            None,
            &b,
            &apply::ApplyOptions {
                force: true,
                ..opts
            },
        );
        let mut n = b.clone();
        apply::record_update(Some(&a), &mut n, "u", "T", "v1", Some("status"));
        let _ = apply::apply_with(Some(&n), &a, &opts, &|p| apply::schema_list_strategy(&b, p));

        let _ = selector::LabelSelector::from_label_selector_json(&a);
        let _ = selector::FieldSelector::parse("spec.name=x").map(|s| s.matches(&a));
        let _ = table::to_table(
            &[a.clone(), b.clone()],
            &columns,
            table::IncludeObject::Metadata,
            std::time::SystemTime::UNIX_EPOCH,
            b.clone(),
        );
        let _ = table::columns_for_crd(&a);
        let _ = table::jsonpath_get(&a, ".metadata.labels[?(@.uid==\"1\")].name");
        if !i.is_multiple_of(25) {
            continue;
        }
        let _ = openapi::v3_document(
            "x.io",
            "v1",
            &[openapi::ResourceSchema {
                group: "x.io".into(),
                version: "v1".into(),
                kind: "K".into(),
                namespaced: true,
                schema: a,
            }],
        );
    }
}

#[test]
fn random_selector_strings_never_panic() {
    let mut r = Lcg(7);
    let pieces = [
        "a", "=", "==", "!=", "!", ",", "(", ")", " in ", " notin ", "b", ">", "<", "1", "\\", " ",
        "x/y", "é", "-",
    ];
    for _ in 0..5000 {
        let n = r.next() % 8;
        let s: String = (0..n).map(|_| r.pick(&pieces)).collect();
        let _ = selector::LabelSelector::parse(&s);
        let _ = selector::FieldSelector::parse(&s);
        let _ = table::jsonpath_get(&json!({"a": [1]}), &s);
    }
}
