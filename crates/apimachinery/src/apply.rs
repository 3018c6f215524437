//! Server-side apply with managedFields in FieldsV1 format.
//!
//! Mirrors structured-merge-diff as used by kube-apiserver: an apply merges
//! the applied configuration into the live object, prunes fields the manager
//! applied last time but no longer applies (unless someone else owns them),
//! and reports conflicts when a field owned by another manager would change
//! value. Non-apply writes are recorded as `Update` entries owning the fields
//! they added or changed. Without a schema, lists are atomic unless the list
//! strategy callback (see [`apply_with`]) says otherwise; `metadata`'s
//! ownerReferences (keyed by uid) and finalizers (a set) are built in.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use crate::patch::ListStrategy;

#[derive(Debug, Clone, Copy)]
pub struct ApplyOptions<'a> {
    pub manager: &'a str,
    pub force: bool,
    pub now: &'a str,
    pub api_version: &'a str,
    pub subresource: Option<&'a str>,
}

/// A field another manager owns with a different value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conflict {
    pub manager: String,
    pub field: String,
}

impl std::fmt::Display for Conflict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "conflict with {:?}: {}", self.manager, self.field)
    }
}

/// A set of field paths in FieldsV1 shape: children are keyed by their
/// FieldsV1 path element ("f:name", `k:{"uid":"1"}`, `v:"x"`, "i:0") and
/// `member` says the path itself (FieldsV1 ".") is in the set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct FieldSet {
    member: bool,
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    fn leaf() -> Self {
        Self {
            member: true,
            children: BTreeMap::new(),
        }
    }

    fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    fn prune(&mut self) {
        for c in self.children.values_mut() {
            c.prune();
        }
        self.children.retain(|_, c| !c.is_empty());
    }

    fn from_fields_v1(v: &Value) -> Self {
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
    fn to_fields_v1(&self) -> Value {
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

    fn union(&self, o: &Self) -> Self {
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

    fn difference(&self, o: &Self) -> Self {
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

    fn intersection(&self, o: &Self) -> Self {
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
    fn members(&self, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
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
fn path_string(path: &[String]) -> String {
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

type Strategy<'a> = &'a dyn Fn(&str) -> Option<ListStrategy>;

fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

/// How a list is treated, resolved against its actual items: a keyed list
/// whose items are not all objects carrying the key degrades to atomic.
enum ListKind<'k> {
    Atomic,
    Set,
    Map(Vec<&'k str>),
}

fn list_kind<'k>(items: &[Value], strategy: &'k Option<ListStrategy>) -> ListKind<'k> {
    match strategy {
        Some(ListStrategy::MergeByKey(k)) => {
            let keys = crate::patch::merge_key_fields(k);
            // The first key must be present; later ones may be defaulted.
            match keys.first() {
                Some(first) if items.iter().all(|i| i.get(*first).is_some()) => ListKind::Map(keys),
                _ => ListKind::Atomic,
            }
        }
        Some(ListStrategy::SetMerge) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            ListKind::Set
        }
        _ => ListKind::Atomic,
    }
}

/// The key fields of an associative list item, as a JSON object.
fn item_id(item: &Value, keys: &[&str]) -> Value {
    let mut m = Map::new();
    for k in keys {
        if let Some(v) = item.get(*k) {
            m.insert((*k).to_string(), v.clone());
        }
    }
    Value::Object(m)
}

fn item_key(item: &Value, keys: &[&str]) -> String {
    format!("k:{}", item_id(item, keys))
}

fn value_key(v: &Value) -> String {
    format!("v:{v}")
}

/// The fields an applied configuration sets: leaves, keyed list items (as
/// members) and set elements. Nulls are not owned.
fn to_set(v: &Value, path: &str, strat: Strategy) -> FieldSet {
    let mut s = FieldSet::default();
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, cv) in m {
                if cv.is_null() {
                    continue;
                }
                s.children
                    .insert(format!("f:{k}"), to_set(cv, &child_path(path, k), strat));
            }
        }
        Value::Array(items) if !items.is_empty() => {
            let st = strat(path);
            match list_kind(items, &st) {
                ListKind::Atomic => s.member = true,
                ListKind::Set => {
                    for i in items {
                        s.children.insert(value_key(i), FieldSet::leaf());
                    }
                }
                ListKind::Map(key) => {
                    for i in items {
                        let mut c = to_set(i, path, strat);
                        c.member = true;
                        s.children.insert(item_key(i, &key), c);
                    }
                }
            }
        }
        _ => s.member = true,
    }
    s
}

/// Every path of a subtree, containers included, as Compare reports for an
/// added or removed subtree.
fn whole_set(v: &Value, path: &str, strat: Strategy) -> FieldSet {
    let mut s = FieldSet::leaf();
    match v {
        Value::Object(m) => {
            for (k, cv) in m {
                s.children
                    .insert(format!("f:{k}"), whole_set(cv, &child_path(path, k), strat));
            }
        }
        Value::Array(items) => {
            let st = strat(path);
            match list_kind(items, &st) {
                ListKind::Atomic => {}
                ListKind::Set => {
                    for i in items {
                        s.children.insert(value_key(i), FieldSet::leaf());
                    }
                }
                ListKind::Map(key) => {
                    for i in items {
                        s.children
                            .insert(item_key(i, &key), whole_set(i, path, strat));
                    }
                }
            }
        }
        _ => {}
    }
    s
}

#[derive(Default)]
struct Comparison {
    added: FieldSet,
    modified: FieldSet,
    removed: FieldSet,
}

/// Compares two values at the same path, recording differences under `key`.
fn compare(
    old: &Value,
    new: &Value,
    path: &str,
    strat: Strategy,
    c: &mut Comparison,
    at: &mut Vec<String>,
) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            for (k, av) in a {
                at.push(format!("f:{k}"));
                let cpath = child_path(path, k);
                match b.get(k) {
                    Some(bv) => compare(av, bv, &cpath, strat, c, at),
                    None => insert_at(&mut c.removed, at, whole_set(av, &cpath, strat)),
                }
                at.pop();
            }
            for (k, bv) in b {
                if !a.contains_key(k) {
                    at.push(format!("f:{k}"));
                    insert_at(&mut c.added, at, whole_set(bv, &child_path(path, k), strat));
                    at.pop();
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => {
            let st = strat(path);
            match (list_kind(a, &st), list_kind(b, &st)) {
                (ListKind::Map(key), ListKind::Map(_)) => {
                    let index = |l: &[Value]| -> BTreeMap<String, usize> {
                        l.iter()
                            .enumerate()
                            .map(|(i, v)| (item_key(v, &key), i))
                            .collect()
                    };
                    let (ai, bi) = (index(a), index(b));
                    for (k, &i) in &ai {
                        at.push(k.clone());
                        match bi.get(k) {
                            Some(&j) => compare(&a[i], &b[j], path, strat, c, at),
                            None => insert_at(&mut c.removed, at, whole_set(&a[i], path, strat)),
                        }
                        at.pop();
                    }
                    for (k, &j) in &bi {
                        if !ai.contains_key(k) {
                            at.push(k.clone());
                            insert_at(&mut c.added, at, whole_set(&b[j], path, strat));
                            at.pop();
                        }
                    }
                }
                (ListKind::Set, ListKind::Set) => {
                    for v in a.iter().filter(|v| !b.contains(v)) {
                        at.push(value_key(v));
                        insert_at(&mut c.removed, at, FieldSet::leaf());
                        at.pop();
                    }
                    for v in b.iter().filter(|v| !a.contains(v)) {
                        at.push(value_key(v));
                        insert_at(&mut c.added, at, FieldSet::leaf());
                        at.pop();
                    }
                }
                _ => {
                    if a != b {
                        insert_at(&mut c.modified, at, FieldSet::leaf());
                    }
                }
            }
        }
        (a, b) => {
            if a != b {
                insert_at(&mut c.modified, at, FieldSet::leaf());
            }
        }
    }
}

fn insert_at(set: &mut FieldSet, at: &[String], node: FieldSet) {
    let mut cur = set;
    for pe in at {
        cur = cur.children.entry(pe.clone()).or_default();
    }
    *cur = cur.union(&node);
}

/// Drops what the server manages itself from a field set, as kube-apiserver
/// strips apiVersion, kind and server-owned metadata from managedFields.
fn strip_server_fields(mut s: FieldSet) -> FieldSet {
    s.children.remove("f:apiVersion");
    s.children.remove("f:kind");
    if let Some(meta) = s.children.get_mut("f:metadata") {
        meta.member = false;
        for f in [
            "f:name",
            "f:namespace",
            "f:uid",
            "f:resourceVersion",
            "f:generation",
            "f:creationTimestamp",
            "f:selfLink",
            "f:managedFields",
            "f:clusterName",
        ] {
            meta.children.remove(f);
        }
    }
    s.prune();
    s
}

/// The list strategy used when the caller gives none: ObjectMeta's lists.
fn default_strategy(path: &str) -> Option<ListStrategy> {
    match path {
        "metadata.ownerReferences" => Some(ListStrategy::MergeByKey("uid".into())),
        "metadata.finalizers" => Some(ListStrategy::SetMerge),
        _ => None,
    }
}

/// Merges an applied configuration into the live object: maps recurse,
/// keyed lists merge by key, sets union, everything else is replaced.
fn ssa_merge(live: &Value, applied: &Value, path: &str, strat: Strategy) -> Value {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            let mut out = l.clone();
            for (k, av) in a {
                if av.is_null() {
                    out.remove(k);
                    continue;
                }
                let merged = match l.get(k) {
                    Some(lv) => ssa_merge(lv, av, &child_path(path, k), strat),
                    None => without_nulls(av),
                };
                out.insert(k.clone(), merged);
            }
            Value::Object(out)
        }
        (Value::Array(l), Value::Array(a)) => {
            let st = strat(path);
            match (list_kind(l, &st), list_kind(a, &st)) {
                (ListKind::Map(key), ListKind::Map(_)) => {
                    let id = |v: &Value| item_id(v, &key);
                    Value::Array(merge_ordered(l, a, &id, &|lv, av| match lv {
                        Some(lv) => ssa_merge(lv, av, path, strat),
                        None => without_nulls(av),
                    }))
                }
                (ListKind::Set, ListKind::Set) => {
                    Value::Array(merge_ordered(l, a, &|v| v.clone(), &|_, av| av.clone()))
                }
                _ => without_nulls(applied),
            }
        }
        _ => without_nulls(applied),
    }
}

/// Merges two associative lists the way structured-merge-diff orders them:
/// applied items keep the applied order, live-only items stay where they
/// were relative to it.
fn merge_ordered(
    live: &[Value],
    applied: &[Value],
    id: &dyn Fn(&Value) -> Value,
    merge: &dyn Fn(Option<&Value>, &Value) -> Value,
) -> Vec<Value> {
    let live_ids: Vec<Value> = live.iter().map(id).collect();
    let applied_ids: Vec<Value> = applied.iter().map(id).collect();
    let live_item = |k: &Value| live_ids.iter().position(|x| x == k).map(|i| &live[i]);
    let mut out = Vec::with_capacity(live.len() + applied.len());
    let mut emitted: Vec<Value> = Vec::new();
    let (mut li, mut ri) = (0, 0);
    while li < live.len() || ri < applied.len() {
        if li < live.len() {
            let lid = &live_ids[li];
            if emitted.contains(lid) {
                li += 1;
                continue;
            }
            if !applied_ids.contains(lid) {
                out.push(live[li].clone());
                emitted.push(lid.clone());
                li += 1;
                continue;
            }
        }
        if ri < applied.len() {
            let rid = &applied_ids[ri];
            if !emitted.contains(rid) {
                out.push(merge(live_item(rid), &applied[ri]));
                emitted.push(rid.clone());
            }
            ri += 1;
        } else {
            li += 1;
        }
    }
    out
}

/// A null in an applied configuration unsets the field rather than
/// storing a null.
fn without_nulls(v: &Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, c)| !c.is_null())
                .map(|(k, c)| (k.clone(), without_nulls(c)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Removes the member paths of `remove` from `v`, except where `keep` still
/// owns something underneath (then only the unowned parts go).
fn remove_paths(v: &mut Value, remove: &FieldSet, keep: Option<&FieldSet>) {
    for (pe, rnode) in &remove.children {
        let knode = keep.and_then(|k| k.children.get(pe));
        let kept_below = knode.is_some_and(|k| !k.is_empty());
        if let Some(f) = pe.strip_prefix("f:") {
            let Value::Object(m) = v else { continue };
            if rnode.member && !kept_below {
                m.remove(f);
            } else if let Some(child) = m.get_mut(f) {
                remove_paths(child, rnode, knode);
            }
        } else {
            let Value::Array(items) = v else { continue };
            let Some(pos) = items.iter().position(|i| element_matches(i, pe)) else {
                continue;
            };
            if rnode.member && !kept_below {
                items.remove(pos);
            } else {
                remove_paths(&mut items[pos], rnode, knode);
            }
        }
    }
}

fn element_matches(item: &Value, pe: &str) -> bool {
    if let Some(k) = pe.strip_prefix("k:") {
        match serde_json::from_str::<Value>(k) {
            Ok(Value::Object(keys)) => keys.iter().all(|(kk, kv)| item.get(kk) == Some(kv)),
            _ => false,
        }
    } else if let Some(val) = pe.strip_prefix("v:") {
        serde_json::from_str::<Value>(val).is_ok_and(|x| x == *item)
    } else {
        false
    }
}

#[derive(Debug, Clone)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: Option<String>,
    subresource: String,
    set: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, api_version: &str, subresource: &str) -> bool {
        // Apply entries are identified without their apiVersion, so a
        // manager applying at a new version replaces its old entry.
        self.manager == manager
            && self.operation == operation
            && self.subresource == subresource
            && (operation == "Apply" || self.api_version == api_version)
    }

    fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("manager".into(), self.manager.clone().into());
        m.insert("operation".into(), self.operation.clone().into());
        m.insert("apiVersion".into(), self.api_version.clone().into());
        if let Some(t) = &self.time {
            m.insert("time".into(), t.clone().into());
        }
        m.insert("fieldsType".into(), "FieldsV1".into());
        m.insert("fieldsV1".into(), self.set.to_fields_v1());
        if !self.subresource.is_empty() {
            m.insert("subresource".into(), self.subresource.clone().into());
        }
        Value::Object(m)
    }
}

fn parse_entries(v: Option<&Value>) -> Vec<Entry> {
    let Some(Value::Array(items)) = v else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|e| {
            let s = |k: &str| e.get(k).and_then(Value::as_str).map(str::to_string);
            Some(Entry {
                manager: s("manager").unwrap_or_default(),
                operation: s("operation")?,
                api_version: s("apiVersion").unwrap_or_default(),
                time: s("time"),
                subresource: s("subresource").unwrap_or_default(),
                set: FieldSet::from_fields_v1(e.get("fieldsV1").unwrap_or(&Value::Null)),
            })
        })
        .collect()
}

fn managed_fields_of(obj: &Value) -> Option<&Value> {
    obj.get("metadata").and_then(|m| m.get("managedFields"))
}

fn without_managed_fields(obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(Value::Object(m)) = o.get_mut("metadata") {
        m.remove("managedFields");
    }
    o
}

/// kube-apiserver's DefaultMaxUpdateManagers: at most this many `Update` entries are kept.
const MAX_UPDATE_MANAGERS: usize = 10;
/// The manager the oldest `Update` entries are merged into beyond that, one per apiVersion.
const ANCIENT_CHANGES: &str = "ancient-changes";

/// Merges the oldest `Update` entries into an `ancient-changes` entry per apiVersion until at
/// most [`MAX_UPDATE_MANAGERS`] remain, as kube-apiserver's capManagersManager: otherwise
/// every distinct updater adds an entry to the object forever. The merged entry keeps the
/// union of the fields, so ownership (and conflicts) survive the merge.
fn cap_update_managers(entries: &mut Vec<Entry>) {
    let mut updaters: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].operation == "Update")
        .collect();
    let mut count = updaters.len();
    if count <= MAX_UPDATE_MANAGERS {
        return;
    }
    // Oldest first, then by name; the times are RFC 3339 in UTC, which order as strings.
    updaters.sort_by(|&a, &b| {
        (&entries[a].time, &entries[a].manager).cmp(&(&entries[b].time, &entries[b].manager))
    });
    let is_bucket = |e: &Entry| {
        e.operation == "Update" && e.manager == ANCIENT_CHANGES && e.subresource.is_empty()
    };
    // Per apiVersion, the entry that is (or becomes) its ancient-changes bucket; one left by
    // an earlier cap is reused so there is never a second.
    let mut buckets: BTreeMap<String, usize> = entries
        .iter()
        .enumerate()
        .filter(|(_, e)| is_bucket(e))
        .map(|(i, e)| (e.api_version.clone(), i))
        .collect();
    let mut merged = vec![false; entries.len()];
    for i in updaters {
        if count <= MAX_UPDATE_MANAGERS {
            break;
        }
        match buckets.get(&entries[i].api_version).copied() {
            Some(b) if b == i => {}
            Some(b) => {
                let set = entries[b].set.union(&entries[i].set);
                let time = entries[b].time.clone().max(entries[i].time.clone());
                let bucket = &mut entries[b];
                bucket.manager = ANCIENT_CHANGES.into();
                bucket.subresource.clear();
                bucket.set = set;
                bucket.time = time;
                merged[i] = true;
                count -= 1;
            }
            None => {
                buckets.insert(entries[i].api_version.clone(), i);
            }
        }
    }
    let mut i = 0;
    entries.retain(|_| {
        i += 1;
        !merged[i - 1]
    });
}

/// Writes entries into `metadata.managedFields`, ordered as kube-apiserver
/// orders them (operation, time, manager, apiVersion, subresource).
fn write_entries(obj: &mut Value, mut entries: Vec<Entry>) {
    entries.retain(|e| !e.set.is_empty());
    cap_update_managers(&mut entries);
    entries.sort_by(|a, b| {
        (
            &a.operation,
            &a.time,
            &a.manager,
            &a.api_version,
            &a.subresource,
        )
            .cmp(&(
                &b.operation,
                &b.time,
                &b.manager,
                &b.api_version,
                &b.subresource,
            ))
    });
    let Value::Object(root) = obj else { return };
    if entries.is_empty() {
        if let Some(Value::Object(m)) = root.get_mut("metadata") {
            m.remove("managedFields");
        }
        return;
    }
    let meta = root.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    if let Value::Object(m) = meta {
        m.insert(
            "managedFields".into(),
            Value::Array(entries.iter().map(Entry::to_json).collect()),
        );
    }
}

/// Server-side apply of `applied` onto `live` (None = create). Returns the
/// new object with `metadata.managedFields`, or the conflicts when another
/// manager owns a field the apply would change and `force` is off.
pub fn apply(
    live: Option<&Value>,
    applied: &Value,
    opts: &ApplyOptions,
) -> Result<Value, Vec<Conflict>> {
    apply_with(live, applied, opts, &default_strategy)
}

/// [`apply`] with list semantics from `list_strategy` (dotted paths, as in
/// [`crate::patch::strategic_merge_patch`]): `MergeByKey` = associative list,
/// `SetMerge` = set, `Replace`/None = atomic. See [`schema_list_strategy`].
pub fn apply_with(
    live: Option<&Value>,
    applied: &Value,
    opts: &ApplyOptions,
    list_strategy: &dyn Fn(&str) -> Option<ListStrategy>,
) -> Result<Value, Vec<Conflict>> {
    let strat = |p: &str| list_strategy(p).or_else(|| default_strategy(p));
    let strat: Strategy = &strat;
    let live_obj = live
        .map(without_managed_fields)
        .unwrap_or_else(|| json!({}));
    let mut entries = parse_entries(live.and_then(managed_fields_of));
    let applied = without_managed_fields(applied);
    let subresource = opts.subresource.unwrap_or("");
    let new_set = strip_server_fields(to_set(&applied, "", strat));
    let mine = entries
        .iter()
        .position(|e| e.is(opts.manager, "Apply", opts.api_version, subresource));

    let mut merged = ssa_merge(&live_obj, &applied, "", strat);
    if let Some(i) = mine {
        let others = entries
            .iter()
            .enumerate()
            .filter(|(j, _)| *j != i)
            .fold(FieldSet::default(), |acc, (_, e)| acc.union(&e.set));
        let keep = new_set.union(&others);
        let remove = entries[i].set.difference(&keep);
        remove_paths(&mut merged, &remove, Some(&keep));
        drop_empty_meta_maps(&mut merged);
    }

    let mut cmp = Comparison::default();
    compare(&live_obj, &merged, "", strat, &mut cmp, &mut Vec::new());
    let changed = strip_server_fields(cmp.added.union(&cmp.modified));
    let removed = strip_server_fields(std::mem::take(&mut cmp.removed));

    let mut conflicts = Vec::new();
    for (j, e) in entries.iter_mut().enumerate() {
        if Some(j) == mine {
            continue;
        }
        let clash = e.set.intersection(&changed);
        if clash.is_empty() {
            continue;
        }
        if opts.force {
            // Forcing moves ownership of the contested fields to the applier.
            e.set = e.set.difference(&clash);
        } else {
            let mut paths = Vec::new();
            clash.members(&mut Vec::new(), &mut paths);
            conflicts.extend(paths.iter().map(|p| Conflict {
                manager: e.manager.clone(),
                field: path_string(p),
            }));
        }
    }
    if !conflicts.is_empty() {
        conflicts.sort();
        conflicts.dedup();
        return Err(conflicts);
    }
    for e in entries.iter_mut() {
        e.set = e.set.difference(&removed);
    }

    let object_changed = merged != live_obj;
    match mine {
        Some(i) => {
            let e = &mut entries[i];
            if object_changed
                || e.set != new_set
                || e.api_version != opts.api_version
                || e.time.is_none()
            {
                e.time = Some(opts.now.to_string());
            }
            e.set = new_set;
            e.api_version = opts.api_version.to_string();
        }
        None => entries.push(Entry {
            manager: opts.manager.to_string(),
            operation: "Apply".into(),
            api_version: opts.api_version.to_string(),
            time: Some(opts.now.to_string()),
            subresource: subresource.to_string(),
            set: new_set,
        }),
    }
    write_entries(&mut merged, entries);
    Ok(merged)
}

/// Typed ObjectMeta drops empty labels/annotations maps; keep that shape.
fn drop_empty_meta_maps(obj: &mut Value) {
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        for k in ["labels", "annotations", "ownerReferences", "finalizers"] {
            let empty = match m.get(k) {
                Some(Value::Object(x)) => x.is_empty(),
                Some(Value::Array(x)) => x.is_empty(),
                _ => false,
            };
            if empty {
                m.remove(k);
            }
        }
    }
}

/// Records a non-apply write (create, update, patch) of `new` over `old` as
/// the manager's `Update` entry, like kube-apiserver: the manager gains the
/// fields it added or changed, other managers lose them, and removed fields
/// leave every set. A client-sent `metadata.managedFields` replaces the old
/// entries (an empty list clears them); when absent, the old ones carry over.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
    api_version: &str,
    subresource: Option<&str>,
) {
    record_update_with(
        old,
        new,
        manager,
        now,
        api_version,
        subresource,
        &default_strategy,
    )
}

/// [`record_update`] with list semantics from `list_strategy`.
pub fn record_update_with(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    now: &str,
    api_version: &str,
    subresource: Option<&str>,
    list_strategy: &dyn Fn(&str) -> Option<ListStrategy>,
) {
    let strat = |p: &str| list_strategy(p).or_else(|| default_strategy(p));
    let strat: Strategy = &strat;
    let subresource = subresource.unwrap_or("");
    let old_obj = old.map(without_managed_fields).unwrap_or_else(|| json!({}));
    let old_mf = old.and_then(managed_fields_of);
    let mut entries = match managed_fields_of(new) {
        None | Some(Value::Null) => parse_entries(old_mf),
        Some(sent) if Some(sent) == old_mf => parse_entries(old_mf),
        Some(sent) => parse_entries(Some(sent)),
    };
    let new_obj = without_managed_fields(new);

    let mut cmp = Comparison::default();
    compare(&old_obj, &new_obj, "", strat, &mut cmp, &mut Vec::new());
    let changed = strip_server_fields(cmp.added.union(&cmp.modified));
    let removed = strip_server_fields(std::mem::take(&mut cmp.removed));
    for e in entries.iter_mut() {
        e.set = e.set.difference(&changed).difference(&removed);
    }
    if !changed.is_empty() {
        match entries
            .iter_mut()
            .find(|e| e.is(manager, "Update", api_version, subresource))
        {
            Some(e) => {
                e.set = e.set.union(&changed);
                e.time = Some(now.to_string());
            }
            None => entries.push(Entry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: api_version.to_string(),
                time: Some(now.to_string()),
                subresource: subresource.to_string(),
                set: changed,
            }),
        }
    }
    *new = new_obj;
    write_entries(new, entries);
}

/// A list strategy read from an OpenAPI v3 schema (a CRD version's
/// `openAPIV3Schema`): `x-kubernetes-list-type: map` merges by all of
/// `x-kubernetes-list-map-keys` (comma-joined), `set` is a set, and
/// anything else is atomic. `path` is dotted, list items adding no segment.
pub fn schema_list_strategy(schema: &Value, path: &str) -> Option<ListStrategy> {
    let mut cur = schema;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        // Descend through list items to reach the item's properties.
        while cur.get("type").and_then(Value::as_str) == Some("array") {
            cur = cur.get("items")?;
        }
        cur = cur.get("properties")?.get(seg)?;
    }
    match cur.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("map") => {
            let keys: Vec<&str> = cur
                .get("x-kubernetes-list-map-keys")?
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .collect();
            if keys.is_empty() {
                return None;
            }
            Some(ListStrategy::MergeByKey(keys.join(",")))
        }
        Some("set") => Some(ListStrategy::SetMerge),
        Some(_) => Some(ListStrategy::Replace),
        None => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts<'a>(manager: &'a str, force: bool, now: &'a str) -> ApplyOptions<'a> {
        ApplyOptions {
            manager,
            force,
            now,
            api_version: "v1",
            subresource: None,
        }
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "d", "labels": {"app": "x"}}, "data": data})
    }

    fn entries(obj: &Value) -> Vec<Value> {
        obj["metadata"]["managedFields"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Stand-in for what the server adds on create.
    fn stored(mut v: Value) -> Value {
        v["metadata"]["uid"] = json!("u1");
        v["metadata"]["resourceVersion"] = json!("1");
        v["metadata"]["creationTimestamp"] = json!("2024-01-01T00:00:00Z");
        v
    }

    #[test]
    fn create_records_apply_entry() {
        let out = apply(None, &cm(json!({"a": "1"})), &opts("kubectl", false, "T1")).unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
        assert_eq!(
            entries(&out),
            vec![json!({
                "manager": "kubectl", "operation": "Apply", "apiVersion": "v1", "time": "T1",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {"f:a": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
            })]
        );
    }

    #[test]
    fn reapply_is_a_noop() {
        let live =
            stored(apply(None, &cm(json!({"a": "1"})), &opts("kubectl", false, "T1")).unwrap());
        let again = apply(
            Some(&live),
            &cm(json!({"a": "1"})),
            &opts("kubectl", false, "T2"),
        )
        .unwrap();
        assert_eq!(
            again, live,
            "unchanged apply must return the live object unchanged"
        );
    }

    #[test]
    fn dropped_fields_are_removed() {
        let live = stored(
            apply(
                None,
                &cm(json!({"a": "1", "b": "2"})),
                &opts("kubectl", false, "T1"),
            )
            .unwrap(),
        );
        let mut cfg = cm(json!({"b": "3"}));
        cfg["metadata"].as_object_mut().unwrap().remove("labels");
        let out = apply(Some(&live), &cfg, &opts("kubectl", false, "T2")).unwrap();
        assert_eq!(out["data"], json!({"b": "3"}));
        assert!(out["metadata"].get("labels").is_none(), "{out}");
        assert_eq!(out["metadata"]["uid"], "u1");
        assert_eq!(entries(&out)[0]["fieldsV1"], json!({"f:data": {"f:b": {}}}));
        assert_eq!(entries(&out)[0]["time"], "T2");
    }

    #[test]
    fn conflicts_and_force() {
        let live = stored(
            apply(
                None,
                &cm(json!({"a": "1", "b": "2"})),
                &opts("alice", false, "T1"),
            )
            .unwrap(),
        );
        // Same value: shared ownership, no conflict.
        let shared = apply(
            Some(&live),
            &cm(json!({"a": "1"})),
            &opts("bob", false, "T2"),
        )
        .unwrap();
        assert_eq!(entries(&shared).len(), 2);
        // Different value: conflict naming the owner and the field.
        let errs = apply(
            Some(&live),
            &cm(json!({"a": "9", "b": "8"})),
            &opts("bob", false, "T2"),
        )
        .unwrap_err();
        assert_eq!(
            errs,
            vec![
                Conflict {
                    manager: "alice".into(),
                    field: ".data.a".into()
                },
                Conflict {
                    manager: "alice".into(),
                    field: ".data.b".into()
                },
            ]
        );
        assert_eq!(errs[0].to_string(), "conflict with \"alice\": .data.a");
        // Force takes ownership.
        let forced = apply(
            Some(&live),
            &cm(json!({"a": "9"})),
            &opts("bob", true, "T2"),
        )
        .unwrap();
        assert_eq!(forced["data"], json!({"a": "9", "b": "2"}));
        let es = entries(&forced);
        let alice = es.iter().find(|e| e["manager"] == "alice").unwrap();
        let bob = es.iter().find(|e| e["manager"] == "bob").unwrap();
        assert_eq!(alice["fieldsV1"]["f:data"], json!({"f:b": {}}));
        assert_eq!(bob["fieldsV1"]["f:data"], json!({"f:a": {}}));
        // Alice now conflicts with bob over .data.a.
        let errs = apply(
            Some(&forced),
            &cm(json!({"a": "1", "b": "2"})),
            &opts("alice", false, "T3"),
        )
        .unwrap_err();
        assert_eq!(
            errs,
            vec![Conflict {
                manager: "bob".into(),
                field: ".data.a".into()
            }]
        );
    }

    #[test]
    fn shared_field_survives_when_one_owner_drops_it() {
        let live =
            stored(apply(None, &cm(json!({"a": "1"})), &opts("alice", false, "T1")).unwrap());
        let live = apply(
            Some(&live),
            &cm(json!({"a": "1"})),
            &opts("bob", false, "T2"),
        )
        .unwrap();
        let out = apply(Some(&live), &cm(json!({})), &opts("alice", false, "T3")).unwrap();
        assert_eq!(out["data"], json!({"a": "1"}));
        let out = apply(Some(&out), &cm(json!({})), &opts("bob", false, "T4")).unwrap();
        assert_eq!(out["data"], json!({}));
    }

    #[test]
    fn record_update_then_apply_conflicts() {
        let mut created = stored(cm(json!({"a": "1"})));
        record_update(None, &mut created, "kubectl-create", "T1", "v1", None);
        let es = entries(&created);
        assert_eq!(es.len(), 1);
        assert_eq!(es[0]["operation"], "Update");
        assert_eq!(es[0]["manager"], "kubectl-create");
        assert_eq!(
            es[0]["fieldsV1"],
            json!({"f:data": {".": {}, "f:a": {}}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
        );
        assert!(es[0].get("subresource").is_none());

        let errs = apply(
            Some(&created),
            &cm(json!({"a": "2"})),
            &opts("kubectl", false, "T2"),
        )
        .unwrap_err();
        assert!(
            errs.contains(&Conflict {
                manager: "kubectl-create".into(),
                field: ".data.a".into()
            }),
            "{errs:?}"
        );

        // An update that changes a field moves it to the updater; removing a
        // field drops it from every set.
        let mut updated = created.clone();
        updated["data"] = json!({"b": "2"});
        record_update(Some(&created), &mut updated, "editor", "T3", "v1", None);
        let es = entries(&updated);
        let creator = es
            .iter()
            .find(|e| e["manager"] == "kubectl-create")
            .unwrap();
        let editor = es.iter().find(|e| e["manager"] == "editor").unwrap();
        assert_eq!(
            creator["fieldsV1"],
            json!({"f:data": {}, "f:metadata": {"f:labels": {".": {}, "f:app": {}}}})
        );
        assert_eq!(editor["fieldsV1"], json!({"f:data": {"f:b": {}}}));
        assert_eq!(editor["time"], "T3");

        // A no-op update leaves managedFields alone.
        let mut same = updated.clone();
        record_update(Some(&updated), &mut same, "other", "T4", "v1", None);
        assert_eq!(same, updated);

        // Status writes are recorded against the subresource.
        let mut st = updated.clone();
        st["status"] = json!({"phase": "x"});
        record_update(Some(&updated), &mut st, "ctl", "T5", "v1", Some("status"));
        let e = entries(&st)
            .into_iter()
            .find(|e| e["manager"] == "ctl")
            .unwrap();
        assert_eq!(e["subresource"], "status");
        assert_eq!(e["fieldsV1"], json!({"f:status": {".": {}, "f:phase": {}}}));
    }

    #[test]
    fn record_update_honours_client_managed_fields() {
        let mut created = stored(cm(json!({"a": "1"})));
        record_update(None, &mut created, "m", "T1", "v1", None);
        let mut cleared = created.clone();
        cleared["metadata"]["managedFields"] = json!([]);
        record_update(Some(&created), &mut cleared, "m", "T2", "v1", None);
        assert!(cleared["metadata"].get("managedFields").is_none());
        let mut omitted = created.clone();
        omitted["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        record_update(Some(&created), &mut omitted, "m", "T2", "v1", None);
        assert_eq!(omitted, created);
    }

    #[test]
    fn apply_entry_ordering_and_update_entries_coexist() {
        let mut live = stored(cm(json!({"a": "1"})));
        record_update(
            None,
            &mut live,
            "creator",
            "2024-01-01T00:00:00Z",
            "v1",
            None,
        );
        let out = apply(
            Some(&live),
            &cm(json!({"b": "2"})),
            &opts("kubectl", false, "2024-01-02T00:00:00Z"),
        )
        .unwrap();
        let ops: Vec<_> = entries(&out)
            .iter()
            .map(|e| e["operation"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(ops, ["Apply", "Update"]);
        assert_eq!(out["data"], json!({"a": "1", "b": "2"}));
    }

    #[test]
    fn owner_references_merge_by_uid_and_finalizers_as_set() {
        let cfg = json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s",
            "ownerReferences": [{"uid": "1", "name": "o", "kind": "K", "apiVersion": "v1"}],
            "finalizers": ["a/b"]}});
        let out = apply(None, &cfg, &opts("m", false, "T")).unwrap();
        assert_eq!(
            entries(&out)[0]["fieldsV1"],
            json!({"f:metadata": {
                "f:finalizers": {"v:\"a/b\"": {}},
                "f:ownerReferences": {"k:{\"uid\":\"1\"}": {".": {}, "f:apiVersion": {}, "f:kind": {}, "f:name": {}, "f:uid": {}}}
            }})
        );
        let mut live = stored(out);
        live["metadata"]["finalizers"] = json!(["a/b", "other"]);
        let out = apply(
            Some(&live),
            &json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}}),
            &opts("m", false, "T2"),
        )
        .unwrap();
        assert_eq!(out["metadata"]["finalizers"], json!(["other"]));
        assert!(out["metadata"].get("ownerReferences").is_none());
        assert!(out["metadata"].get("managedFields").is_none());
    }

    #[test]
    fn schema_driven_lists() {
        let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "disks": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"tags": {"type": "array", "x-kubernetes-list-type": "set"}}}},
            "plain": {"type": "array"}
        }}}});
        assert_eq!(
            schema_list_strategy(&schema, "spec.disks"),
            Some(ListStrategy::MergeByKey("name".into()))
        );
        assert_eq!(
            schema_list_strategy(&schema, "spec.disks.tags"),
            Some(ListStrategy::SetMerge)
        );
        assert_eq!(schema_list_strategy(&schema, "spec.plain"), None);
        assert_eq!(schema_list_strategy(&schema, "spec.nope"), None);
        let strat = |p: &str| schema_list_strategy(&schema, p);
        let obj = |disks: Value| json!({"apiVersion": "x/v1", "kind": "H", "metadata": {"name": "h"}, "spec": {"disks": disks}});
        let live = apply_with(
            None,
            &obj(json!([{"name": "a", "size": 1}])),
            &opts("alice", false, "T1"),
            &strat,
        )
        .unwrap();
        let live = apply_with(
            Some(&live),
            &obj(json!([{"name": "b", "size": 2}])),
            &opts("bob", false, "T2"),
            &strat,
        )
        .unwrap();
        assert_eq!(
            live["spec"]["disks"],
            json!([{"name": "a", "size": 1}, {"name": "b", "size": 2}])
        );
        let errs = apply_with(
            Some(&live),
            &obj(json!([{"name": "a", "size": 5}])),
            &opts("bob", false, "T3"),
            &strat,
        )
        .unwrap_err();
        assert_eq!(
            errs,
            vec![Conflict {
                manager: "alice".into(),
                field: ".spec.disks[name=\"a\"].size".into()
            }]
        );
        // Alice dropping her item removes it; bob's stays.
        let out = apply_with(
            Some(&live),
            &obj(json!([])),
            &opts("alice", false, "T4"),
            &strat,
        )
        .unwrap();
        assert_eq!(out["spec"]["disks"], json!([{"name": "b", "size": 2}]));
    }

    #[test]
    fn keyed_list_merge_order() {
        let strat = |p: &str| (p == "spec.l").then(|| ListStrategy::MergeByKey("n".into()));
        let obj = |l: Value| json!({"apiVersion": "x/v1", "kind": "H", "metadata": {"name": "h"}, "spec": {"l": l}});
        let live = obj(json!([{"n": "a"}, {"n": "x"}, {"n": "b"}, {"n": "y"}]));
        let out = apply_with(
            Some(&live),
            &obj(json!([{"n": "b", "v": 1}, {"n": "a"}, {"n": "c"}])),
            &opts("m", false, "T"),
            &strat,
        )
        .unwrap();
        let names: Vec<&str> = out["spec"]["l"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["n"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["b", "a", "x", "y", "c"]);
        assert_eq!(out["spec"]["l"][0], json!({"n": "b", "v": 1}));
    }

    #[test]
    fn multi_key_lists_from_schema() {
        let schema = json!({"properties": {"spec": {"properties": {"ports": {"type": "array",
            "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["port", "protocol"]}}}}});
        assert_eq!(
            schema_list_strategy(&schema, "spec.ports"),
            Some(ListStrategy::MergeByKey("port,protocol".into()))
        );
        let strat = |p: &str| schema_list_strategy(&schema, p);
        let obj = |l: Value| json!({"apiVersion": "x/v1", "kind": "S", "metadata": {"name": "s"}, "spec": {"ports": l}});
        let live = apply_with(
            None,
            &obj(json!([{"port": 80, "protocol": "TCP", "n": "a"}])),
            &opts("alice", false, "T1"),
            &strat,
        )
        .unwrap();
        assert_eq!(
            entries(&live)[0]["fieldsV1"]["f:spec"]["f:ports"],
            json!({"k:{\"port\":80,\"protocol\":\"TCP\"}": {".": {}, "f:n": {}, "f:port": {}, "f:protocol": {}}})
        );
        let out = apply_with(
            Some(&live),
            &obj(json!([{"port": 80, "protocol": "UDP", "n": "b"}])),
            &opts("bob", false, "T2"),
            &strat,
        )
        .unwrap();
        assert_eq!(out["spec"]["ports"].as_array().unwrap().len(), 2);
        let errs = apply_with(
            Some(&out),
            &obj(json!([{"port": 80, "protocol": "TCP", "n": "z"}])),
            &opts("bob", false, "T3"),
            &strat,
        )
        .unwrap_err();
        assert_eq!(errs[0].field, ".spec.ports[port=80,protocol=\"TCP\"].n");
    }

    #[test]
    fn atomic_lists_replace_and_conflict_whole() {
        let obj = |v: Value| json!({"apiVersion": "x/v1", "kind": "H", "metadata": {"name": "h"}, "spec": {"l": v}});
        let live = apply(None, &obj(json!([1, 2])), &opts("alice", false, "T1")).unwrap();
        assert_eq!(
            entries(&live)[0]["fieldsV1"],
            json!({"f:spec": {"f:l": {}}})
        );
        let errs = apply(Some(&live), &obj(json!([3])), &opts("bob", false, "T2")).unwrap_err();
        assert_eq!(
            errs,
            vec![Conflict {
                manager: "alice".into(),
                field: ".spec.l".into()
            }]
        );
        let out = apply(Some(&live), &obj(json!([3])), &opts("alice", false, "T2")).unwrap();
        assert_eq!(out["spec"]["l"], json!([3]));
    }

    #[test]
    fn fields_v1_round_trip() {
        let v = json!({"f:metadata": {"f:labels": {".": {}, "f:app": {}}}, "f:spec": {".": {}, "f:x": {}},
            "f:list": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}}, "v:\"x\"": {}, "i:0": {}}});
        assert_eq!(FieldSet::from_fields_v1(&v).to_fields_v1(), v);
        assert_eq!(
            path_string(&[
                "f:spec".into(),
                "k:{\"name\":\"a\",\"port\":80}".into(),
                "v:\"x\"".into(),
                "i:2".into()
            ]),
            ".spec[name=\"a\",port=80][=\"x\"][2]"
        );
    }

    #[test]
    fn update_takes_ownership_from_applier() {
        let live = stored(
            apply(
                None,
                &cm(json!({"a": "1", "b": "1"})),
                &opts("alice", false, "T1"),
            )
            .unwrap(),
        );
        let mut edited = live.clone();
        edited["data"]["a"] = json!("2");
        record_update(Some(&live), &mut edited, "bob", "T2", "v1", None);
        let es = entries(&edited);
        let alice = es.iter().find(|e| e["manager"] == "alice").unwrap();
        assert_eq!(alice["fieldsV1"]["f:data"], json!({"f:b": {}}));
        assert_eq!(alice["time"], "T1", "untouched entries keep their time");
        // Re-applying the old value now conflicts with the updater.
        let errs = apply(
            Some(&edited),
            &cm(json!({"a": "1", "b": "1"})),
            &opts("alice", false, "T3"),
        )
        .unwrap_err();
        assert_eq!(
            errs,
            vec![Conflict {
                manager: "bob".into(),
                field: ".data.a".into()
            }]
        );
        // Dropping a field alice no longer owns leaves it alone.
        let out = apply(
            Some(&edited),
            &cm(json!({"b": "1"})),
            &opts("alice", false, "T3"),
        )
        .unwrap();
        assert_eq!(out["data"], json!({"a": "2", "b": "1"}));
    }

    #[test]
    fn applied_managed_fields_and_nulls_are_ignored() {
        let mut cfg = cm(json!({"a": "1", "gone": null}));
        cfg["metadata"]["managedFields"] =
            json!([{"manager": "evil", "operation": "Apply", "fieldsV1": {"f:data": {}}}]);
        let out = apply(None, &cfg, &opts("m", false, "T")).unwrap();
        let es = entries(&out);
        assert_eq!(es.len(), 1);
        assert_eq!(es[0]["manager"], "m");
        assert_eq!(out["data"], json!({"a": "1"}));
    }

    #[test]
    fn apply_at_new_version_replaces_the_entry() {
        let live = stored(apply(None, &cm(json!({"a": "1"})), &opts("m", false, "T1")).unwrap());
        let o = ApplyOptions {
            api_version: "v2",
            ..opts("m", false, "T2")
        };
        let out = apply(Some(&live), &cm(json!({"a": "1"})), &o).unwrap();
        let es = entries(&out);
        assert_eq!(es.len(), 1);
        assert_eq!(es[0]["apiVersion"], "v2");
        assert_eq!(es[0]["time"], "T2");
    }

    #[test]
    fn garbage_does_not_panic() {
        let garbage = [
            json!(null),
            json!("s"),
            json!([1, {"a": 2}]),
            json!({"metadata": "x"}),
            json!({"metadata": {"managedFields": [1, {"operation": "Apply", "fieldsV1": "x"}, {"manager": "m", "operation": "Update", "fieldsV1": {"f:a": 3}}]}}),
        ];
        for live in &garbage {
            for applied in &garbage {
                let _ = apply(Some(live), applied, &opts("m", false, "T"));
                let _ = apply(None, applied, &opts("m", true, "T"));
                let mut n = applied.clone();
                record_update(Some(live), &mut n, "m", "T", "v1", None);
                let mut n = applied.clone();
                record_update(None, &mut n, "m", "T", "v1", Some("status"));
            }
        }
    }

    #[test]
    fn update_managers_are_capped_into_ancient_changes() {
        let mut live = cm(json!({}));
        for i in 0..50 {
            let mut next = live.clone();
            next["data"][format!("k{i:02}")] = json!("v");
            // Distinct seconds, so age (not name) picks the merged ones.
            let now = format!("2024-01-01T00:{:02}:{:02}Z", i / 60, i % 60);
            record_update(
                Some(&live),
                &mut next,
                &format!("m{i:02}"),
                &now,
                "v1",
                None,
            );
            live = next;
            let updates = entries(&live)
                .into_iter()
                .filter(|e| e["operation"] == "Update")
                .count();
            assert!(updates <= 10, "after {i}: {updates}");
        }
        let all = entries(&live);
        let managers: Vec<&str> = all.iter().map(|e| e["manager"].as_str().unwrap()).collect();
        assert_eq!(all.len(), 10);
        // Nine newest updaters, and one entry holding everything older.
        let mut want = vec!["ancient-changes".to_string()];
        want.extend((41..50).map(|i| format!("m{i}")));
        let mut got: Vec<String> = managers.iter().map(|m| m.to_string()).collect();
        got.sort();
        assert_eq!(got, want);
        let ancient = all
            .iter()
            .find(|e| e["manager"] == "ancient-changes")
            .unwrap();
        let owned = ancient["fieldsV1"]["f:data"].as_object().unwrap();
        assert_eq!(owned.len(), 41);
        assert_eq!(ancient["time"], "2024-01-01T00:00:40Z");
        assert_eq!(live["data"].as_object().unwrap().len(), 50);

        // Its fields are still owned: an apply conflicts with it, unless forced.
        let applied = cm(json!({"k00": "w"}));
        let errs = apply(Some(&live), &applied, &opts("applier", false, "T9")).unwrap_err();
        assert_eq!(errs[0].manager, "ancient-changes");
        let out = apply(Some(&live), &applied, &opts("applier", true, "T9")).unwrap();
        assert_eq!(out["data"]["k00"], "w");
        let e = entries(&out);
        assert!(
            e.iter()
                .any(|e| e["manager"] == "applier" && e["operation"] == "Apply")
        );
        assert_eq!(e.iter().filter(|e| e["operation"] == "Update").count(), 10);

        // One more updater merges into the same bucket, not a second one.
        let mut next = out.clone();
        next["data"]["new"] = json!("v");
        record_update(
            Some(&out),
            &mut next,
            "late",
            "2024-01-02T00:00:00Z",
            "v1",
            None,
        );
        let e = entries(&next);
        assert_eq!(
            e.iter()
                .filter(|e| e["manager"] == "ancient-changes")
                .count(),
            1
        );
        assert_eq!(e.iter().filter(|e| e["operation"] == "Update").count(), 10);
    }
}
