//! meta.k8s.io/v1 Table rendering for `kubectl get`, following the
//! kube-apiserver printers for built-in kinds and the CRD table convertor
//! for additionalPrinterColumns.
//!
//! The parts, each using only those listed before it: `timestamps` (RFC 3339
//! and kubectl-style ages), `jsonpath` (the printer-column JSONPath subset),
//! `columns` (which columns a kind or CRD version has), `cells` (one cell of
//! one object) and `render` (the Table itself).

mod cells;
mod columns;
mod jsonpath;
mod render;
mod timestamps;

pub use columns::{PrinterColumn, columns_for_builtin, columns_for_crd};
pub use jsonpath::jsonpath_get;
pub use render::{IncludeObject, partial_object_metadata, to_table};
pub use timestamps::{format_rfc3339, human_duration, parse_rfc3339};

#[cfg(test)]
mod tests;
