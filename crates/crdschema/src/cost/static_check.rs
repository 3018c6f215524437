//! The cost checks kube-apiserver makes when a CRD is written, and how it
//! words an estimate over a limit.

use super::bounds::{REQ, min_size, static_len};
use super::estimate::estimate;
use super::sizes::Sizes;
use crate::error::{FieldError, Reason};
use crate::limits::{STATIC_ESTIMATED_COST_LIMIT, STATIC_ESTIMATED_CRD_COST_LIMIT};
use crate::node::{Additional, Node, ROOT_PATH};
use crate::regexes::Table;

/// kube-apiserver's wording of an estimate over a limit.
pub(crate) fn cost_error_message(what: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_string()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{what} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}
/// The cost checks kube-apiserver makes when a CRD is written: each rule's
/// estimated cost times the number of times it may run per object, each
/// `messageExpression`'s estimated cost, and their total.
pub(crate) fn check_static(root: &Node, regexes: &Table) -> Vec<FieldError> {
    let mut check = StaticCheck {
        regexes,
        errs: Vec::new(),
        total: 0,
        most_expensive: Vec::new(),
    };
    check.node(root, ROOT_PATH, 1, true);
    let mut errs = check.errs;
    if check.total > STATIC_ESTIMATED_CRD_COST_LIMIT {
        for (path, _) in &check.most_expensive {
            errs.push(FieldError::new(
                path.clone(),
                Reason::FieldValueForbidden,
                "Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        errs.push(FieldError::new(
            ROOT_PATH,
            Reason::FieldValueForbidden,
            format!(
                "Forbidden: {}",
                cost_error_message(
                    "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                    check.total,
                    STATIC_ESTIMATED_CRD_COST_LIMIT,
                )
            ),
        ));
    }
    errs
}

struct StaticCheck<'r> {
    regexes: &'r Table,
    errs: Vec<FieldError>,
    total: u64,
    /// The (at most four) costliest expressions, each at least 1% of the
    /// schema's limit, which kube-apiserver names when the total is over.
    most_expensive: Vec<(String, u64)>,
}

impl StaticCheck<'_> {
    fn observe(&mut self, path: String, cost: u64) {
        self.total = self.total.saturating_add(cost);
        if cost < STATIC_ESTIMATED_CRD_COST_LIMIT / 100 {
            return;
        }
        self.most_expensive.push((path, cost));
        self.most_expensive
            .sort_by_key(|(_, cost)| std::cmp::Reverse(*cost));
        self.most_expensive.truncate(4);
    }

    fn limit(&mut self, path: &str, what: &str, cost: u64) {
        if cost > STATIC_ESTIMATED_COST_LIMIT {
            self.errs.push(FieldError::new(
                path,
                Reason::FieldValueForbidden,
                format!(
                    "Forbidden: {}",
                    cost_error_message(what, cost, STATIC_ESTIMATED_COST_LIMIT)
                ),
            ));
        }
    }

    /// `cardinality` is how many values of this node one object may hold.
    fn node(&mut self, n: &Node, path: &str, cardinality: u64, root: bool) {
        // No more values of a node fit in a request than its smallest
        // serialization allows, however the lists above it are bounded.
        let cardinality = cardinality.min(REQ / (min_size(n) + 1)).max(1);
        for (i, rule) in n.rules.iter().enumerate() {
            let rule_path = format!("{path}.x-kubernetes-validations[{i}]");
            let raw = estimate(&Sizes::Static, self.regexes, &rule.expr, n, root);
            let cost = raw.saturating_mul(cardinality);
            let at = format!("{rule_path}.rule");
            self.limit(&at, "estimated rule cost", cost);
            self.observe(at, cost);
            if let Some((_, m)) = &rule.message_expression {
                let cost = estimate(&Sizes::Static, self.regexes, m, n, root);
                let at = format!("{rule_path}.messageExpression");
                self.limit(&at, "estimated messageExpression cost", cost);
                self.observe(at, cost);
            }
        }
        for (name, child) in &n.properties {
            self.node(
                child,
                &format!("{path}.properties[{name}]"),
                cardinality,
                false,
            );
        }
        if let Some(items) = &n.items {
            let each = cardinality.saturating_mul(static_len(n));
            self.node(items, &format!("{path}.items"), each, false);
        }
        if let Additional::Schema(a) = &n.additional {
            let each = cardinality.saturating_mul(static_len(n));
            self.node(a, &format!("{path}.additionalProperties"), each, false);
        }
    }
}
