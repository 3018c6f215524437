//! ClusterRole aggregation (`aggregationRule.clusterRoleSelectors`), resolved once
//! when a policy is compiled.

use std::collections::{HashMap, HashSet};

use super::binding::Rules;
use super::parse::ParsedClusterRole;
use super::rule::PolicyRule;

/// The rules of each ClusterRole, with aggregation resolved to a fixpoint:
/// an aggregated role gets its own rules, then (per selector, roles sorted by
/// name, itself excluded) the effective rules of each matching role, which
/// are themselves aggregated (`admin` ← `edit` ← `view`), without duplicates.
pub(super) fn resolve_cluster_roles(parsed: &[ParsedClusterRole]) -> HashMap<String, Rules> {
    let mut by_name: Vec<usize> = (0..parsed.len()).collect();
    by_name.sort_by(|&a, &b| parsed[a].name.cmp(&parsed[b].name));
    let children: Vec<Vec<usize>> = parsed
        .iter()
        .enumerate()
        .map(|(i, cr)| match &cr.selectors {
            None => Vec::new(),
            Some(sels) => sels
                .iter()
                .flat_map(|sel| {
                    by_name
                        .iter()
                        .copied()
                        .filter(move |&j| j != i && sel.matches(&parsed[j].labels))
                })
                .collect(),
        })
        .collect();

    let mut out = HashMap::with_capacity(parsed.len());
    for (i, cr) in parsed.iter().enumerate() {
        if cr.selectors.is_none() {
            out.insert(cr.name.clone(), Rules::from(cr.rules.clone()));
            continue;
        }
        // Iterative pre-order DFS (no recursion: chains may be long).
        let mut rules = Vec::new();
        let mut seen_rules: HashSet<&PolicyRule> = HashSet::new();
        let mut visited = vec![false; parsed.len()];
        let mut stack = vec![i];
        while let Some(j) = stack.pop() {
            if std::mem::replace(&mut visited[j], true) {
                continue;
            }
            for r in &parsed[j].rules {
                if seen_rules.insert(r) {
                    rules.push(r.clone());
                }
            }
            stack.extend(children[j].iter().rev().copied().filter(|&k| !visited[k]));
        }
        out.insert(cr.name.clone(), Rules::from(rules));
    }
    out
}
