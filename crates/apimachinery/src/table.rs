//! meta.k8s.io/v1 Table rendering for `kubectl get`.

use serde_json::Value;
use std::time::SystemTime;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: Option<String>,
    pub description: Option<String>,
    pub json_path: String,
    pub priority: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum IncludeObject {
    None,
    #[default]
    Metadata,
    Object,
}

pub fn columns_for_builtin(kind: &str) -> Vec<PrinterColumn> {
    let _ = kind;
    Vec::new()
}

pub fn to_table(
    objects: &[Value],
    columns: &[PrinterColumn],
    include_object: IncludeObject,
    now: SystemTime,
    list_meta: Value,
) -> Value {
    let _ = (objects, columns, include_object, now, list_meta);
    todo!()
}

pub fn jsonpath_get(obj: &Value, path: &str) -> Option<Value> {
    let _ = (obj, path);
    None
}
