//! The columns of a Table: kube-apiserver's printers for the built-in kinds, and a
//! CRD version's `additionalPrinterColumns`.

use serde_json::Value;

/// One column of a Table. `json_path` is evaluated with [`jsonpath_get`](super::jsonpath_get);
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

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

// Computed cells: `json_path` names for the cells `cells` works out itself.
pub(super) const AGE: &str = "#age";
pub(super) const DATA_COUNT: &str = "#dataCount";
pub(super) const CREATED_AT: &str = "#createdAt";
pub(super) const EVENT_LAST_SEEN: &str = "#eventLastSeen";
pub(super) const EVENT_FIRST_SEEN: &str = "#eventFirstSeen";
pub(super) const EVENT_OBJECT: &str = "#eventObject";
pub(super) const EVENT_SOURCE: &str = "#eventSource";
pub(super) const EVENT_COUNT: &str = "#eventCount";
pub(super) const EVENT_MESSAGE: &str = "#eventMessage";
pub(super) const EVENT_SUBOBJECT: &str = "#eventSubobject";

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
