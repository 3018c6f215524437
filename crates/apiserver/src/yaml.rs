//! YAML as request bodies and manifests carry it, read within a cost budget.
//!
//! A YAML parser's cost can grow faster than its input (deep flow nesting is quadratic in
//! libyaml-derived scanners, aliases multiply nodes: CVE-2019-11254's class), so every
//! document is read with bounds on depth, nodes, aliases and documents, and refused with a
//! 400-able message as soon as one is passed, before the cost is paid.

use serde_json::Value;

/// Deepest nesting accepted, as for JSON bodies (serde_json's recursion limit).
pub const MAX_DEPTH: usize = 128;
/// Most nodes in one body, alias expansions included: about what a 3 MiB JSON body can hold
/// (`[0,0,...]`), so an alias never makes a body larger than the largest one could be.
pub const MAX_NODES: usize = 1_500_000;
/// Most documents in one manifest.
pub const MAX_DOCUMENTS: usize = 1_024;

fn options() -> serde_saphyr::Options {
    let mut budget = serde_saphyr::Budget::default();
    budget.max_depth = MAX_DEPTH;
    budget.flow_nesting_limit = MAX_DEPTH;
    budget.max_nodes = MAX_NODES;
    budget.max_events = 2 * MAX_NODES;
    budget.max_documents = MAX_DOCUMENTS;
    let mut options = serde_saphyr::Options::default();
    options.budget = Some(budget);
    // A snippet of the input would echo a Secret's data into errors (and so into logs).
    options.with_snippet = false;
    // Kubernetes' YAML reader keeps the last of duplicate keys.
    options.duplicate_keys = serde_saphyr::DuplicateKeyPolicy::LastWins;
    // Aliases may repeat at most this many events in all: an alias bomb is refused after a
    // fraction of the node budget's work, and manifests that share a few anchors are far below.
    options.alias_limits.max_total_replayed_events = MAX_NODES / 15;
    options
}

fn message(e: serde_saphyr::Error) -> String {
    let text = e.to_string();
    // Keep errors short: they reach clients and logs.
    match text.char_indices().nth(300) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

/// The reader recurses once per level, and a debug build's frames are large: [`MAX_DEPTH`]
/// levels need more than a 2 MiB thread stack, so reading runs on a stack this big.
const STACK: usize = 16 * 1024 * 1024;

/// One YAML document (a request body) as JSON.
pub fn document(body: &[u8]) -> Result<Value, String> {
    stacker::maybe_grow(STACK, STACK, || {
        serde_saphyr::from_slice_with_options::<Value>(body, options()).map_err(message)
    })
}

/// Every non-empty document of `text`, as JSON values.
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = stacker::maybe_grow(STACK, STACK, || {
        serde_saphyr::from_multiple_with_options(text, options()).map_err(message)
    })?;
    Ok(docs.into_iter().filter(|v| !v.is_null()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(depth: usize) -> String {
        format!("x: {}1{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn reads_what_manifests_hold() {
        let v = document(b"apiVersion: v1\nkind: Secret\nmetadata: {name: a}\nstringData:\n  k: '007'\n  n: 7\n  t: true\n  z: ~\n")
            .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"},
                "stringData": {"k": "007", "n": 7, "t": true, "z": null}})
        );
        let docs = documents("a: 1\n---\n---\nb: [1, {c: d}]\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[1]["b"][1]["c"], "d");
    }

    #[test]
    fn nesting_up_to_the_json_limit_is_read_and_deeper_is_refused() {
        assert!(document(flow(MAX_DEPTH - 2).as_bytes()).is_ok());
        for depth in [MAX_DEPTH + 1, 20_000, 600_000] {
            let e = document(flow(depth).as_bytes()).unwrap_err();
            assert!(
                e.contains("recursion limit") || e.contains("nest"),
                "{depth}: {e}"
            );
        }
        let block: String = (0..200)
            .map(|i| format!("{}k:\n", "  ".repeat(i)))
            .collect();
        assert!(document(block.as_bytes()).is_err());
        let dashes = format!("x:\n{} 1\n", "- ".repeat(5_000));
        assert!(document(dashes.as_bytes()).is_err());
    }

    #[test]
    fn aliases_cannot_multiply_a_body() {
        // The "billion laughs": nine levels of ten aliases each.
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let refs = vec![format!("*a{}", i - 1); 10].join(", ");
            text.push_str(&format!("a{i}: &a{i} [{refs}]\n"));
        }
        let e = document(text.as_bytes()).unwrap_err();
        assert!(e.contains("budget") || e.contains("limit"), "{e}");
        // A few aliases are fine.
        let v = document(b"base: &b {k: v}\none: *b\ntwo: *b\n").unwrap();
        assert_eq!(v["two"]["k"], "v");
    }

    #[test]
    fn errors_do_not_echo_the_input() {
        let e = document(b"data:\n  password: hunter2-secret\n  : [\n").unwrap_err();
        assert!(!e.contains("hunter2"), "{e}");
    }
}
