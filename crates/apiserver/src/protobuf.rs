//! Just enough of the Kubernetes protobuf encoding to accept what kubectl's generator commands
//! (`kubectl create configmap|secret|namespace`) send: those always post protobuf, whatever the
//! server prefers. Responses are always JSON, which kubectl accepts.

use base64::Engine;
use serde_json::{Map, Value, json};

/// "k8s\0": the prefix of every Kubernetes protobuf payload.
const MAGIC: &[u8] = b"k8s\x00";

#[derive(Debug, thiserror::Error)]
#[error("invalid protobuf body: {0}")]
pub struct ProtoError(&'static str);

/// One field of a message: its number and value.
enum Field<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn varint(&mut self) -> Result<u64, ProtoError> {
        let mut out = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .buf
                .split_first()
                .ok_or(ProtoError("truncated varint"))?;
            self.buf = rest;
            out |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(out);
            }
        }
        Err(ProtoError("varint too long"))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtoError> {
        if self.buf.len() < n {
            return Err(ProtoError("truncated field"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>, ProtoError> {
        if self.buf.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = match key & 7 {
            0 => Field::Varint(self.varint()?),
            1 => Field::Bytes(self.take(8)?),
            2 => {
                let n = usize::try_from(self.varint()?).map_err(|_| ProtoError("length"))?;
                Field::Bytes(self.take(n)?)
            }
            5 => Field::Bytes(self.take(4)?),
            _ => return Err(ProtoError("unsupported wire type")),
        };
        Ok(Some((key >> 3, field)))
    }
}

fn fields(buf: &[u8]) -> Result<Vec<(u64, Field<'_>)>, ProtoError> {
    let mut r = Reader { buf };
    let mut out = Vec::new();
    while let Some(f) = r.next()? {
        out.push(f);
    }
    Ok(out)
}

fn string(b: &[u8]) -> Result<String, ProtoError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtoError("string is not UTF-8"))
}

/// A map entry (key = 1, value = 2), the value as a string or base64 of its bytes.
fn map_entry(b: &[u8], value_as_base64: bool) -> Result<(String, Value), ProtoError> {
    let mut key = String::new();
    let mut value: &[u8] = &[];
    for (n, f) in fields(b)? {
        match (n, f) {
            (1, Field::Bytes(k)) => key = string(k)?,
            (2, Field::Bytes(v)) => value = v,
            _ => {}
        }
    }
    let value = if value_as_base64 {
        json!(base64::engine::general_purpose::STANDARD.encode(value))
    } else {
        json!(string(value)?)
    };
    Ok((key, value))
}

fn insert_entry(obj: &mut Map<String, Value>, field: &str, entry: (String, Value)) {
    let m = obj.entry(field).or_insert_with(|| json!({}));
    if let Some(m) = m.as_object_mut() {
        m.insert(entry.0, entry.1);
    }
}

fn object_meta(b: &[u8]) -> Result<Value, ProtoError> {
    let mut m = Map::new();
    for (n, f) in fields(b)? {
        match (n, f) {
            // Unset optional strings arrive empty.
            (1, Field::Bytes(v)) if !v.is_empty() => {
                m.insert("name".into(), json!(string(v)?));
            }
            // Unset optional strings arrive empty.
            (2, Field::Bytes(v)) if !v.is_empty() => {
                m.insert("generateName".into(), json!(string(v)?));
            }
            // Unset optional strings arrive empty.
            (3, Field::Bytes(v)) if !v.is_empty() => {
                m.insert("namespace".into(), json!(string(v)?));
            }
            // Unset optional strings arrive empty.
            (6, Field::Bytes(v)) if !v.is_empty() => {
                m.insert("resourceVersion".into(), json!(string(v)?));
            }
            (11, Field::Bytes(v)) => insert_entry(&mut m, "labels", map_entry(v, false)?),
            (12, Field::Bytes(v)) => insert_entry(&mut m, "annotations", map_entry(v, false)?),
            (14, Field::Bytes(v)) => {
                let list = m.entry("finalizers").or_insert_with(|| json!([]));
                if let Some(l) = list.as_array_mut() {
                    l.push(json!(string(v)?));
                }
            }
            _ => {}
        }
    }
    Ok(Value::Object(m))
}

/// How one protobuf field maps to JSON, for the kinds decoded by [`message`].
#[derive(Clone, Copy)]
enum Ty {
    Str,
    Strs,
    Int,
    Bool,
    StrMap,
    Meta,
    Msg(&'static [(u64, &'static str, Ty)]),
    Msgs(&'static [(u64, &'static str, Ty)]),
}

type Schema = &'static [(u64, &'static str, Ty)];

const POLICY_RULE: Schema = &[
    (1, "verbs", Ty::Strs),
    (2, "apiGroups", Ty::Strs),
    (3, "resources", Ty::Strs),
    (4, "resourceNames", Ty::Strs),
    (5, "nonResourceURLs", Ty::Strs),
];
const SUBJECT: Schema = &[
    (1, "kind", Ty::Str),
    (2, "apiGroup", Ty::Str),
    (3, "name", Ty::Str),
    (4, "namespace", Ty::Str),
];
const ROLE_REF: Schema = &[
    (1, "apiGroup", Ty::Str),
    (2, "kind", Ty::Str),
    (3, "name", Ty::Str),
];
const REQUIREMENT: Schema = &[
    (1, "key", Ty::Str),
    (2, "operator", Ty::Str),
    (3, "values", Ty::Strs),
];
const LABEL_SELECTOR: Schema = &[
    (1, "matchLabels", Ty::StrMap),
    (2, "matchExpressions", Ty::Msgs(REQUIREMENT)),
];
const AGGREGATION: Schema = &[(1, "clusterRoleSelectors", Ty::Msgs(LABEL_SELECTOR))];
const RESOURCE_ATTRS: Schema = &[
    (1, "namespace", Ty::Str),
    (2, "verb", Ty::Str),
    (3, "group", Ty::Str),
    (4, "version", Ty::Str),
    (5, "resource", Ty::Str),
    (6, "subresource", Ty::Str),
    (7, "name", Ty::Str),
];
const NON_RESOURCE_ATTRS: Schema = &[(1, "path", Ty::Str), (2, "verb", Ty::Str)];
const SSAR_SPEC: Schema = &[
    (1, "resourceAttributes", Ty::Msg(RESOURCE_ATTRS)),
    (2, "nonResourceAttributes", Ty::Msg(NON_RESOURCE_ATTRS)),
];
const SSRR_SPEC: Schema = &[(1, "namespace", Ty::Str)];
const TOKEN_REQUEST_SPEC: Schema = &[
    (1, "audiences", Ty::Strs),
    (4, "expirationSeconds", Ty::Int),
];

/// Message layouts of the kinds kubectl's `create`, `auth` and token commands send.
fn schema_for(api_version: &str, kind: &str) -> Option<Schema> {
    const META: (u64, &str, Ty) = (1, "metadata", Ty::Meta);
    Some(match (api_version, kind) {
        ("v1", "ServiceAccount") => &[META, (4, "automountServiceAccountToken", Ty::Bool)],
        ("rbac.authorization.k8s.io/v1", "Role") => &[META, (2, "rules", Ty::Msgs(POLICY_RULE))],
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => &[
            META,
            (2, "rules", Ty::Msgs(POLICY_RULE)),
            (3, "aggregationRule", Ty::Msg(AGGREGATION)),
        ],
        ("rbac.authorization.k8s.io/v1", "RoleBinding" | "ClusterRoleBinding") => &[
            META,
            (2, "subjects", Ty::Msgs(SUBJECT)),
            (3, "roleRef", Ty::Msg(ROLE_REF)),
        ],
        ("authorization.k8s.io/v1", "SelfSubjectAccessReview") => {
            &[META, (2, "spec", Ty::Msg(SSAR_SPEC))]
        }
        ("authorization.k8s.io/v1", "SelfSubjectRulesReview") => {
            &[META, (2, "spec", Ty::Msg(SSRR_SPEC))]
        }
        ("authentication.k8s.io/v1", "SelfSubjectReview") => &[META],
        ("authentication.k8s.io/v1", "TokenRequest") => {
            &[META, (2, "spec", Ty::Msg(TOKEN_REQUEST_SPEC))]
        }
        _ => return None,
    })
}

/// Decodes the fields `schema` names into `out`; unknown fields are skipped.
fn message(buf: &[u8], schema: Schema, out: &mut Map<String, Value>) -> Result<(), ProtoError> {
    for (n, f) in fields(buf)? {
        let Some((_, name, ty)) = schema.iter().find(|(k, _, _)| *k == n) else {
            continue;
        };
        let name = name.to_string();
        match (ty, f) {
            (Ty::Str, Field::Bytes(v)) => {
                out.insert(name, json!(string(v)?));
            }
            (Ty::Strs, Field::Bytes(v)) => {
                let list = out.entry(name).or_insert_with(|| json!([]));
                if let Some(a) = list.as_array_mut() {
                    a.push(json!(string(v)?));
                }
            }
            (Ty::Int, Field::Varint(v)) => {
                out.insert(name, json!(v as i64));
            }
            (Ty::Bool, Field::Varint(v)) => {
                out.insert(name, json!(v != 0));
            }
            (Ty::StrMap, Field::Bytes(v)) => insert_entry(out, &name, map_entry(v, false)?),
            (Ty::Meta, Field::Bytes(v)) => {
                out.insert(name, object_meta(v)?);
            }
            (Ty::Msg(inner), Field::Bytes(v)) => {
                let mut m = Map::new();
                message(v, inner, &mut m)?;
                out.insert(name, Value::Object(m));
            }
            (Ty::Msgs(inner), Field::Bytes(v)) => {
                let mut m = Map::new();
                message(v, inner, &mut m)?;
                let list = out.entry(name).or_insert_with(|| json!([]));
                if let Some(a) = list.as_array_mut() {
                    a.push(Value::Object(m));
                }
            }
            _ => return Err(ProtoError("unexpected wire type")),
        }
    }
    Ok(())
}

/// Decodes a protobuf request body into the JSON form of the object, for the kinds kubectl's
/// generators create. Other kinds are `None` (the caller answers 415).
pub fn decode(body: &[u8]) -> Result<Option<Value>, ProtoError> {
    let Some(rest) = body.strip_prefix(MAGIC) else {
        return Err(ProtoError("missing k8s protobuf prefix"));
    };
    let mut api_version = String::new();
    let mut kind = String::new();
    let mut raw: &[u8] = &[];
    for (n, f) in fields(rest)? {
        match (n, f) {
            (1, Field::Bytes(tm)) => {
                for (n, f) in fields(tm)? {
                    match (n, f) {
                        (1, Field::Bytes(v)) => api_version = string(v)?,
                        (2, Field::Bytes(v)) => kind = string(v)?,
                        _ => {}
                    }
                }
            }
            (2, Field::Bytes(v)) => raw = v,
            _ => {}
        }
    }
    let mut obj = Map::new();
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    if let Some(schema) = schema_for(&api_version, &kind) {
        message(raw, schema, &mut obj)?;
        return Ok(Some(Value::Object(obj)));
    }
    // Field numbers per kind: (metadata, string map, bytes map, type, immutable, stringData).
    let layout: (u64, Option<u64>, Option<u64>, Option<u64>, Option<u64>) =
        match (api_version.as_str(), kind.as_str()) {
            ("v1", "ConfigMap") => (1, Some(2), Some(3), None, Some(4)),
            ("v1", "Secret") => (1, Some(4), Some(2), Some(3), Some(5)),
            ("v1", "Namespace") => (1, None, None, None, None),
            _ => return Ok(None),
        };
    let (meta_f, str_map, bytes_map, type_f, immutable_f) = layout;
    let (str_name, bytes_name) = if kind == "Secret" {
        ("stringData", "data")
    } else {
        ("data", "binaryData")
    };
    for (n, f) in fields(raw)? {
        match f {
            Field::Bytes(v) if n == meta_f => {
                obj.insert("metadata".into(), object_meta(v)?);
            }
            Field::Bytes(v) if Some(n) == str_map => {
                insert_entry(&mut obj, str_name, map_entry(v, false)?);
            }
            Field::Bytes(v) if Some(n) == bytes_map => {
                insert_entry(&mut obj, bytes_name, map_entry(v, true)?);
            }
            Field::Bytes(v) if Some(n) == type_f => {
                obj.insert("type".into(), json!(string(v)?));
            }
            Field::Varint(v) if Some(n) == immutable_f => {
                obj.insert("immutable".into(), json!(v != 0));
            }
            _ => {}
        }
    }
    Ok(Some(Value::Object(obj)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u64, data: &[u8]) -> Vec<u8> {
        let mut out = vec![((n << 3) | 2) as u8, data.len() as u8];
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn decodes_a_configmap() {
        let meta = [
            field(1, b"cm"),
            field(11, &[field(1, b"a"), field(2, b"b")].concat()),
        ]
        .concat();
        let cm = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let body = [MAGIC.to_vec(), field(1, &tm), field(2, &cm)].concat();
        let v = decode(&body).unwrap().unwrap();
        assert_eq!(
            v,
            json!({"apiVersion": "v1", "kind": "ConfigMap",
                   "metadata": {"name": "cm", "labels": {"a": "b"}}, "data": {"k": "v"}})
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(decode(b"nope").is_err());
        assert!(decode(b"k8s\x00\x0a\x05ab").is_err());
    }
}
