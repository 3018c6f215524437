//! Pure Kubernetes API machinery, with no I/O: label and field selectors, merge/JSON/strategic-merge patches, server-side apply, Table rendering, OpenAPI documents.
