//! One cell: a column's JSONPath evaluated and typed, or a computed built-in cell
//! (ages, data counts, event summaries).

use serde_json::{Map, Value};

use super::columns::{
    AGE, CREATED_AT, DATA_COUNT, EVENT_COUNT, EVENT_FIRST_SEEN, EVENT_LAST_SEEN, EVENT_MESSAGE,
    EVENT_OBJECT, EVENT_SOURCE, EVENT_SUBOBJECT, PrinterColumn,
};
use super::jsonpath::jsonpath_get;
use super::timestamps::{format_rfc3339, human_duration, parse_rfc3339};

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// `"<unknown>"` for a missing timestamp, as translateTimestampSince does.
fn since(ts: &str, now: i64) -> String {
    if ts.is_empty() {
        return "<unknown>".into();
    }
    match parse_rfc3339(ts) {
        Some(t) => human_duration(now - t),
        None => "<invalid>".into(),
    }
}

pub(super) fn cell(obj: &Value, col: &PrinterColumn, now: i64) -> Value {
    match col.json_path.as_str() {
        AGE => return since(str_at(obj, "/metadata/creationTimestamp"), now).into(),
        CREATED_AT => {
            let ts = str_at(obj, "/metadata/creationTimestamp");
            // The default convertor prints the timestamp in RFC3339 UTC.
            return match parse_rfc3339(ts) {
                Some(t) => format_rfc3339(t).into(),
                None => Value::Null,
            };
        }
        DATA_COUNT => {
            let count = |k: &str| obj.get(k).and_then(Value::as_object).map_or(0, Map::len);
            return ((count("data") + count("binaryData")) as i64).into();
        }
        EVENT_SUBOBJECT => {
            // events.k8s.io/v1 calls involvedObject "regarding".
            let p = match str_at(obj, "/involvedObject/fieldPath") {
                "" => str_at(obj, "/regarding/fieldPath"),
                p => p,
            };
            return p.into();
        }
        EVENT_MESSAGE => {
            let m = obj.get("message").or_else(|| obj.get("note"));
            return m.and_then(Value::as_str).unwrap_or("").trim().into();
        }
        EVENT_LAST_SEEN | EVENT_FIRST_SEEN | EVENT_COUNT => return event_times(obj, col, now),
        EVENT_OBJECT => {
            let involved = obj
                .get("involvedObject")
                .or_else(|| obj.get("regarding"))
                .cloned()
                .unwrap_or(Value::Null);
            let kind = str_at(&involved, "/kind").to_lowercase();
            let name = str_at(&involved, "/name");
            return if name.is_empty() {
                kind
            } else {
                format!("{kind}/{name}")
            }
            .into();
        }
        EVENT_SOURCE => {
            let first = |a: &str, b: &str| {
                let a = str_at(obj, a);
                if a.is_empty() {
                    str_at(obj, b).to_string()
                } else {
                    a.to_string()
                }
            };
            let component = first("/source/component", "/reportingController");
            let host = first("/source/host", "/reportingInstance");
            return if host.is_empty() {
                component
            } else {
                format!("{component}, {host}")
            }
            .into();
        }
        _ => {}
    }
    let Some(v) = jsonpath_get(obj, &col.json_path) else {
        return Value::Null;
    };
    match col.type_.as_str() {
        "integer" => match &v {
            Value::Number(n) => n
                .as_i64()
                .or_else(|| n.as_f64().map(|f| f as i64))
                .map_or(Value::Null, Value::from),
            _ => Value::Null,
        },
        "number" => v.as_f64().map_or(Value::Null, Value::from),
        "boolean" => v.as_bool().map_or(Value::Null, Value::from),
        "date" => match &v {
            Value::String(s) => match parse_rfc3339(s) {
                Some(t) => human_duration(now - t).into(),
                None => "<invalid>".into(),
            },
            _ => Value::Null,
        },
        // "string" and unknown types print the value as text.
        _ => match v {
            Value::String(s) => s.into(),
            Value::Null => Value::Null,
            other => other.to_string().into(),
        },
    }
}

fn event_times(obj: &Value, col: &PrinterColumn, now: i64) -> Value {
    let first_ts = match str_at(obj, "/firstTimestamp") {
        "" => str_at(obj, "/deprecatedFirstTimestamp"),
        s => s,
    };
    let first = if first_ts.is_empty() {
        since(str_at(obj, "/eventTime"), now)
    } else {
        since(first_ts, now)
    };
    let last_ts = match str_at(obj, "/lastTimestamp") {
        "" => str_at(obj, "/deprecatedLastTimestamp"),
        s => s,
    };
    let mut last = if last_ts.is_empty() {
        first.clone()
    } else {
        since(last_ts, now)
    };
    let mut count = obj
        .get("count")
        .or_else(|| obj.get("deprecatedCount"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(series) = obj.get("series").filter(|s| s.is_object()) {
        last = since(str_at(series, "/lastObservedTime"), now);
        count = series.get("count").and_then(Value::as_i64).unwrap_or(0);
    } else if count == 0 {
        // Singleton events from the events.k8s.io API carry no count.
        count = 1;
    }
    match col.json_path.as_str() {
        EVENT_LAST_SEEN => last.into(),
        EVENT_FIRST_SEEN => first.into(),
        _ => count.into(),
    }
}
