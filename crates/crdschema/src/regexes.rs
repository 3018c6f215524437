//! Regular expressions of CEL rules (`matches`, `find`, `findAll`).
//!
//! The `regex` crate matches in linear time, but compiling a pattern can
//! take far longer than its length suggests: counted repetitions unroll
//! (`(\w{100}){100}` builds millions of states before the crate's size limit
//! stops it) and Unicode classes compile to large UTF-8 automata. cel's own
//! `matches` compiles the pattern on every call. So here:
//!
//! * patterns written as literals in a rule are compiled once, with the
//!   schema, and refused there if too costly;
//! * other patterns (taken from the object) are compiled at most once per
//!   validation, and their compilation is charged to the rule's cost as it
//!   runs, from the pattern's syntax tree, before compiling;
//! * matching is charged cel-go's string length times pattern size, the
//!   pattern's size counted with its repetitions unrolled.

use std::collections::HashMap;
use std::sync::Arc;

use cel::ExecutionError;
use regex::Regex;
use regex_syntax::hir::{Class, Hir, HirKind};

use crate::limits::{PER_CALL_LIMIT, STATIC_ESTIMATED_COST_LIMIT};

/// What compiling any pattern costs at least.
const COMPILE_BASE_COST: u64 = 256;
/// Compiled patterns kept per validation.
const CACHE_ENTRIES: usize = 1024;

/// A compiled pattern and its size (states, repetitions unrolled).
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub re: Arc<Regex>,
    pub states: u64,
}

/// The literal patterns of a schema's rules, compiled with it.
pub(crate) type Table = HashMap<String, Entry>;

struct Analysis {
    compile_cost: u64,
    states: u64,
}

pub(crate) fn invalid(pattern: &str, err: impl std::fmt::Display) -> String {
    format!("'{pattern}' not a valid regex:\n{err}")
}

/// What compiling `pattern` costs and how large it is, from its syntax
/// tree: about two cost units per automaton state, classes counted as the
/// UTF-8 sequences they compile to.
fn analyze(pattern: &str) -> Result<Analysis, String> {
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(pattern)
        .map_err(|e| invalid(pattern, e))?;
    let (weight, states) = measure(&hir);
    Ok(Analysis {
        compile_cost: COMPILE_BASE_COST
            .saturating_add(pattern.len() as u64)
            .saturating_add(weight.saturating_mul(2)),
        states,
    })
}

/// (automaton states with classes as UTF-8 sequences, states with each
/// class as one).
fn measure(h: &Hir) -> (u64, u64) {
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => (1, 1),
        HirKind::Literal(l) => (l.0.len() as u64, l.0.len() as u64),
        HirKind::Class(Class::Unicode(c)) => {
            let sequences: u64 = c
                .iter()
                .map(|r| {
                    regex_syntax::utf8::Utf8Sequences::new(r.start(), r.end())
                        .map(|s| s.len() as u64)
                        .sum::<u64>()
                })
                .sum();
            (1 + sequences, 1)
        }
        HirKind::Class(Class::Bytes(c)) => (1 + c.iter().count() as u64, 1),
        HirKind::Repetition(r) => {
            let copies = u64::from(r.max.unwrap_or(r.min.saturating_add(1)).max(1));
            let (w, s) = measure(&r.sub);
            (w.saturating_mul(copies), s.saturating_mul(copies))
        }
        HirKind::Capture(c) => measure(&c.sub),
        HirKind::Concat(subs) | HirKind::Alternation(subs) => {
            subs.iter().fold((1, 1), |(w, s), sub| {
                let (sw, ss) = measure(sub);
                (w.saturating_add(sw), s.saturating_add(ss))
            })
        }
    }
}

/// cel-go's cost of matching a string of `len` bytes against a pattern of
/// `size` (in pattern characters, or here states).
pub(crate) fn match_cost(len: u64, size: u64) -> u64 {
    (len + 1).div_ceil(10).saturating_mul(size.div_ceil(4))
}

/// Why a literal pattern was refused.
pub(crate) enum LiteralError {
    Invalid(String),
    TooComplex(String),
}

/// Collects and compiles the literal patterns of a schema's rules.
pub(crate) struct Literals {
    pub table: Table,
    spent: u64,
    pub enforce: bool,
}

impl Literals {
    /// `enforce`: refuse patterns too costly to compile (when a CRD is
    /// written; not when a stored one is loaded).
    pub(crate) fn new(enforce: bool) -> Literals {
        Literals {
            table: Table::new(),
            spent: 0,
            enforce,
        }
    }

    pub(crate) fn add(&mut self, pattern: &str) -> Result<(), LiteralError> {
        if self.table.contains_key(pattern) {
            return Ok(());
        }
        let a = analyze(pattern).map_err(LiteralError::Invalid)?;
        if self.enforce {
            if a.compile_cost > PER_CALL_LIMIT {
                return Err(LiteralError::TooComplex(format!(
                    "regular expression '{pattern}' is too complex: its estimated compilation cost {} exceeds the limit of {PER_CALL_LIMIT}",
                    a.compile_cost
                )));
            }
            if self.spent.saturating_add(a.compile_cost) > STATIC_ESTIMATED_COST_LIMIT {
                return Err(LiteralError::TooComplex(format!(
                    "regular expression '{pattern}' is too complex: the estimated compilation cost of the schema's regular expressions exceeds the limit of {STATIC_ESTIMATED_COST_LIMIT}"
                )));
            }
        }
        self.spent = self.spent.saturating_add(a.compile_cost);
        let re = Regex::new(pattern).map_err(|e| LiteralError::Invalid(invalid(pattern, e)))?;
        self.table.insert(
            pattern.to_string(),
            Entry {
                re: Arc::new(re),
                states: a.states,
            },
        );
        Ok(())
    }
}

/// The patterns rules use while one object is validated, and what
/// compiling and matching those that are not literals costs, charged to
/// the rule being evaluated.
pub(crate) struct Meter {
    literals: Arc<Table>,
    cache: HashMap<String, Result<Entry, String>>,
    allowance: u64,
    spent: u64,
    exceeded: bool,
}

impl Meter {
    pub(crate) fn new(literals: Arc<Table>) -> Meter {
        Meter {
            literals,
            cache: HashMap::new(),
            allowance: 0,
            spent: 0,
            exceeded: false,
        }
    }

    /// Starts metering an evaluation that may spend `allowance`.
    pub(crate) fn begin(&mut self, allowance: u64) {
        self.allowance = allowance;
        self.spent = 0;
        self.exceeded = false;
    }

    /// What the evaluation spent, and whether it wanted more than allowed.
    pub(crate) fn end(&mut self) -> (u64, bool) {
        let outcome = (self.spent, self.exceeded);
        self.allowance = 0;
        self.spent = 0;
        self.exceeded = false;
        outcome
    }

    fn charge(&mut self, function: &str, cost: u64) -> Result<(), ExecutionError> {
        let left = self.allowance.saturating_sub(self.spent);
        if cost > left {
            self.exceeded = true;
            return Err(ExecutionError::function_error(
                function,
                "operation cancelled: actual cost limit exceeded",
            ));
        }
        self.spent += cost;
        Ok(())
    }

    /// The compiled `pattern`, to search `haystack_len` bytes with; what
    /// the rule's estimate could not know (the pattern was not a literal)
    /// is charged now.
    pub(crate) fn regex(
        &mut self,
        function: &str,
        pattern: &str,
        haystack_len: usize,
    ) -> Result<Arc<Regex>, ExecutionError> {
        if let Some(e) = self.literals.get(pattern) {
            return Ok(Arc::clone(&e.re));
        }
        let entry = match self.cache.get(pattern) {
            Some(Ok(e)) => e.clone(),
            Some(Err(msg)) => return Err(ExecutionError::function_error(function, msg)),
            None => {
                // Parsing is linear in the pattern; charge it before.
                self.charge(function, COMPILE_BASE_COST + pattern.len() as u64)?;
                let compiled = analyze(pattern).and_then(|a| {
                    self.charge(
                        function,
                        a.compile_cost - COMPILE_BASE_COST - pattern.len() as u64,
                    )
                    .map_err(|_| String::new())?;
                    Regex::new(pattern)
                        .map(|re| Entry {
                            re: Arc::new(re),
                            states: a.states,
                        })
                        .map_err(|e| invalid(pattern, e))
                });
                if self.exceeded {
                    return Err(ExecutionError::function_error(
                        function,
                        "operation cancelled: actual cost limit exceeded",
                    ));
                }
                if self.cache.len() >= CACHE_ENTRIES {
                    self.cache.clear();
                }
                self.cache.insert(pattern.to_string(), compiled.clone());
                compiled.map_err(|msg| ExecutionError::function_error(function, msg))?
            }
        };
        // The estimate charged the pattern's length; a pattern with
        // repetitions is larger than that.
        let len = haystack_len as u64;
        let excess =
            match_cost(len, entry.states).saturating_sub(match_cost(len, pattern.len() as u64));
        self.charge(function, excess)?;
        Ok(entry.re)
    }
}
