//! Turns an `openAPIV3Schema` JSON document into a [`Node`] tree, checking
//! the structural-schema rules kube-apiserver enforces on CRDs.

// Bottom up: the compile context and keyword readers; the checks made
// across keywords and nodes; compiling one node, keyword group by keyword
// group; and the root, which runs it all.
mod checks;
mod ctx;
mod keywords;
mod root;

pub(crate) use root::compile_root;
