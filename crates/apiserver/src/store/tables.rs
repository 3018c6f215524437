//! The redb tables: objects by `resource/namespace/name`, and the revision counter.

use redb::TableDefinition;

pub(super) const OBJECTS: TableDefinition<&str, &[u8]> = TableDefinition::new("objects");
pub(super) const META: TableDefinition<&str, u64> = TableDefinition::new("meta");
pub(super) const REVISION: &str = "revision";
/// Room checks after a failed commit; empty otherwise.
pub(super) const PROBE: TableDefinition<&str, &[u8]> = TableDefinition::new("probe");
