//! Small helpers for object metadata: timestamps, generated names, name validation.

use rand::Rng;
use serde_json::Value;

/// RFC 3339 with second precision, as Kubernetes writes `metav1.Time`.
pub fn now() -> String {
    jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}

/// The five-character suffix for `generateName`, from the same alphabet as Kubernetes (no
/// vowels, no confusable digits).
pub fn random_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut rng = rand::rng();
    (0..5)
        .map(|_| ALPHABET[rng.random_range(0..ALPHABET.len())] as char)
        .collect()
}

pub fn str_at<'a>(v: &'a Value, ptr: &str) -> Option<&'a str> {
    v.pointer(ptr).and_then(Value::as_str)
}

pub fn name_of(v: &Value) -> &str {
    str_at(v, "/metadata/name").unwrap_or_default()
}

pub fn meta_mut(v: &mut Value) -> &mut serde_json::Map<String, Value> {
    if !v.get("metadata").is_some_and(Value::is_object) {
        v["metadata"] = Value::Object(Default::default());
    }
    v["metadata"]
        .as_object_mut()
        .expect("metadata is an object")
}

/// Problems with a DNS-1123 subdomain, in kube-apiserver's wording; empty when valid.
pub fn dns_subdomain_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let ok = !name.is_empty()
        && name.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if !ok {
        errs.push("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')".to_string());
    }
    errs
}

/// Problems with a name that only has to be a URL path segment (RBAC objects); empty when valid.
pub fn path_segment_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.is_empty() {
        errs.push("name or generateName is required".to_string());
    }
    if name == "." || name == ".." {
        errs.push(format!("may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            errs.push(format!("may not contain '{bad}'"));
        }
    }
    if name.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    errs
}

/// Problems with a DNS-1123 label (namespace names); empty when valid.
pub fn dns_label_errors(name: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if name.len() > 63 {
        errs.push("must be no more than 63 characters".to_string());
    }
    let ok = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-');
    if !ok {
        errs.push("a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string());
    }
    errs
}

fn name_part_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b[0].is_ascii_alphanumeric()
        && b[b.len() - 1].is_ascii_alphanumeric()
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Problems with a label or annotation key (`[prefix/]name`); empty when valid.
pub fn qualified_name_errors(key: &str) -> Vec<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut errs = Vec::new();
    if let Some(p) = prefix
        && (p.is_empty() || !dns_subdomain_errors(p).is_empty())
    {
        errs.push("prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character".to_string());
    }
    if !name_part_ok(name) {
        errs.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string());
    }
    errs
}

/// Problems with a label value (may be empty); empty when valid.
pub fn label_value_errors(v: &str) -> Vec<String> {
    if v.is_empty() || name_part_ok(v) {
        Vec::new()
    } else if v.len() > 63 {
        vec!["must be no more than 63 characters".to_string()]
    } else {
        vec!["a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')".to_string()]
    }
}

pub const FOREGROUND: &str = "foregroundDeletion";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(dns_subdomain_errors("host-0.rack1").is_empty());
        assert!(!dns_subdomain_errors("Host_0").is_empty());
        assert!(!dns_subdomain_errors("-a").is_empty());
        assert!(dns_label_errors("kube-system").is_empty());
        assert!(!dns_label_errors("a.b").is_empty());
        assert_eq!(random_suffix().len(), 5);
        assert!(qualified_name_errors("baremetalhost.metal3.io/paused").is_empty());
        assert!(qualified_name_errors("reboot.metal3.io/capm3-remediation").is_empty());
        assert!(qualified_name_errors("app").is_empty());
        assert!(!qualified_name_errors("Bad Key").is_empty());
        assert!(!qualified_name_errors("/x").is_empty());
        assert!(!qualified_name_errors("UPPER.io/x").is_empty());
        assert!(label_value_errors("").is_empty());
        assert!(label_value_errors("prod-1.a_b").is_empty());
        assert!(!label_value_errors("-x").is_empty());
        assert!(!label_value_errors(&"a".repeat(64)).is_empty());
        assert!(now().ends_with('Z'));
    }
}
