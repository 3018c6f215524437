//! How large and how deeply nested a stored object may be.

/// Largest stored object, as etcd's default request limit: one object can never crowd out the
/// watch history (8 MiB, counting both sides of a change).
pub const MAX_OBJECT_BYTES: usize = 1_572_864;

/// Deepest nesting an object's content may have (everything but `metadata.managedFields`),
/// checked after every transform (defaults, patches) before anything is stored.
pub const MAX_DEPTH: usize = 100;

/// Deepest nesting of a whole stored object: its field tracking (managedFields) mirrors the
/// content a few levels down. serde_json refuses to parse beyond 128 levels, so a deeper row
/// could be written but never read back; the margin covers the envelopes objects are served
/// in (lists, watch events, tables).
pub const MAX_STORED_DEPTH: usize = 120;
