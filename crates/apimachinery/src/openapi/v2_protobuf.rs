//! `/openapi/v2` in protobuf, the `openapi.v2.Document` message of gnostic's OpenAPIv2.proto,
//! which is what kubectl asks for (`Accept:
//! application/com.github.proto-openapi.spec.v2@v1.0+protobuf`) and the only form it parses:
//! given JSON it fails with "proto: cannot parse invalid wire-format data" before it can say
//! "no matches for kind".
//!
//! The encoder walks the Swagger JSON that [`super::v2_document`] builds and writes each field
//! with gnostic's field number. Free-form values (defaults, enums, examples, `x-` vendor
//! extensions) are `Any` messages carrying their YAML text, as gnostic writes them; JSON is
//! YAML, so the JSON text is used. Keys gnostic has no field for are left out, as gnostic's
//! own compiler does.

use serde_json::{Map, Value};

/// The media type kubectl asks for and the one the answer carries.
pub const V2_PROTOBUF_ACCEPT: &str = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf";
pub const V2_PROTOBUF_CONTENT_TYPE: &str =
    "application/com.github.proto-openapi.spec.v2.v1.0+protobuf";

/// Whether an Accept header asks for the protobuf document (either spelling
/// kube-apiserver accepts).
pub fn wants_v2_protobuf(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let media = part.split(';').next().unwrap_or("").trim();
        media == V2_PROTOBUF_ACCEPT || media == V2_PROTOBUF_CONTENT_TYPE
    })
}

/// A protobuf message being written.
#[derive(Default)]
struct Msg(Vec<u8>);

impl Msg {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint((u64::from(field) << 3) | u64::from(wire));
    }

    fn bytes(&mut self, field: u32, b: &[u8]) {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
    }

    fn string(&mut self, field: u32, v: Option<&Value>) {
        if let Some(s) = v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
            self.bytes(field, s.as_bytes());
        }
    }

    fn strings(&mut self, field: u32, v: Option<&Value>) {
        for s in v.and_then(Value::as_array).into_iter().flatten() {
            if let Some(s) = s.as_str() {
                self.bytes(field, s.as_bytes());
            }
        }
    }

    fn boolean(&mut self, field: u32, v: Option<&Value>) {
        if v.and_then(Value::as_bool) == Some(true) {
            self.key(field, 0);
            self.varint(1);
        }
    }

    fn int(&mut self, field: u32, v: Option<&Value>) {
        if let Some(n) = v.and_then(Value::as_i64).filter(|n| *n != 0) {
            self.key(field, 0);
            self.varint(n as u64);
        }
    }

    fn double(&mut self, field: u32, v: Option<&Value>) {
        if let Some(n) = v.and_then(Value::as_f64).filter(|n| *n != 0.0) {
            self.key(field, 1);
            self.0.extend_from_slice(&n.to_le_bytes());
        }
    }

    fn message(&mut self, field: u32, m: Msg) {
        self.bytes(field, &m.0);
    }

    /// An `Any` (field 2: its YAML text).
    fn any(&mut self, field: u32, v: Option<&Value>) {
        if let Some(v) = v {
            self.message(field, any(v));
        }
    }

    fn anys(&mut self, field: u32, v: Option<&Value>) {
        for v in v.and_then(Value::as_array).into_iter().flatten() {
            self.message(field, any(v));
        }
    }

    /// `repeated NamedAny vendor_extension`: every `x-` key, in order.
    fn vendor_extensions(&mut self, field: u32, m: &Map<String, Value>) {
        for (k, v) in m.iter().filter(|(k, _)| k.starts_with("x-")) {
            let mut named = Msg::default();
            named.bytes(1, k.as_bytes());
            named.message(2, any(v));
            self.message(field, named);
        }
    }
}

fn any(v: &Value) -> Msg {
    let mut m = Msg::default();
    m.bytes(2, v.to_string().as_bytes());
    m
}

fn obj(v: &Value) -> Option<&Map<String, Value>> {
    v.as_object()
}

/// Encodes a Swagger 2.0 document as `openapi.v2.Document`.
pub fn encode_v2(doc: &Value) -> Vec<u8> {
    let mut m = Msg::default();
    m.string(1, doc.get("swagger"));
    if let Some(info) = doc.get("info").and_then(obj) {
        let mut i = Msg::default();
        i.string(1, info.get("title"));
        i.string(2, info.get("version"));
        i.string(3, info.get("description"));
        i.vendor_extensions(7, info);
        m.message(2, i);
    }
    m.string(3, doc.get("host"));
    m.string(4, doc.get("basePath"));
    m.strings(5, doc.get("schemes"));
    m.strings(6, doc.get("consumes"));
    m.strings(7, doc.get("produces"));
    if let Some(paths) = doc.get("paths").and_then(obj) {
        let mut p = Msg::default();
        p.vendor_extensions(1, paths);
        for (name, item) in paths.iter().filter(|(k, _)| k.starts_with('/')) {
            let mut named = Msg::default();
            named.bytes(1, name.as_bytes());
            named.message(2, path_item(item));
            p.message(2, named);
        }
        m.message(8, p);
    }
    if let Some(defs) = doc.get("definitions").and_then(obj) {
        m.message(9, named_schemas(defs));
    }
    if let Some(params) = doc.get("parameters").and_then(obj) {
        let mut p = Msg::default();
        for (name, param) in params {
            let mut named = Msg::default();
            named.bytes(1, name.as_bytes());
            named.message(2, parameter(param));
            p.message(1, named);
        }
        m.message(10, p);
    }
    if let Some(d) = doc.as_object() {
        m.vendor_extensions(16, d);
    }
    m.0
}

/// `Definitions` and `Properties` share one shape: repeated NamedSchema at field 1.
fn named_schemas(defs: &Map<String, Value>) -> Msg {
    let mut m = Msg::default();
    for (name, s) in defs {
        let mut named = Msg::default();
        named.bytes(1, name.as_bytes());
        named.message(2, schema(s));
        m.message(1, named);
    }
    m
}

fn schema(v: &Value) -> Msg {
    let mut m = Msg::default();
    let Some(s) = obj(v) else {
        return m;
    };
    m.string(1, s.get("$ref"));
    m.string(2, s.get("format"));
    m.string(3, s.get("title"));
    m.string(4, s.get("description"));
    m.any(5, s.get("default"));
    m.double(6, s.get("multipleOf"));
    m.double(7, s.get("maximum"));
    m.boolean(8, s.get("exclusiveMaximum"));
    m.double(9, s.get("minimum"));
    m.boolean(10, s.get("exclusiveMinimum"));
    m.int(11, s.get("maxLength"));
    m.int(12, s.get("minLength"));
    m.string(13, s.get("pattern"));
    m.int(14, s.get("maxItems"));
    m.int(15, s.get("minItems"));
    m.boolean(16, s.get("uniqueItems"));
    m.int(17, s.get("maxProperties"));
    m.int(18, s.get("minProperties"));
    m.strings(19, s.get("required"));
    m.anys(20, s.get("enum"));
    match s.get("additionalProperties") {
        Some(Value::Bool(b)) => {
            let mut a = Msg::default();
            a.key(2, 0);
            a.varint(u64::from(*b));
            m.message(21, a);
        }
        Some(sub @ Value::Object(_)) => {
            let mut a = Msg::default();
            a.message(1, schema(sub));
            m.message(21, a);
        }
        _ => {}
    }
    match s.get("type") {
        Some(Value::String(t)) => {
            let mut t_msg = Msg::default();
            t_msg.bytes(1, t.as_bytes());
            m.message(22, t_msg);
        }
        Some(types @ Value::Array(_)) => {
            let mut t_msg = Msg::default();
            t_msg.strings(1, Some(types));
            m.message(22, t_msg);
        }
        _ => {}
    }
    match s.get("items") {
        Some(Value::Array(items)) => {
            let mut i = Msg::default();
            for item in items {
                i.message(1, schema(item));
            }
            m.message(23, i);
        }
        Some(item @ Value::Object(_)) => {
            let mut i = Msg::default();
            i.message(1, schema(item));
            m.message(23, i);
        }
        _ => {}
    }
    for sub in s
        .get("allOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(24, schema(sub));
    }
    if let Some(props) = s.get("properties").and_then(obj) {
        m.message(25, named_schemas(props));
    }
    m.string(26, s.get("discriminator"));
    m.boolean(27, s.get("readOnly"));
    m.any(30, s.get("example"));
    m.vendor_extensions(31, s);
    m
}

fn path_item(v: &Value) -> Msg {
    let mut m = Msg::default();
    let Some(item) = obj(v) else {
        return m;
    };
    m.string(1, item.get("$ref"));
    for (field, method) in [
        (2, "get"),
        (3, "put"),
        (4, "post"),
        (5, "delete"),
        (6, "options"),
        (7, "head"),
        (8, "patch"),
    ] {
        if let Some(op) = item.get(method) {
            m.message(field, operation(op));
        }
    }
    for p in item
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(9, parameters_item(p));
    }
    m.vendor_extensions(10, item);
    m
}

fn operation(v: &Value) -> Msg {
    let mut m = Msg::default();
    let Some(op) = obj(v) else {
        return m;
    };
    m.strings(1, op.get("tags"));
    m.string(2, op.get("summary"));
    m.string(3, op.get("description"));
    m.string(5, op.get("operationId"));
    m.strings(6, op.get("produces"));
    m.strings(7, op.get("consumes"));
    for p in op
        .get("parameters")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        m.message(8, parameters_item(p));
    }
    if let Some(responses) = op.get("responses").and_then(obj) {
        let mut r = Msg::default();
        for (code, resp) in responses.iter().filter(|(k, _)| !k.starts_with("x-")) {
            let mut value = Msg::default();
            match resp.get("$ref") {
                Some(reference) => value.message(2, json_reference(reference)),
                None => value.message(1, response(resp)),
            }
            let mut named = Msg::default();
            named.bytes(1, code.as_bytes());
            named.message(2, value);
            r.message(1, named);
        }
        r.vendor_extensions(2, responses);
        m.message(9, r);
    }
    m.strings(10, op.get("schemes"));
    m.boolean(11, op.get("deprecated"));
    m.vendor_extensions(13, op);
    m
}

fn json_reference(reference: &Value) -> Msg {
    let mut m = Msg::default();
    m.string(1, Some(reference));
    m
}

fn response(v: &Value) -> Msg {
    let mut m = Msg::default();
    let Some(r) = obj(v) else {
        return m;
    };
    m.string(1, r.get("description"));
    if let Some(s) = r.get("schema") {
        let mut item = Msg::default();
        item.message(1, schema(s));
        m.message(2, item);
    }
    m.vendor_extensions(5, r);
    m
}

/// `ParametersItem`: a reference, or a parameter.
fn parameters_item(v: &Value) -> Msg {
    let mut m = Msg::default();
    match v.get("$ref") {
        Some(reference) => m.message(2, json_reference(reference)),
        None => m.message(1, parameter(v)),
    }
    m
}

/// `Parameter`: a body parameter, or one of the four non-body kinds by `in`.
fn parameter(v: &Value) -> Msg {
    let mut m = Msg::default();
    let Some(p) = obj(v) else {
        return m;
    };
    let location = p.get("in").and_then(Value::as_str).unwrap_or("");
    if location == "body" {
        let mut b = Msg::default();
        b.string(1, p.get("description"));
        b.string(2, p.get("name"));
        b.string(3, p.get("in"));
        b.boolean(4, p.get("required"));
        if let Some(s) = p.get("schema") {
            b.message(5, schema(s));
        }
        b.vendor_extensions(6, p);
        m.message(1, b);
        return m;
    }
    // Query and formData have `allowEmptyValue` at 5 and the rest one place later than
    // header and path.
    let (kind, shifted) = match location {
        "header" => (1, false),
        "formData" => (2, true),
        "path" => (4, false),
        _ => (3, true),
    };
    let at = |n: u32| if shifted { n + 1 } else { n };
    let mut s = Msg::default();
    s.boolean(1, p.get("required"));
    s.string(2, p.get("in"));
    s.string(3, p.get("description"));
    s.string(4, p.get("name"));
    if shifted {
        s.boolean(5, p.get("allowEmptyValue"));
    }
    s.string(at(5), p.get("type"));
    s.string(at(6), p.get("format"));
    s.string(at(8), p.get("collectionFormat"));
    s.any(at(9), p.get("default"));
    s.double(at(10), p.get("maximum"));
    s.boolean(at(11), p.get("exclusiveMaximum"));
    s.double(at(12), p.get("minimum"));
    s.boolean(at(13), p.get("exclusiveMinimum"));
    s.int(at(14), p.get("maxLength"));
    s.int(at(15), p.get("minLength"));
    s.string(at(16), p.get("pattern"));
    s.int(at(17), p.get("maxItems"));
    s.int(at(18), p.get("minItems"));
    s.boolean(at(19), p.get("uniqueItems"));
    s.anys(at(20), p.get("enum"));
    s.double(at(21), p.get("multipleOf"));
    s.vendor_extensions(at(22), p);
    let mut non_body = Msg::default();
    non_body.message(kind, s);
    m.message(2, non_body);
    m
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A minimal protobuf reader for the tests: (field, wire type, payload) of one message.
    fn fields(mut b: &[u8]) -> Vec<(u32, u8, Vec<u8>)> {
        fn varint(b: &mut &[u8]) -> u64 {
            let mut out = 0;
            for shift in (0..64).step_by(7) {
                let x = b[0];
                *b = &b[1..];
                out |= u64::from(x & 0x7f) << shift;
                if x & 0x80 == 0 {
                    break;
                }
            }
            out
        }
        let mut out = Vec::new();
        while !b.is_empty() {
            let key = varint(&mut b);
            let (field, wire) = ((key >> 3) as u32, (key & 7) as u8);
            let payload = match wire {
                0 => varint(&mut b).to_le_bytes().to_vec(),
                1 => {
                    let v = b[..8].to_vec();
                    b = &b[8..];
                    v
                }
                2 => {
                    let n = varint(&mut b) as usize;
                    let v = b[..n].to_vec();
                    b = &b[n..];
                    v
                }
                w => panic!("wire type {w}"),
            };
            out.push((field, wire, payload));
        }
        out
    }

    fn field(b: &[u8], n: u32) -> Vec<Vec<u8>> {
        fields(b)
            .into_iter()
            .filter(|(f, _, _)| *f == n)
            .map(|(_, _, p)| p)
            .collect()
    }

    fn text(b: &[u8]) -> String {
        String::from_utf8(b.to_vec()).unwrap()
    }

    #[test]
    fn a_document_encodes_with_gnostics_field_numbers() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "unversioned"},
            "paths": {
                "/apis/metal3.io/v1alpha1/namespaces/{namespace}/baremetalhosts/{name}": {
                    "patch": {
                        "operationId": "patchBMH",
                        "parameters": [
                            {"name": "fieldValidation", "in": "query", "type": "string",
                             "uniqueItems": true},
                            {"name": "body", "in": "body", "required": true,
                             "schema": {"type": "object"}},
                        ],
                        "responses": {"200": {"description": "OK",
                            "schema": {"$ref": "#/definitions/io.metal3.v1alpha1.BareMetalHost"}}},
                        "x-kubernetes-group-version-kind":
                            {"group": "metal3.io", "version": "v1alpha1", "kind": "BareMetalHost"},
                    },
                    "parameters": [{"name": "name", "in": "path", "required": true,
                                    "type": "string"}],
                },
            },
            "definitions": {
                "io.metal3.v1alpha1.BareMetalHost": {
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "spec": {"type": "object", "additionalProperties": {"type": "string"}},
                        "count": {"type": "integer", "minimum": 1.0, "maximum": 4094.0},
                        "mode": {"type": "string", "enum": ["access", "trunk"]},
                    },
                    "x-kubernetes-group-version-kind": [
                        {"group": "metal3.io", "version": "v1alpha1", "kind": "BareMetalHost"}],
                },
            },
        });
        let b = encode_v2(&doc);
        assert_eq!(text(&field(&b, 1)[0]), "2.0");
        let info = &field(&b, 2)[0];
        assert_eq!(text(&field(info, 1)[0]), "Kubernetes");

        // paths -> NamedPathItem(name, PathItem) -> patch (8) -> Operation
        let paths = &field(&b, 8)[0];
        let named = &field(paths, 2)[0];
        assert!(text(&field(named, 1)[0]).ends_with("/baremetalhosts/{name}"));
        let item = &field(named, 2)[0];
        // The path-level parameter: ParametersItem.parameter.non_body.path (4).name (4)
        let path_param = &field(&field(&field(&field(item, 9)[0], 1)[0], 2)[0], 4)[0];
        assert_eq!(text(&field(path_param, 4)[0]), "name");
        let op = &field(item, 8)[0];
        assert_eq!(text(&field(op, 5)[0]), "patchBMH");
        let params = field(op, 8);
        // query (3): name at 4, type at 6 (one later than path's), uniqueItems at 20
        let query = &field(&field(&field(&params[0], 1)[0], 2)[0], 3)[0];
        assert_eq!(text(&field(query, 4)[0]), "fieldValidation");
        assert_eq!(text(&field(query, 6)[0]), "string");
        assert_eq!(field(query, 20).len(), 1);
        // body: BodyParameter (1) with required (4) and a schema (5)
        let body = &field(&field(&params[1], 1)[0], 1)[0];
        assert_eq!(text(&field(body, 2)[0]), "body");
        assert_eq!(field(body, 5).len(), 1);
        // the GVK vendor extension: NamedAny(name, Any(yaml))
        let ext = &field(op, 13)[0];
        assert_eq!(text(&field(ext, 1)[0]), "x-kubernetes-group-version-kind");
        let yaml = text(&field(&field(ext, 2)[0], 2)[0]);
        assert_eq!(
            serde_json::from_str::<Value>(&yaml).unwrap()["kind"],
            "BareMetalHost"
        );
        // responses: NamedResponseValue("200", ResponseValue.response.schema.schema._ref)
        let resp = &field(&field(op, 9)[0], 1)[0];
        assert_eq!(text(&field(resp, 1)[0]), "200");
        let schema_ref = &field(&field(&field(&field(resp, 2)[0], 1)[0], 2)[0], 1)[0];
        assert_eq!(
            text(&field(schema_ref, 1)[0]),
            "#/definitions/io.metal3.v1alpha1.BareMetalHost"
        );

        // definitions -> NamedSchema -> Schema: type (22), required (19), properties (25)
        let def = &field(&field(&field(&b, 9)[0], 1)[0], 2)[0];
        assert_eq!(text(&field(&field(def, 22)[0], 1)[0]), "object");
        assert_eq!(text(&field(def, 19)[0]), "spec");
        let props = field(&field(def, 25)[0], 1);
        assert_eq!(props.len(), 3);
        let by_name = |n: &str| {
            props
                .iter()
                .find(|p| text(&field(p, 1)[0]) == n)
                .map(|p| field(p, 2)[0].clone())
                .unwrap()
        };
        let spec = by_name("spec");
        // additionalProperties: AdditionalPropertiesItem.schema (1)
        let extra = &field(&field(&spec, 21)[0], 1)[0];
        assert_eq!(text(&field(&field(extra, 22)[0], 1)[0]), "string");
        let count = by_name("count");
        let max = f64::from_le_bytes(field(&count, 7)[0].clone().try_into().unwrap());
        assert_eq!(max, 4094.0);
        let mode = by_name("mode");
        let enums: Vec<String> = field(&mode, 20)
            .iter()
            .map(|a| text(&field(a, 2)[0]))
            .collect();
        assert_eq!(enums, ["\"access\"", "\"trunk\""]);
    }

    #[test]
    fn the_accept_header_is_recognised_in_both_spellings() {
        assert!(wants_v2_protobuf(
            "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
        ));
        assert!(wants_v2_protobuf(
            "application/json;q=0.9, application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
        ));
        assert!(!wants_v2_protobuf("application/json"));
        assert!(!wants_v2_protobuf("*/*"));
    }
}
