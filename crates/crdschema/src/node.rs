//! The compiled schema tree: one [`Node`] per schema object, with the CEL
//! [`Rule`]s it declares. Built by `compile`, only read by the steps
//! (defaulting, pruning, validation, rules, cost estimates), which is why
//! it sits below all of them.

use std::collections::BTreeMap;

use cel::common::ast::IdedExpr;
use regex::Regex;
use serde_json::Value;

use crate::error::Reason;

/// Where kube-apiserver reports schema errors of a CRD.
pub(crate) const ROOT_PATH: &str = "spec.validation.openAPIV3Schema";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Type {
    Object,
    Array,
    String,
    Integer,
    Number,
    Boolean,
}

impl Type {
    pub(crate) fn parse(s: &str) -> Option<Type> {
        Some(match s {
            "object" => Type::Object,
            "array" => Type::Array,
            "string" => Type::String,
            "integer" => Type::Integer,
            "number" => Type::Number,
            "boolean" => Type::Boolean,
            _ => return None,
        })
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Type::Object => "object",
            Type::Array => "array",
            Type::String => "string",
            Type::Integer => "integer",
            Type::Number => "number",
            Type::Boolean => "boolean",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ListType {
    Atomic,
    Set,
    Map,
}

#[derive(Debug, Default)]
pub(crate) enum Additional {
    /// Not specified: unknown fields are pruned, not rejected.
    #[default]
    Unspecified,
    Allowed(bool),
    Schema(Box<Node>),
}

/// What a node's rules read of its value (worked out by `rules::rule_reads`), so that only
/// that is converted for them.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) enum Reads {
    /// All of it: it is compared, passed to a function, iterated...
    #[default]
    Whole,
    /// Only whether it is there (`has(self.x)`, and `x` read no further).
    Presence,
    /// Only these fields of it, each as read.
    Fields(BTreeMap<String, Reads>),
}

/// One compiled schema node.
#[derive(Debug, Default)]
pub(crate) struct Node {
    pub ty: Option<Type>,
    pub nullable: bool,
    pub int_or_string: bool,
    pub preserve_unknown: bool,
    pub embedded: bool,
    pub format: Option<String>,
    pub default: Option<Value>,
    pub required: Vec<String>,
    pub enum_values: Option<Vec<Value>>,
    pub pattern: Option<(String, Regex)>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub exclusive_minimum: bool,
    pub exclusive_maximum: bool,
    pub multiple_of: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub unique_items: bool,
    pub min_properties: Option<u64>,
    pub max_properties: Option<u64>,
    pub items: Option<Box<Node>>,
    pub properties: BTreeMap<String, Node>,
    pub additional: Additional,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub list_type: Option<ListType>,
    pub list_map_keys: Vec<String>,
    pub rules: Vec<Rule>,
    /// What this node's rules read of its value (see `rules::rule_reads`).
    pub rule_reads: Reads,
    /// Whether any node below this one has CEL rules, so that validation
    /// can skip rule-free subtrees without searching them each time.
    pub rules_below: bool,
}

impl Node {
    /// The schema for a child field, from `properties` or `additionalProperties`.
    pub(crate) fn child(&self, name: &str) -> Option<&Node> {
        match self.properties.get(name) {
            Some(n) => Some(n),
            None => match &self.additional {
                Additional::Schema(n) => Some(n),
                _ => None,
            },
        }
    }

    /// Whether this node or any below it carries CEL rules.
    pub(crate) fn has_rules(&self) -> bool {
        !self.rules.is_empty() || self.rules_below
    }
}

/// One compiled `x-kubernetes-validations` rule, as its node holds it.
pub(crate) struct Rule {
    pub source: String,
    /// The rule as it runs: `matches` calls go to `rules::k8s::matches`.
    pub expr: IdedExpr,
    pub message: Option<String>,
    /// `messageExpression`, its source and how it runs.
    pub message_expression: Option<(String, IdedExpr)>,
    /// Field names from `fieldPath`, appended to the node's path.
    pub field_path: Vec<String>,
    pub reason: Reason,
    pub optional_old_self: bool,
    pub transition: bool,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("rule", &self.source)
            .finish_non_exhaustive()
    }
}
