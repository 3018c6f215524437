//! Server-side apply: [`apply`] and [`apply_with`], with their options and conflicts.

use serde_json::{Value, json};

use super::compare::{Comparison, compare, strip_server_fields, to_set};
use super::fieldset::{FieldSet, path_string};
use super::lists::{Strategy, default_strategy};
use super::managed_fields::{
    Entry, managed_fields_of, parse_entries, without_managed_fields, write_entries,
};
use super::merge::{drop_empty_meta_maps, remove_paths, ssa_merge};
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
/// `SetMerge` = set, `Replace`/None = atomic. See
/// [`schema_list_strategy`](super::schema_list_strategy).
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
    for e in &mut entries {
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
