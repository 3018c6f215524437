//! Hostile and arbitrary input: deep values and rules, random objects
//! and schemas; nothing may panic or overflow the stack.

use serde_json::{Value, json};

use super::fixtures::{bmh, bmh_schema, host, in_spec, valid_spec};
use crate::schema::Schema;

#[test]
fn deep_values_do_not_overflow() {
    let s = Schema::compile(&json!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
        "x-kubernetes-validations": [{"rule": "size(self) >= 0"}]
    }))
    .unwrap();
    let mut v = json!(1);
    for _ in 0..2000 {
        let mut m = serde_json::Map::new();
        m.insert("a".into(), Value::Array(vec![v]));
        v = Value::Object(m);
    }
    let mut root = serde_json::Map::new();
    root.insert("deep".into(), v);
    let mut obj = Value::Object(root);
    s.default(&mut obj);
    s.prune(&mut obj);
    let _ = s.validate(&obj, Some(&obj));
    // Dropping a 4000-level serde_json value recurses; leak it instead of
    // overflowing the test thread's stack.
    std::mem::forget(obj);
}

/// A small deterministic generator, so the robustness tests need no
/// extra dependency and always see the same inputs.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[(self.next() as usize) % items.len()]
    }

    fn string(&mut self) -> String {
        let alphabet = [
            "a",
            "Z",
            "0",
            "9",
            ":",
            "-",
            ".",
            "/",
            "T",
            "Z",
            "+",
            "é",
            "µ",
            "💥",
            " ",
            "[",
            "'",
            "2024-01-01",
            "T12:00:00",
            "52:54:00",
            "::",
            "=",
        ];
        let len = self.next() % 8;
        (0..len).map(|_| *self.pick(&alphabet)).collect()
    }

    fn value(&mut self, depth: u32) -> Value {
        match self.next() % if depth > 4 { 5 } else { 7 } {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(2)),
            2 => json!(self.next() as i64 - (1 << 30)),
            3 => json!((self.next() as f64) / 7.0),
            4 => json!(self.string()),
            5 => Value::Array(
                (0..self.next() % 4)
                    .map(|_| self.value(depth + 1))
                    .collect(),
            ),
            _ => {
                let keys = [
                    "spec",
                    "status",
                    "online",
                    "bmc",
                    "address",
                    "ports",
                    "name",
                    "mac",
                    "image",
                    "format",
                    "checksum",
                    "tags",
                    "annotations",
                    "consumerRef",
                    "apiVersion",
                    "kind",
                    "metadata",
                    "externallyProvisioned",
                    "power",
                    "bootMACAddress",
                ];
                let mut m = serde_json::Map::new();
                for _ in 0..self.next() % 6 {
                    m.insert(self.pick(&keys).to_string(), self.value(depth + 1));
                }
                Value::Object(m)
            }
        }
    }
}

#[test]
fn formats_never_panic() {
    let mut rng = Lcg(7);
    let formats = [
        "date-time",
        "date",
        "byte",
        "uuid",
        "uuid4",
        "hostname",
        "ipv4",
        "ipv6",
        "cidr",
        "uri",
        "mac",
        "duration",
        "email",
    ];
    for _ in 0..20_000 {
        let s = rng.string();
        for f in formats {
            let _ = crate::formats::check_string(f, &s);
        }
    }
}

#[test]
fn arbitrary_json_never_panics() {
    let s = bmh();
    let mut rng = Lcg(42);
    for _ in 0..3_000 {
        let mut obj = rng.value(0);
        if rng.next().is_multiple_of(2) {
            obj = host(rng.value(1));
        }
        let old = rng.value(0);
        let mut defaulted = obj.clone();
        s.default(&mut defaulted);
        s.prune(&mut defaulted);
        let _ = s.validate(&defaulted, Some(&old));
        let _ = s.validate(&obj, None);
    }
}

#[test]
fn arbitrary_schemas_never_panic() {
    let mut rng = Lcg(3);
    for _ in 0..3_000 {
        let schema = rng.value(0);
        if let Ok(s) = Schema::compile(&schema) {
            let mut v = rng.value(0);
            s.default(&mut v);
            s.prune(&mut v);
            let _ = s.validate(&v, None);
        }
    }
}

fn mutate(v: &mut Value, rng: &mut Lcg) {
    if rng.next().is_multiple_of(12) {
        *v = rng.value(3);
        return;
    }
    match v {
        Value::Object(m) => {
            if rng.next().is_multiple_of(10) && !m.is_empty() {
                let keys: Vec<String> = m.keys().cloned().collect();
                m.remove(rng.pick(&keys));
            }
            for child in m.values_mut() {
                mutate(child, rng);
            }
        }
        Value::Array(items) => {
            for child in items.iter_mut() {
                mutate(child, rng);
            }
        }
        _ => {}
    }
}

#[test]
fn mutated_schemas_never_panic() {
    let mut rng = Lcg(99);
    let mut compiled = 0;
    for _ in 0..400 {
        let mut schema = bmh_schema();
        mutate(&mut schema, &mut rng);
        match Schema::compile(&schema) {
            Ok(s) => {
                compiled += 1;
                let mut v = host(valid_spec());
                mutate(&mut v, &mut rng);
                let old = v.clone();
                s.default(&mut v);
                s.prune(&mut v);
                let _ = s.validate(&v, Some(&old));
            }
            Err(errs) => assert!(!errs.is_empty()),
        }
    }
    assert!(compiled > 0);
}

#[test]
fn deep_rules_are_refused_or_evaluated_without_overflow() {
    // The longest chain accepted still evaluates.
    let chain = vec!["1"; 249].join(" + ");
    let s = Schema::compile(&in_spec(json!({
        "type": "object",
        "x-kubernetes-validations": [{"rule": format!("{chain} == 249")}]
    })))
    .unwrap();
    assert_eq!(s.validate(&json!({"spec": {}}), None), vec![]);

    for (n, ok) in [(90usize, true), (300, false), (20_000, false)] {
        let chain = vec!["1"; n].join(" + ");
        let parens = format!("{}1{} > 0", "(".repeat(n), ")".repeat(n));
        for rule in [format!("{chain} > 0"), parens] {
            let compiled = Schema::compile(&in_spec(json!({
                "type": "object",
                "x-kubernetes-validations": [{"rule": rule}]
            })));
            match compiled {
                Ok(s) => {
                    assert!(ok, "{n}-deep rule should be refused");
                    assert_eq!(s.validate(&json!({"spec": {}}), None), vec![]);
                }
                Err(errs) => {
                    assert!(!ok, "{n}-deep rule should compile: {errs:?}");
                    assert!(
                        errs[0].message.contains("max recursion depth exceeded"),
                        "{}",
                        errs[0].message
                    );
                }
            }
        }
    }
}
