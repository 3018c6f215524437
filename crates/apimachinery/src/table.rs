//! meta.k8s.io/v1 Table rendering for `kubectl get`, following the
//! kube-apiserver printers for built-in kinds and the CRD table convertor
//! for additionalPrinterColumns.

use serde_json::{Map, Value, json};
use std::time::{SystemTime, UNIX_EPOCH};

/// One column of a Table. `json_path` is evaluated with [`jsonpath_get`];
/// built-in columns whose cells are computed (ages, counts, event summaries)
/// use a `#`-prefixed name instead of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: Option<String>,
    pub description: Option<String>,
    pub json_path: String,
    pub priority: i32,
}

impl PrinterColumn {
    fn new(name: &str, type_: &str, json_path: &str, description: &str) -> Self {
        Self {
            name: name.into(),
            type_: type_.into(),
            format: None,
            description: Some(description.into()),
            json_path: json_path.into(),
            priority: 0,
        }
    }
    fn with_format(mut self, f: &str) -> Self {
        self.format = Some(f.into());
        self
    }
    fn with_priority(mut self, p: i32) -> Self {
        self.priority = p;
        self
    }
}

/// What each row's `object` carries (the `includeObject` query parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query value; unknown values yield `None`.
    pub fn from_query(s: &str) -> Option<Self> {
        match s {
            "None" => Some(Self::None),
            "Metadata" => Some(Self::Metadata),
            "Object" => Some(Self::Object),
            _ => None,
        }
    }
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

const AGE: &str = "#age";
const DATA_COUNT: &str = "#dataCount";
const CREATED_AT: &str = "#createdAt";
const EVENT_LAST_SEEN: &str = "#eventLastSeen";
const EVENT_FIRST_SEEN: &str = "#eventFirstSeen";
const EVENT_OBJECT: &str = "#eventObject";
const EVENT_SOURCE: &str = "#eventSource";
const EVENT_COUNT: &str = "#eventCount";
const EVENT_MESSAGE: &str = "#eventMessage";
const EVENT_SUBOBJECT: &str = "#eventSubobject";

fn name_column() -> PrinterColumn {
    PrinterColumn::new("Name", "string", ".metadata.name", NAME_DESC).with_format("name")
}

fn age_column() -> PrinterColumn {
    PrinterColumn::new("Age", "string", AGE, AGE_DESC)
}

/// The columns kube-apiserver prints for the built-in kinds this server has.
pub fn columns_for_builtin(kind: &str) -> Vec<PrinterColumn> {
    match kind {
        "Namespace" => vec![
            name_column(),
            PrinterColumn::new(
                "Status",
                "string",
                ".status.phase",
                "The status of the namespace",
            ),
            age_column(),
        ],
        "Secret" => vec![
            name_column(),
            PrinterColumn::new("Type", "string", ".type", "The type of the secret"),
            PrinterColumn::new(
                "Data",
                "string",
                DATA_COUNT,
                "The number of entries in the secret",
            ),
            age_column(),
        ],
        "ConfigMap" => vec![
            name_column(),
            PrinterColumn::new(
                "Data",
                "string",
                DATA_COUNT,
                "Number of data in the configmap",
            ),
            age_column(),
        ],
        "Event" => vec![
            PrinterColumn::new(
                "Last Seen",
                "string",
                EVENT_LAST_SEEN,
                "The time since the event was last seen",
            ),
            PrinterColumn::new(
                "Type",
                "string",
                ".type",
                "The type of the event (Normal, Warning)",
            ),
            PrinterColumn::new("Reason", "string", ".reason", "The reason for the event"),
            PrinterColumn::new(
                "Object",
                "string",
                EVENT_OBJECT,
                "The object the event is about",
            ),
            PrinterColumn::new(
                "Subobject",
                "string",
                EVENT_SUBOBJECT,
                "The subobject the event is about",
            )
            .with_priority(1),
            PrinterColumn::new(
                "Source",
                "string",
                EVENT_SOURCE,
                "The component reporting the event",
            )
            .with_priority(1),
            PrinterColumn::new(
                "Message",
                "string",
                EVENT_MESSAGE,
                "A human-readable description of the event",
            ),
            PrinterColumn::new(
                "First Seen",
                "string",
                EVENT_FIRST_SEEN,
                "The time since the event was first seen",
            )
            .with_priority(1),
            PrinterColumn::new(
                "Count",
                "string",
                EVENT_COUNT,
                "The number of times the event has occurred",
            )
            .with_priority(1),
            PrinterColumn::new("Name", "string", ".metadata.name", "The name of the event")
                .with_priority(1),
        ],
        "Lease" => vec![
            name_column(),
            PrinterColumn::new(
                "Holder",
                "string",
                ".spec.holderIdentity",
                "The holder of the lease",
            ),
            age_column(),
        ],
        "CustomResourceDefinition" => vec![
            name_column(),
            PrinterColumn::new("Created At", "date", CREATED_AT, AGE_DESC),
        ],
        _ => vec![name_column(), age_column()],
    }
}

/// Columns for a custom resource version, as kube-apiserver builds them: a
/// Name column first, then the version's `additionalPrinterColumns`, which
/// default to a single Age column when the list is empty or absent.
pub fn columns_for_crd(additional_printer_columns: &Value) -> Vec<PrinterColumn> {
    let mut out = vec![name_column()];
    let defs = additional_printer_columns
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default();
    for c in defs {
        let (Some(name), Some(path)) = (
            c.get("name").and_then(Value::as_str),
            c.get("jsonPath").and_then(Value::as_str),
        ) else {
            continue;
        };
        let description = match c.get("description").and_then(Value::as_str) {
            Some(d) if !d.is_empty() => d.to_string(),
            _ => format!("Custom resource definition column (in JSONPath format): {path}"),
        };
        out.push(PrinterColumn {
            name: name.into(),
            type_: c
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("string")
                .into(),
            format: c
                .get("format")
                .and_then(Value::as_str)
                .filter(|f| !f.is_empty())
                .map(str::to_string),
            description: Some(description),
            json_path: path.into(),
            priority: c
                .get("priority")
                .and_then(Value::as_i64)
                .and_then(|p| i32::try_from(p).ok())
                .unwrap_or(0),
        });
    }
    if out.len() == 1 {
        out.push(PrinterColumn::new(
            "Age",
            "date",
            ".metadata.creationTimestamp",
            AGE_DESC,
        ));
    }
    out
}

/// Builds a meta.k8s.io/v1 Table of `objects`.
pub fn to_table(
    objects: &[Value],
    columns: &[PrinterColumn],
    include_object: IncludeObject,
    now: SystemTime,
    list_meta: Value,
) -> Value {
    let now = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let defs: Vec<Value> = columns
        .iter()
        .map(|c| {
            json!({
                "name": c.name,
                "type": c.type_,
                "format": c.format.clone().unwrap_or_default(),
                "description": c.description.clone().unwrap_or_default(),
                "priority": c.priority,
            })
        })
        .collect();
    let rows: Vec<Value> = objects
        .iter()
        .map(|obj| {
            let cells: Vec<Value> = columns.iter().map(|c| cell(obj, c, now)).collect();
            let object = match include_object {
                IncludeObject::None => Value::Null,
                IncludeObject::Metadata => partial_object_metadata(obj),
                IncludeObject::Object => obj.clone(),
            };
            json!({"cells": cells, "object": object})
        })
        .collect();
    let list_meta = if list_meta.is_object() {
        list_meta
    } else {
        Value::Object(Map::new())
    };
    json!({
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": defs,
        "rows": rows,
    })
}

/// The object as a meta.k8s.io/v1 PartialObjectMetadata.
pub fn partial_object_metadata(obj: &Value) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata").cloned().unwrap_or_else(|| json!({})),
    })
}

fn str_at<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// "<unknown>" for a missing timestamp, as translateTimestampSince does.
fn since(ts: &str, now: i64) -> String {
    if ts.is_empty() {
        return "<unknown>".into();
    }
    match parse_rfc3339(ts) {
        Some(t) => human_duration(now - t),
        None => "<invalid>".into(),
    }
}

fn cell(obj: &Value, col: &PrinterColumn, now: i64) -> Value {
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

/// Renders a duration in seconds like kubectl's `HumanDuration`.
pub fn human_duration(seconds: i64) -> String {
    if seconds < -1 {
        return "<invalid>".into();
    }
    if seconds < 0 {
        return "0s".into();
    }
    if seconds < 120 {
        return format!("{seconds}s");
    }
    let minutes = seconds / 60;
    if minutes < 10 {
        let s = seconds % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = seconds / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Parses an RFC 3339 timestamp to Unix seconds (fractions are dropped).
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = s.get(r)?;
        if part.bytes().all(|c| c.is_ascii_digit()) {
            part.parse().ok()
        } else {
            None
        }
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
    }
    let offset = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(sign @ (b'+' | b'-')) if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let o = oh * 3600 + om * 60;
            if *sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    Some(days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se - offset)
}

/// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`.
pub fn format_rfc3339(t: i64) -> String {
    let days = t.div_euclid(86400);
    let secs = t.rem_euclid(86400);
    // Inverse of days_from_civil.
    let z = days + 719468;
    let era = if z >= 0 { z } else { z - 146096 } / 146097;
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + if m <= 2 { 1 } else { 0 };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(i64),
    Wildcard,
    Filter {
        lhs: Vec<Step>,
        op: Option<(bool, Value)>,
    },
}

/// Splits `s` at the first top-level `]` (outside quotes).
fn bracket_end(s: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '[' | '(') => depth += 1,
            (None, ')') => depth = depth.saturating_sub(1),
            (None, ']') if depth == 0 => return Some(i),
            (None, ']') => depth -= 1,
            _ => {}
        }
    }
    None
}

fn unquote(s: &str) -> Option<String> {
    let s = s.trim();
    let b = s.as_bytes();
    if b.len() >= 2 && (b[0] == b'\'' || b[0] == b'"') && b[b.len() - 1] == b[0] {
        Some(s[1..s.len() - 1].to_string())
    } else {
        None
    }
}

fn parse_steps(mut s: &str) -> Option<Vec<Step>> {
    let mut steps = Vec::new();
    s = s.strip_prefix('$').unwrap_or(s);
    while !s.is_empty() {
        if let Some(rest) = s.strip_prefix('.') {
            if rest.starts_with('.') {
                // Recursive descent is outside the printer-column subset.
                return None;
            }
            let mut name = String::new();
            let mut end = rest.len();
            let mut chars = rest.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, e)) = chars.next() {
                            name.push(e);
                        }
                    }
                    '.' | '[' => {
                        end = i;
                        break;
                    }
                    _ => name.push(c),
                }
            }
            if name == "*" {
                steps.push(Step::Wildcard);
            } else if !name.is_empty() {
                steps.push(Step::Field(name));
            }
            s = &rest[end..];
        } else if let Some(rest) = s.strip_prefix('[') {
            let end = bracket_end(rest)?;
            let inner = rest[..end].trim();
            s = &rest[end + 1..];
            if inner == "*" {
                steps.push(Step::Wildcard);
            } else if let Some(f) = unquote(inner) {
                steps.push(Step::Field(f));
            } else if let Ok(i) = inner.parse::<i64>() {
                steps.push(Step::Index(i));
            } else if let Some(expr) = inner.strip_prefix("?(").and_then(|e| e.strip_suffix(')')) {
                steps.push(parse_filter(expr.trim())?);
            } else {
                return None;
            }
        } else {
            // A bare leading name, as in "metadata.name".
            let end = s.find(['.', '[']).unwrap_or(s.len());
            steps.push(Step::Field(s[..end].to_string()));
            s = &s[end..];
        }
    }
    Some(steps)
}

fn parse_filter(expr: &str) -> Option<Step> {
    let (lhs, op) = if let Some(i) = expr.find("==") {
        (&expr[..i], Some((false, &expr[i + 2..])))
    } else if let Some(i) = expr.find("!=") {
        (&expr[..i], Some((true, &expr[i + 2..])))
    } else {
        (expr, None)
    };
    let lhs = lhs.trim().strip_prefix('@')?;
    let lhs = parse_steps(lhs)?;
    let op = match op {
        None => None,
        Some((neg, rhs)) => {
            let rhs = rhs.trim();
            let value = match unquote(rhs) {
                Some(s) => Value::String(s),
                None => serde_json::from_str(rhs).ok()?,
            };
            Some((neg, value))
        }
    };
    Some(Step::Filter { lhs, op })
}

fn eval<'a>(cur: Vec<&'a Value>, steps: &[Step]) -> Vec<&'a Value> {
    let mut cur = cur;
    for step in steps {
        let mut next = Vec::new();
        for v in cur {
            match step {
                Step::Field(f) => next.extend(v.get(f.as_str())),
                Step::Index(i) => {
                    if let Value::Array(a) = v {
                        let idx = if *i < 0 { a.len() as i64 + i } else { *i };
                        if let Ok(idx) = usize::try_from(idx) {
                            next.extend(a.get(idx));
                        }
                    }
                }
                Step::Wildcard => match v {
                    Value::Array(a) => next.extend(a.iter()),
                    Value::Object(m) => next.extend(m.values()),
                    _ => {}
                },
                Step::Filter { lhs, op } => {
                    let items: Vec<&Value> = match v {
                        Value::Array(a) => a.iter().collect(),
                        other => vec![other],
                    };
                    for item in items {
                        let got = eval(vec![item], lhs);
                        let keep = match op {
                            None => !got.is_empty(),
                            Some((neg, want)) => got.contains(&want) != *neg,
                        };
                        if keep {
                            next.push(item);
                        }
                    }
                }
            }
        }
        cur = next;
    }
    cur
}

/// Evaluates the simple JSONPath subset used by printer columns and returns
/// the first match: `.a.b`, `['key']`, `[0]`, `[*]`, `[?(@.type=="Ready")]`,
/// optionally wrapped in `{}`. Unsupported syntax yields `None`.
pub fn jsonpath_get(obj: &Value, path: &str) -> Option<Value> {
    let mut p = path.trim();
    if let Some(inner) = p.strip_prefix('{').and_then(|x| x.strip_suffix('}')) {
        p = inner.trim();
    }
    if p.is_empty() {
        return Some(obj.clone());
    }
    let steps = parse_steps(p)?;
    eval(vec![obj], &steps).first().map(|v| (*v).clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn at(ts: &str) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(parse_rfc3339(ts).unwrap() as u64)
    }

    #[test]
    fn human_durations() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (5, "5s"),
            (119, "119s"),
            (120, "2m"),
            (182, "3m2s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (4 * 3600 + 30 * 60, "4h30m"),
            (10 * 3600, "10h"),
            (47 * 3600, "47h"),
            (2 * 86400, "2d"),
            (3 * 86400 + 5 * 3600, "3d5h"),
            (30 * 86400, "30d"),
            (3 * 365 * 86400, "3y"),
            (3 * 365 * 86400 + 10 * 86400, "3y10d"),
            (9 * 365 * 86400, "9y"),
        ];
        for (secs, want) in cases {
            assert_eq!(human_duration(secs), want, "{secs}s");
        }
    }

    #[test]
    fn rfc3339_round_trip() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(parse_rfc3339("2024-02-29T12:00:00Z"), Some(1709208000));
        assert_eq!(parse_rfc3339("2024-02-29T14:00:00+02:00"), Some(1709208000));
        assert_eq!(
            parse_rfc3339("2024-02-29T12:00:00.123456Z"),
            Some(1709208000)
        );
        assert_eq!(format_rfc3339(1709208000), "2024-02-29T12:00:00Z");
        for bad in [
            "",
            "2024-02-29",
            "2024-13-01T00:00:00Z",
            "2024-02-29T12:00:00",
            "x024-02-29T12:00:00Z",
            "2024-02-29T12:00:00.Z",
            "2024-02-29T12:00:00Zjunk",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn jsonpath_subset() {
        let obj = json!({
            "metadata": {"name": "h1", "annotations": {"x": "1", "a.b/c": "2"}},
            "spec": {"consumerRef": {"name": "m1"}, "list": [1, 2, 3]},
            "status": {
                "provisioning": {"state": "available"},
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {"type": "Other", "status": "False"}
                ]
            }
        });
        let cases = [
            (".status.provisioning.state", Some(json!("available"))),
            ("{.status.provisioning.state}", Some(json!("available"))),
            (".spec.consumerRef.name", Some(json!("m1"))),
            ("metadata.name", Some(json!("h1"))),
            ("$.metadata.name", Some(json!("h1"))),
            (".metadata.annotations['x']", Some(json!("1"))),
            (".metadata.annotations[\"a.b/c\"]", Some(json!("2"))),
            (".metadata.annotations.a\\.b/c", Some(json!("2"))),
            (
                ".status.conditions[?(@.type==\"Ready\")].status",
                Some(json!("True")),
            ),
            (
                ".status.conditions[?(@.type=='Other')].status",
                Some(json!("False")),
            ),
            (
                ".status.conditions[?(@.type!='Ready')].type",
                Some(json!("Other")),
            ),
            (".status.conditions[?(@.type=='Nope')].status", None),
            (".status.conditions[?(@.status)].type", Some(json!("Ready"))),
            (".spec.list[1]", Some(json!(2))),
            (".spec.list[-1]", Some(json!(3))),
            (".spec.list[*]", Some(json!(1))),
            (".spec.list[9]", None),
            (".spec.missing.deeper", None),
            (
                ".spec",
                Some(json!({"consumerRef": {"name": "m1"}, "list": [1, 2, 3]})),
            ),
            ("..name", None),
            (".spec.list[", None),
            (".spec.list[abc]", None),
        ];
        for (path, want) in cases {
            assert_eq!(jsonpath_get(&obj, path), want, "{path}");
        }
    }

    fn obj(kind: &str, name: &str, created: &str, extra: Value) -> Value {
        let mut o = json!({"kind": kind, "apiVersion": "v1",
            "metadata": {"name": name, "creationTimestamp": created, "uid": "u1"}});
        merge(&mut o, extra);
        o
    }

    fn merge(o: &mut Value, extra: Value) {
        crate::patch::merge_patch(o, &extra);
    }

    fn cells(t: &Value) -> Vec<Value> {
        t["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["cells"].clone())
            .collect()
    }

    #[test]
    fn builtin_tables() {
        let now = at("2024-01-01T01:00:00Z");
        let ns = obj(
            "Namespace",
            "default",
            "2024-01-01T00:59:55Z",
            json!({"status": {"phase": "Active"}}),
        );
        let t = to_table(
            std::slice::from_ref(&ns),
            &columns_for_builtin("Namespace"),
            IncludeObject::Metadata,
            now,
            json!({"resourceVersion": "7"}),
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(t["metadata"], json!({"resourceVersion": "7"}));
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Status", "Age"]);
        assert_eq!(t["columnDefinitions"][0]["format"], "name");
        assert_eq!(cells(&t), vec![json!(["default", "Active", "5s"])]);
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["name"], "default");
        assert!(t["rows"][0]["object"].get("status").is_none());

        let secret = obj(
            "Secret",
            "s",
            "2024-01-01T00:56:58Z",
            json!({"type": "Opaque", "data": {"a": "", "b": ""}}),
        );
        let t = to_table(
            &[secret],
            &columns_for_builtin("Secret"),
            IncludeObject::None,
            now,
            Value::Null,
        );
        assert_eq!(cells(&t), vec![json!(["s", "Opaque", 2, "3m2s"])]);
        assert_eq!(t["rows"][0]["object"], Value::Null);
        assert_eq!(t["metadata"], json!({}));

        let cm = obj(
            "ConfigMap",
            "c",
            "2023-12-30T01:00:00Z",
            json!({"data": {"a": "1"}, "binaryData": {"b": ""}}),
        );
        let t = to_table(
            std::slice::from_ref(&cm),
            &columns_for_builtin("ConfigMap"),
            IncludeObject::Object,
            now,
            json!({}),
        );
        assert_eq!(cells(&t), vec![json!(["c", 2, "2d"])]);
        assert_eq!(t["rows"][0]["object"], cm);

        let lease = obj(
            "Lease",
            "l",
            "2023-12-31T21:00:00Z",
            json!({"spec": {"holderIdentity": "me"}}),
        );
        let t = to_table(
            &[lease],
            &columns_for_builtin("Lease"),
            IncludeObject::None,
            now,
            json!({}),
        );
        assert_eq!(cells(&t), vec![json!(["l", "me", "4h"])]);

        let crd = obj(
            "CustomResourceDefinition",
            "bmhs.metal3.io",
            "2023-12-31T21:00:00.5Z",
            json!({}),
        );
        let t = to_table(
            &[crd],
            &columns_for_builtin("CustomResourceDefinition"),
            IncludeObject::None,
            now,
            json!({}),
        );
        assert_eq!(
            cells(&t),
            vec![json!(["bmhs.metal3.io", "2023-12-31T21:00:00Z"])]
        );

        let other = obj("Widget", "w", "", json!({}));
        let t = to_table(
            &[other],
            &columns_for_builtin("Widget"),
            IncludeObject::None,
            now,
            json!({}),
        );
        assert_eq!(cells(&t), vec![json!(["w", "<unknown>"])]);
    }

    #[test]
    fn event_table() {
        let now = at("2024-01-01T01:00:00Z");
        let ev = obj(
            "Event",
            "e1",
            "2024-01-01T00:00:00Z",
            json!({
                "type": "Warning", "reason": "Failed", "message": " boom \n",
                "involvedObject": {"kind": "BareMetalHost", "name": "h1", "fieldPath": "spec"},
                "source": {"component": "ctl", "host": "node1"},
                "firstTimestamp": "2024-01-01T00:50:00Z", "lastTimestamp": "2024-01-01T00:59:00Z",
                "count": 3
            }),
        );
        let cols = columns_for_builtin("Event");
        let t = to_table(&[ev], &cols, IncludeObject::None, now, json!({}));
        let c = &cells(&t)[0];
        assert_eq!(c[0], "60s");
        assert_eq!(c[1], "Warning");
        assert_eq!(c[3], "baremetalhost/h1");
        assert_eq!(c[4], "spec");
        assert_eq!(c[5], "ctl, node1");
        assert_eq!(c[6], "boom");
        assert_eq!(c[7], "10m");
        assert_eq!(c[8], 3);
        assert_eq!(c[9], "e1");
        // events.k8s.io shape: eventTime, series, regarding, reportingController.
        let ev2 = obj(
            "Event",
            "e2",
            "2024-01-01T00:00:00Z",
            json!({
                "eventTime": "2024-01-01T00:58:00.000000Z",
                "series": {"count": 4, "lastObservedTime": "2024-01-01T00:59:30.000000Z"},
                "regarding": {"kind": "Node", "fieldPath": "spec.x"}, "reportingController": "kubelet", "note": "n "
            }),
        );
        let t = to_table(&[ev2], &cols, IncludeObject::None, now, json!({}));
        let c = &cells(&t)[0];
        assert_eq!((c[4].clone(), c[6].clone()), (json!("spec.x"), json!("n")));
        assert_eq!(
            (
                c[0].clone(),
                c[3].clone(),
                c[5].clone(),
                c[7].clone(),
                c[8].clone()
            ),
            (
                json!("30s"),
                json!("node"),
                json!("kubelet"),
                json!("2m"),
                json!(4)
            )
        );
    }

    #[test]
    fn crd_columns_and_cells() {
        let cols = columns_for_crd(&json!([
            {"name": "State", "type": "string", "jsonPath": ".status.provisioning.state", "description": "Provisioning state"},
            {"name": "Consumer", "type": "string", "jsonPath": ".spec.consumerRef.name"},
            {"name": "Online", "type": "boolean", "jsonPath": ".spec.online"},
            {"name": "Count", "type": "integer", "jsonPath": ".spec.count", "priority": 1},
            {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]));
        assert_eq!(cols.len(), 8);
        assert_eq!(cols[0].name, "Name");
        assert_eq!(
            cols[2].description.as_deref(),
            Some("Custom resource definition column (in JSONPath format): .spec.consumerRef.name")
        );
        assert_eq!(cols[4].priority, 1);
        let now = at("2024-01-01T01:00:00Z");
        let host = json!({"metadata": {"name": "h1", "creationTimestamp": "2024-01-01T00:00:00Z"},
            "spec": {"online": true, "count": 2.0, "ratio": 1, "consumerRef": {"name": "m"}},
            "status": {"provisioning": {"state": "ready"}, "conditions": [{"type": "Ready", "status": "True"}]}});
        let t = to_table(&[host], &cols, IncludeObject::Metadata, now, json!({}));
        assert_eq!(
            cells(&t)[0],
            json!(["h1", "ready", "m", true, 2, 1.0, "True", "60m"])
        );
        let sparse = json!({"metadata": {"name": "h2", "creationTimestamp": "bad"}, "spec": {"online": "yes", "count": "x"}});
        let t = to_table(&[sparse], &cols, IncludeObject::None, now, json!({}));
        assert_eq!(
            cells(&t)[0],
            json!(["h2", null, null, null, null, null, null, "<invalid>"])
        );

        let cols = columns_for_crd(&Value::Null);
        assert_eq!(
            cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["Name", "Age"]
        );
        assert_eq!(cols[1].type_, "date");
        let cols = columns_for_crd(&json!([{"name": "State", "type": "string", "jsonPath": ".x"}]));
        assert_eq!(
            cols.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(),
            ["Name", "State"]
        );
    }

    #[test]
    fn garbage_objects_do_not_panic() {
        let now = SystemTime::now();
        for cols in [
            columns_for_builtin("Event"),
            columns_for_builtin("Secret"),
            columns_for_crd(&json!([{"name": "x", "type": "date", "jsonPath": ".a[?(@.b==1)]"}])),
        ] {
            let t = to_table(
                &[json!(null), json!([1]), json!("s"), json!({"metadata": 5})],
                &cols,
                IncludeObject::Metadata,
                now,
                json!([]),
            );
            assert_eq!(t["rows"].as_array().unwrap().len(), 4);
        }
    }
}
