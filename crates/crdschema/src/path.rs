//! Field paths of values in an object, rendered as Kubernetes renders
//! them in errors. A leaf module shared by the steps that walk objects.
//!
//! A path is a chain of borrowed segments on the walkers' stacks: every
//! value of every write is visited with its path, and only the few that
//! fail need it as text, so a step down costs nothing and rendering waits
//! for an error.

use std::fmt;

/// A field path, rendered the way Kubernetes renders it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Path<'a> {
    up: Option<&'a Path<'a>>,
    seg: Seg<'a>,
}

#[derive(Debug, Clone, Copy)]
enum Seg<'a> {
    Root,
    Field(&'a str),
    Index(usize),
    Key(&'a str),
}

impl Default for Path<'_> {
    fn default() -> Self {
        Path {
            up: None,
            seg: Seg::Root,
        }
    }
}

impl<'a> Path<'a> {
    pub(crate) fn field<'b>(&'b self, name: &'b str) -> Path<'b> {
        self.with(Seg::Field(name))
    }

    pub(crate) fn index(&self, i: usize) -> Path<'_> {
        self.with(Seg::Index(i))
    }

    pub(crate) fn key<'b>(&'b self, k: &'b str) -> Path<'b> {
        self.with(Seg::Key(k))
    }

    fn with<'b>(&'b self, seg: Seg<'b>) -> Path<'b> {
        Path {
            up: Some(self),
            seg,
        }
    }

    /// `field.Path` style: map keys in brackets (`spec.labels[foo]`).
    pub(crate) fn render(&self) -> String {
        self.bracketed().to_string()
    }

    /// go-openapi style, which kube-apiserver reports for OpenAPI errors:
    /// map keys joined with dots (`spec.labels.foo`).
    pub(crate) fn render_openapi(&self) -> String {
        self.openapi().to_string()
    }

    /// [`Path::render`], rendered when displayed.
    pub(crate) fn bracketed(&self) -> Rendered<'_> {
        Rendered {
            path: self,
            bracket_keys: true,
        }
    }

    /// [`Path::render_openapi`], rendered when displayed.
    pub(crate) fn openapi(&self) -> Rendered<'_> {
        Rendered {
            path: self,
            bracket_keys: false,
        }
    }

    /// This path and then the fields `below` it (a rule's `fieldPath`), in
    /// [`Path::render`]'s style.
    pub(crate) fn render_with_fields(&self, below: &[String]) -> String {
        let mut out = self.render();
        for name in below {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(name);
        }
        out
    }

    /// The segments from the root down.
    fn segments(&self) -> Vec<Seg<'a>> {
        let mut segs = Vec::new();
        let mut at = Some(self);
        while let Some(p) = at {
            if !matches!(p.seg, Seg::Root) {
                segs.push(p.seg);
            }
            at = p.up;
        }
        segs.reverse();
        segs
    }
}

/// A path in one of the two styles, written out when displayed.
#[derive(Clone, Copy)]
pub(crate) struct Rendered<'p> {
    path: &'p Path<'p>,
    bracket_keys: bool,
}

impl fmt::Display for Rendered<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Written as Kubernetes joins them: a dot before a field or a dotted key
        // unless nothing has been written yet.
        let mut empty = true;
        for seg in self.path.segments() {
            match seg {
                Seg::Root => {}
                Seg::Field(name) => {
                    if !empty {
                        f.write_str(".")?;
                    }
                    f.write_str(name)?;
                    empty &= name.is_empty();
                }
                Seg::Index(i) => {
                    write!(f, "[{i}]")?;
                    empty = false;
                }
                Seg::Key(k) if self.bracket_keys => {
                    write!(f, "[{k}]")?;
                    empty = false;
                }
                Seg::Key(k) => {
                    if !empty {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                    empty &= k.is_empty();
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::Path;

    #[test]
    fn paths_render_in_both_styles() {
        let root = Path::default();
        assert_eq!(root.render(), "");
        let spec = root.field("spec");
        let labels = spec.field("labels");
        let key = labels.key("app.kubernetes.io/name");
        assert_eq!(key.render(), "spec.labels[app.kubernetes.io/name]");
        assert_eq!(key.render_openapi(), "spec.labels.app.kubernetes.io/name");
        let list = spec.field("items");
        let item = list.index(3);
        let leaf = item.field("name");
        assert_eq!(leaf.render(), "spec.items[3].name");
        assert_eq!(
            format!("{} in body", leaf.openapi()),
            "spec.items[3].name in body"
        );
        // A path that starts with an index or a key, as in a list or a map's own schema.
        let first = root.index(0);
        assert_eq!(first.field("a").render(), "[0].a");
        let top_key = root.key("k");
        assert_eq!(top_key.render(), "[k]");
        assert_eq!(top_key.field("x").render_openapi(), "k.x");
        assert_eq!(
            item.render_with_fields(&["spec".into(), "x".into()]),
            "spec.items[3].spec.x"
        );
        assert_eq!(root.render_with_fields(&["a".into()]), "a");
    }
}
