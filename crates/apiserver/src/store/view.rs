//! [`View`]: what a writer decides against, the committed state with queued writes on top.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use super::state::State;
use super::stored::Stored;

/// (resource, namespace, name)
pub(super) type Key = (String, String, String);

/// What a writer decides against: the committed state with the queued changes on top. It
/// takes the state's read lock only for each lookup, never across a writer's decision, so a
/// slow writer cannot hold up the committer's publication and with it every reader.
///
/// Consistent without holding the lock: the committer publishes only keys that are still in
/// the overlay (it removes them under the writer lock, which the writer holds), so a key read
/// through the state is one no queued change touches.
pub struct View<'a> {
    pub(super) state: &'a RwLock<State>,
    pub(super) overlay: &'a HashMap<Key, (u64, Option<Arc<Stored>>)>,
}

impl View<'_> {
    pub(super) fn committed(&self) -> std::sync::RwLockReadGuard<'_, State> {
        self.state.read().expect("store lock")
    }

    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        if !self.overlay.is_empty()
            && let Some((_, v)) = self.overlay.get(&(
                resource.to_string(),
                namespace.to_string(),
                name.to_string(),
            ))
        {
            return v.clone();
        }
        self.committed().get(resource, namespace, name).cloned()
    }

    pub fn count(&self, resource: &str, namespace: Option<&str>) -> usize {
        let state = self.committed();
        let mut n = state.count(resource, namespace) as isize;
        for ((r, ns, name), (_, v)) in self.overlay {
            if r != resource || namespace.is_some_and(|want| want != ns) {
                continue;
            }
            match (state.get(r, ns, name).is_some(), v.is_some()) {
                (false, true) => n += 1,
                (true, false) => n -= 1,
                _ => {}
            }
        }
        n.max(0) as usize
    }

    /// Runs `f` over every (resource, object) pair (a quick scan: the read lock is held).
    pub fn with_all<T>(
        &self,
        f: impl FnOnce(&mut dyn Iterator<Item = (&str, &Arc<Stored>)>) -> T,
    ) -> T {
        let state = self.committed();
        let overlay = self.overlay;
        let committed = state.objects.iter().flat_map(move |(r, m)| {
            m.iter()
                .filter(move |((ns, name), _)| {
                    overlay.is_empty()
                        || !overlay.contains_key(&(r.clone(), ns.clone(), name.clone()))
                })
                .map(move |(_, v)| (r.as_str(), v))
        });
        let queued = overlay
            .iter()
            .filter_map(|((r, _, _), (_, v))| v.as_ref().map(|v| (r.as_str(), v)));
        f(&mut committed.chain(queued))
    }
}
