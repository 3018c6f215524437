//! Label and field selectors (kubectl `-l` / `--field-selector` syntax).
//!
//! Label selectors follow `k8s.io/apimachinery/pkg/labels`: comma-separated
//! requirements `a=b`, `a==b`, `a!=b`, `a in (x,y)`, `a notin (x)`, `a`, `!a`,
//! plus `a>1` / `a<1`. Field selectors support `=`, `==` and `!=` on dotted
//! JSON paths, with `\` escaping `,`, `=`, `!` and `\` in values.
//!
//! The parts, each using only those listed before it: `error`, `requirement`
//! (one label requirement and the key/value rules), `label_syntax` (the
//! tokenizer and parser of the `-l` text), `label` ([`LabelSelector`], also
//! from a `metav1.LabelSelector`) and `field` ([`FieldSelector`]).

mod error;
mod field;
mod label;
mod label_syntax;
mod requirement;

pub use error::SelectorError;
pub use field::FieldSelector;
pub use label::{LabelSelector, labels_of};

#[cfg(test)]
mod tests;
