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
