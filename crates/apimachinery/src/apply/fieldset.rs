//! Sets of field paths in FieldsV1 shape, the unit of ownership in managedFields, and
//! how conflict messages print a path.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

/// A set of field paths in FieldsV1 shape: children are keyed by their
/// FieldsV1 path element ("f:name", `k:{"uid":"1"}`, `v:"x"`, "i:0") and
/// `member` says the path itself (FieldsV1 ".") is in the set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct FieldSet {
    pub(super) member: bool,
    pub(super) children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    pub(super) fn leaf() -> Self {
        Self {
            member: true,
            children: BTreeMap::new(),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    pub(super) fn prune(&mut self) {
        for c in self.children.values_mut() {
            c.prune();
        }
        self.children.retain(|_, c| !c.is_empty());
    }

    pub(super) fn from_fields_v1(v: &Value) -> Self {
        let mut s = Self::default();
        if let Value::Object(m) = v {
            for (k, child) in m {
                if k == "." {
                    s.member = true;
                } else {
                    let c = Self::from_fields_v1(child);
                    // In FieldsV1 a childless entry is itself a member.
                    let c = if c.children.is_empty() {
                        Self::leaf()
                    } else {
                        c
                    };
                    s.children.insert(k.clone(), c);
                }
            }
        }
        s
    }

    /// Encodes the children (the root is never a member in FieldsV1).
    pub(super) fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        for (k, c) in &self.children {
            m.insert(k.clone(), c.node_to_fields_v1());
        }
        Value::Object(m)
    }

    fn node_to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        if self.member && !self.children.is_empty() {
            m.insert(".".into(), json!({}));
        }
        for (k, c) in &self.children {
            m.insert(k.clone(), c.node_to_fields_v1());
        }
        Value::Object(m)
    }

    pub(super) fn union(&self, o: &Self) -> Self {
        let mut out = self.clone();
        out.member |= o.member;
        for (k, c) in &o.children {
            let merged = match out.children.get(k) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(k.clone(), merged);
        }
        out
    }

    pub(super) fn difference(&self, o: &Self) -> Self {
        let mut out = Self {
            member: self.member && !o.member,
            children: BTreeMap::new(),
        };
        for (k, c) in &self.children {
            let d = match o.children.get(k) {
                Some(oc) => c.difference(oc),
                None => c.clone(),
            };
            if !d.is_empty() {
                out.children.insert(k.clone(), d);
            }
        }
        out
    }

    pub(super) fn intersection(&self, o: &Self) -> Self {
        let mut out = Self {
            member: self.member && o.member,
            children: BTreeMap::new(),
        };
        for (k, c) in &self.children {
            if let Some(oc) = o.children.get(k) {
                let i = c.intersection(oc);
                if !i.is_empty() {
                    out.children.insert(k.clone(), i);
                }
            }
        }
        out
    }

    /// Member paths, each as FieldsV1 path elements.
    pub(super) fn members(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
        if self.member && !prefix.is_empty() {
            out.push(prefix.clone());
        }
        for (k, c) in &self.children {
            prefix.push(k.clone());
            c.members(prefix, out);
            prefix.pop();
        }
    }
}

/// Renders FieldsV1 path elements the way conflict messages show them,
/// e.g. `.spec.containers[name="a"].image`.
pub(super) fn path_string(path: &[String]) -> String {
    let mut s = String::new();
    for pe in path {
        if let Some(f) = pe.strip_prefix("f:") {
            s.push('.');
            s.push_str(f);
        } else if let Some(k) = pe.strip_prefix("k:") {
            let parts: Vec<String> = match serde_json::from_str::<Value>(k) {
                Ok(Value::Object(m)) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                _ => vec![k.to_string()],
            };
            s.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = pe.strip_prefix("v:") {
            s.push_str(&format!("[={v}]"));
        } else if let Some(i) = pe.strip_prefix("i:") {
            s.push_str(&format!("[{i}]"));
        } else {
            s.push_str(pe);
        }
    }
    s
}
