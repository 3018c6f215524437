//! Field paths of values in an object, rendered as Kubernetes renders
//! them in errors. A leaf module shared by the steps that walk objects.

/// A field path, rendered the way Kubernetes renders it.
#[derive(Debug, Clone, Default)]
pub(crate) struct Path(Vec<Seg>);

#[derive(Debug, Clone)]
enum Seg {
    Field(String),
    Index(usize),
    Key(String),
}

impl Path {
    pub(crate) fn field(&self, name: &str) -> Path {
        self.with(Seg::Field(name.to_string()))
    }

    pub(crate) fn index(&self, i: usize) -> Path {
        self.with(Seg::Index(i))
    }

    pub(crate) fn key(&self, k: &str) -> Path {
        self.with(Seg::Key(k.to_string()))
    }

    fn with(&self, seg: Seg) -> Path {
        let mut segs = self.0.clone();
        segs.push(seg);
        Path(segs)
    }

    /// `field.Path` style: map keys in brackets (`spec.labels[foo]`).
    pub(crate) fn render(&self) -> String {
        self.render_with(true)
    }

    /// go-openapi style, which kube-apiserver reports for OpenAPI errors:
    /// map keys joined with dots (`spec.labels.foo`).
    pub(crate) fn render_openapi(&self) -> String {
        self.render_with(false)
    }

    fn render_with(&self, bracket_keys: bool) -> String {
        let mut out = String::new();
        for seg in &self.0 {
            match seg {
                Seg::Field(name) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(name);
                }
                Seg::Index(i) => {
                    out.push('[');
                    out.push_str(&i.to_string());
                    out.push(']');
                }
                Seg::Key(k) if bracket_keys => {
                    out.push('[');
                    out.push_str(k);
                    out.push(']');
                }
                Seg::Key(k) => {
                    if !out.is_empty() {
                        out.push('.');
                    }
                    out.push_str(k);
                }
            }
        }
        out
    }
}
