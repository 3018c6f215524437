//! Turns an `openAPIV3Schema` JSON document into a
//! [`Node`](crate::node::Node) tree, checking the structural-schema rules
//! kube-apiserver enforces on CRDs.

// Bottom up; each imports only the ones above it: the compile context and
// keyword readers; the checks made across keywords and nodes; compiling
// one node, keyword group by keyword group; and the root, which runs it all.
mod context;

mod checks;

mod keywords;

mod root;

pub(crate) use root::compile_root;
