//! How values are worded in error messages, as kube-apiserver words them.
//! A leaf module shared by every step that reports errors.

/// Formats a value as kube-apiserver does in `Invalid value: ...` bodies;
/// objects and arrays by their type only, which keeps messages short.
pub(crate) fn fmt_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => quote(s),
        serde_json::Value::Object(_) => quote("object"),
        serde_json::Value::Array(_) => quote("array"),
        other => other.to_string(),
    }
}

pub(crate) fn quote(s: &str) -> String {
    serde_json::Value::String(s.to_string()).to_string()
}

/// Formats a number as Go's `%v` does for a float64 holding it.
pub(crate) fn fmt_num(n: f64) -> String {
    if n.fract() == 0.0 && n.abs() < 1e15 {
        format!("{}", n as i64)
    } else {
        format!("{n}")
    }
}
