//! Kubernetes' CEL list, regex and URL library functions, which cel's
//! standard library lacks, and the context that offers them to rules.

use std::cmp::Ordering;
use std::sync::{Arc, Mutex, MutexGuard};

use cel::extractors::{Arguments, This};
use cel::{Context, Env, ExecutionError, Value};

use crate::formats;
use crate::regexes::Meter;

type Result<T> = std::result::Result<T, ExecutionError>;

/// The name `matches` calls are renamed to, so that they reach
/// [`matches()`] (which compiles each pattern once) instead of cel's own
/// (which compiles it on every call). Users cannot spell it.
pub(super) const MATCHES: &str = "@matches";

/// The context every rule of one validation runs under: the environment
/// plus the Kubernetes library functions cel's standard library lacks.
/// Its regular expression functions compile patterns through `meter`.
pub(super) fn root_context(env: &Arc<Env>, meter: &Arc<Mutex<Meter>>) -> Context<'static, 'static> {
    let mut ctx = Context::with_env(Arc::clone(env));
    // Names already declared by the environment cannot be added; rules
    // calling them then get the environment's version instead.
    let _ = ctx.add_function("isSorted", is_sorted);
    let _ = ctx.add_function("sum", sum);
    let _ = ctx.add_function("min", min);
    let _ = ctx.add_function("max", max);
    let m = Arc::clone(meter);
    let _ = ctx.add_function(
        MATCHES,
        move |This(s): This<Arc<String>>, pattern: Arc<String>| matches(&m, &s, &pattern),
    );
    let m = Arc::clone(meter);
    let _ = ctx.add_function(
        "find",
        move |This(s): This<Arc<String>>, pattern: Arc<String>| find(&m, &s, &pattern),
    );
    let m = Arc::clone(meter);
    let _ = ctx.add_function(
        "findAll",
        move |This(s): This<Arc<String>>, pattern: Arc<String>, Arguments(args): Arguments| {
            find_all(&m, &s, &pattern, &args)
        },
    );
    let _ = ctx.add_function("isURL", is_url);
    ctx
}

/// The meter the regular expression functions and the walker share; a
/// panic while it was held leaves it usable.
pub(super) fn lock(meter: &Mutex<Meter>) -> MutexGuard<'_, Meter> {
    meter
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn compare(name: &str, a: &Value, b: &Value) -> Result<Ordering> {
    a.partial_cmp(b).ok_or_else(|| {
        ExecutionError::function_error(name, format!("cannot compare {a:?} and {b:?}"))
    })
}

pub fn is_sorted(This(list): This<Arc<Vec<Value>>>) -> Result<bool> {
    for pair in list.windows(2) {
        if compare("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
            return Ok(false);
        }
    }
    Ok(true)
}

pub fn sum(This(list): This<Arc<Vec<Value>>>) -> Result<Value> {
    let mut acc = match list.first() {
        None | Some(Value::Int(_)) => Value::Int(0),
        Some(Value::UInt(_)) => Value::UInt(0),
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(other) => {
            return Err(ExecutionError::function_error(
                "sum",
                format!("cannot sum {other:?}"),
            ));
        }
    };
    for v in list.iter() {
        acc = match (&acc, v) {
            (Value::Int(a), Value::Int(b)) => Value::Int(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Value::UInt(a), Value::UInt(b)) => Value::UInt(
                a.checked_add(*b)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            _ => {
                return Err(ExecutionError::function_error(
                    "sum",
                    "list elements must all be of one numeric type",
                ));
            }
        };
    }
    Ok(acc)
}

fn extreme(name: &str, list: &[Value], keep: Ordering) -> Result<Value> {
    let Some(first) = list.first() else {
        return Err(ExecutionError::function_error(
            name,
            format!("{name} called on empty list"),
        ));
    };
    let mut best = first;
    for v in &list[1..] {
        if compare(name, v, best)? == keep {
            best = v;
        }
    }
    Ok(best.clone())
}

/// `list.min()`; called as a function, `min(a, b, ...)` or `min(list)`.
/// As a method, `This` is the list and there are no arguments; as a
/// function, `This` is the first argument, also found in `args`.
pub fn min(This(this): This<Value>, Arguments(args): Arguments) -> Result<Value> {
    let items = if args.is_empty() {
        flatten_args(std::slice::from_ref(&this))
    } else {
        flatten_args(&args)
    };
    extreme("min", &items, Ordering::Less)
}

pub fn max(This(this): This<Value>, Arguments(args): Arguments) -> Result<Value> {
    let items = if args.is_empty() {
        flatten_args(std::slice::from_ref(&this))
    } else {
        flatten_args(&args)
    };
    extreme("max", &items, Ordering::Greater)
}

fn flatten_args(args: &[Value]) -> Vec<Value> {
    match args {
        [Value::List(list)] => list.to_vec(),
        other => other.to_vec(),
    }
}

fn regex(meter: &Mutex<Meter>, name: &str, s: &str, pattern: &str) -> Result<Arc<regex::Regex>> {
    lock(meter).regex(name, pattern, s.len())
}

/// `s.matches(pattern)`, as cel's, but compiling each pattern once.
pub fn matches(meter: &Mutex<Meter>, s: &str, pattern: &str) -> Result<bool> {
    Ok(regex(meter, "matches", s, pattern)?.is_match(s))
}

/// The first match of a regex, or the empty string.
pub fn find(meter: &Mutex<Meter>, s: &str, pattern: &str) -> Result<Value> {
    let re = regex(meter, "find", s, pattern)?;
    Ok(Value::String(Arc::new(
        re.find(s)
            .map(|m| m.as_str().to_string())
            .unwrap_or_default(),
    )))
}

/// All matches of a regex, at most `limit` of them if given (negative: all).
pub fn find_all(meter: &Mutex<Meter>, s: &str, pattern: &str, args: &[Value]) -> Result<Value> {
    let re = regex(meter, "findAll", s, pattern)?;
    let limit = match args.get(1) {
        Some(Value::Int(n)) if *n >= 0 => usize::try_from(*n).unwrap_or(usize::MAX),
        _ => usize::MAX,
    };
    Ok(Value::List(Arc::new(
        re.find_iter(s)
            .take(limit)
            .map(|m| Value::String(Arc::new(m.as_str().to_string())))
            .collect(),
    )))
}

pub fn is_url(This(s): This<Arc<String>>) -> bool {
    formats::is_uri(&s)
}
