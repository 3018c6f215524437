//! Non-apply writes recorded as `Update` entries: [`record_update`] and
//! [`record_update_with`].

use serde_json::{Value, json};

use super::compare::{Comparison, compare, strip_server_fields};
use super::lists::{Strategy, default_strategy};
use super::managed_fields::{Entry, managed_fields_of, parse_entries, write_entries};
use crate::patch::ListStrategy;

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
    let nothing = json!({});
    let old_obj = old.unwrap_or(&nothing);
    let old_mf = old.and_then(managed_fields_of);
    let mut entries = match managed_fields_of(new) {
        None | Some(Value::Null) => parse_entries(old_mf),
        Some(sent) if Some(sent) == old_mf => parse_entries(old_mf),
        Some(sent) => parse_entries(Some(sent)),
    };
    // Compared in place: `compare` passes over the managedFields themselves.
    let mut cmp = Comparison::default();
    compare(old_obj, new, "", strat, &mut cmp, &mut Vec::new());
    let changed = strip_server_fields(cmp.added.union(&cmp.modified));
    let removed = strip_server_fields(std::mem::take(&mut cmp.removed));
    for e in &mut entries {
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
    if let Some(Value::Object(m)) = new.get_mut("metadata") {
        m.remove("managedFields");
    }
    write_entries(new, entries);
}
