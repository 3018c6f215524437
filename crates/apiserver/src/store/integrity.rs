//! What may be stored and what is read back: bounds checked before a write (size, nesting),
//! rows that cannot be read quarantined at open, and the offline check of a store file.

use std::path::Path;

use redb::{Database, ReadableDatabase, ReadableTable, TableDefinition};
use serde_json::Value;

use super::error::{StoreError, db_err};
use super::limits::{MAX_DEPTH, MAX_STORED_DEPTH};
use super::op::Op;
use super::tables::{META, OBJECTS, REVISION};

/// Rows that could not be read at open, moved aside (key -> original bytes) so they never stop
/// the server from starting again; `ferrometal store check` reports them.
const QUARANTINE: TableDefinition<&str, &[u8]> = TableDefinition::new("quarantine");

/// The nesting depth of `v` (a scalar is 1); iterative so a hostile value cannot exhaust the
/// stack, and allocation-free: it runs on every write.
pub fn depth(v: &Value) -> usize {
    let mut stack: Vec<(&Value, usize)> = vec![(v, 1)];
    let mut best = 0;
    while let Some((v, d)) = stack.pop() {
        best = best.max(d);
        match v {
            Value::Object(m) => stack.extend(m.values().map(|c| (c, d + 1))),
            Value::Array(a) => stack.extend(a.iter().map(|c| (c, d + 1))),
            _ => {}
        }
    }
    best
}

/// The path to the deepest point of `v` (`spec.a.b[0]`), for the error once [`depth`] is over
/// a limit.
fn deepest_path(v: &Value) -> String {
    let mut path = String::new();
    let mut cur = v;
    loop {
        let next = match cur {
            Value::Object(m) => m
                .iter()
                .max_by_key(|(_, c)| depth(c))
                .map(|(k, c)| (format!(".{k}"), c)),
            Value::Array(a) => a
                .iter()
                .enumerate()
                .max_by_key(|(_, c)| depth(c))
                .map(|(i, c)| (format!("[{i}]"), c)),
            _ => None,
        };
        match next {
            Some((step, c)) if path.len() < 400 => {
                path.push_str(&step);
                cur = c;
            }
            _ => return path,
        }
    }
}

/// Refuses objects a later read could not handle; see [`MAX_DEPTH`], [`MAX_STORED_DEPTH`] and
/// [`MAX_OBJECT_BYTES`](super::MAX_OBJECT_BYTES).
pub(super) fn check_bounds(ops: &[Op]) -> Result<(), StoreError> {
    for op in ops {
        let Op::Put {
            resource,
            namespace,
            name,
            value,
        } = op
        else {
            continue;
        };
        let key = || format!("{resource}/{namespace}/{name}");
        let total = depth(value);
        if total <= MAX_DEPTH {
            continue;
        }
        // Name the user's field, not its reflection in managedFields.
        let mut content = value.clone();
        if let Some(m) = content.get_mut("metadata").and_then(Value::as_object_mut) {
            m.remove("managedFields");
        }
        let content_depth = depth(&content);
        let (depth, path, limit) = if content_depth > MAX_DEPTH {
            (content_depth, deepest_path(&content), MAX_DEPTH)
        } else if total > MAX_STORED_DEPTH {
            (total, deepest_path(value), MAX_STORED_DEPTH)
        } else {
            continue;
        };
        let mut path = path.trim_start_matches('.').to_string();
        if path.len() > 200 {
            let cut = path.floor_char_boundary(200);
            path.truncate(cut);
            path.push('…');
        }
        return Err(StoreError::TooDeep {
            key: key(),
            depth,
            path,
            limit,
        });
    }
    Ok(())
}

/// Parses one stored row: its key and an object a reader can use. Anything else is a reason to
/// quarantine it.
pub(super) fn load_row(key: &str, bytes: &[u8]) -> Result<(String, String, String, Value), String> {
    let mut parts = key.splitn(3, '/');
    let (Some(resource), Some(ns), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err("malformed key".into());
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if !value.is_object() {
        return Err("not a JSON object".into());
    }
    let depth = depth(&value);
    if depth > MAX_STORED_DEPTH {
        return Err(format!(
            "nests {depth} levels deep, the limit is {MAX_STORED_DEPTH}"
        ));
    }
    Ok((resource.into(), ns.into(), name.into(), value))
}

/// Moves unreadable rows out of the objects table, keeping their bytes for inspection.
pub(super) fn quarantine(
    db: &Database,
    bad: &[(String, Vec<u8>, String)],
) -> Result<(), StoreError> {
    let tx = db.begin_write().map_err(db_err)?;
    {
        let mut objects = tx.open_table(OBJECTS).map_err(db_err)?;
        let mut q = tx.open_table(QUARANTINE).map_err(db_err)?;
        for (key, bytes, why) in bad {
            tracing::error!(key = %key, reason = %why, "quarantined an unreadable stored object; the rest is served");
            q.insert(key.as_str(), bytes.as_slice()).map_err(db_err)?;
            objects.remove(key.as_str()).map_err(db_err)?;
        }
    }
    tx.commit().map_err(db_err)
}

/// What `ferrometal store check` reports about a data directory's store.
#[derive(Debug, Default)]
pub struct CheckReport {
    pub revision: u64,
    pub objects: usize,
    /// Readable objects per resource (storage key, e.g. `configmaps`).
    pub by_resource: std::collections::BTreeMap<String, usize>,
    /// (key, reason) of rows in the objects table that cannot be read.
    pub unreadable: Vec<(String, String)>,
    /// (key, size) of rows already moved to quarantine at an earlier start.
    pub quarantined: Vec<(String, usize)>,
}

/// Reads every row of the store at `path` without changing anything (the file must not be
/// open in a running server).
pub fn check(path: &Path) -> Result<CheckReport, StoreError> {
    let db = Database::builder()
        .set_cache_size(2 << 20)
        .open(path)
        .map_err(db_err)?;
    let tx = db.begin_read().map_err(db_err)?;
    let mut report = CheckReport::default();
    if let Ok(meta) = tx.open_table(META) {
        report.revision = meta.get(REVISION).map_err(db_err)?.map_or(0, |v| v.value());
    }
    if let Ok(objects) = tx.open_table(OBJECTS) {
        for row in objects.iter().map_err(db_err)? {
            let (k, v) = row.map_err(db_err)?;
            match load_row(k.value(), v.value()) {
                Ok((resource, ..)) => {
                    report.objects += 1;
                    *report.by_resource.entry(resource).or_default() += 1;
                }
                Err(why) => report.unreadable.push((k.value().to_string(), why)),
            }
        }
    }
    if let Ok(q) = tx.open_table(QUARANTINE) {
        for row in q.iter().map_err(db_err)? {
            let (k, v) = row.map_err(db_err)?;
            report
                .quarantined
                .push((k.value().to_string(), v.value().len()));
        }
    }
    Ok(report)
}
