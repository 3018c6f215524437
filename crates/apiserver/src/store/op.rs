//! [`Op`]: a change a writer asks for.

use serde_json::Value;

/// A change to make in one transaction.
#[derive(Debug)]
pub enum Op {
    Put {
        resource: String,
        namespace: String,
        name: String,
        value: Value,
    },
    Delete {
        resource: String,
        namespace: String,
        name: String,
    },
}
