//! Reads a crate's module tree from its source files: for each module, the names it defines,
//! the names it imports, and every path it uses that could lead to another module of the crate.
//! Code under `#[cfg(test)]` is left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module path from the crate root (`[]` is the root).
pub type ModPath = Vec<String>;

#[derive(Debug, Default)]
pub struct Module {
    /// The file the module lives in (an inline module shares its parent's).
    pub file: PathBuf,
    pub children: BTreeSet<String>,
    /// Items defined here (functions, types, traits, constants, macros).
    pub items: BTreeSet<String>,
    /// Names brought in by `use`, of any visibility, to the path they name (as written).
    pub imports: BTreeMap<String, Vec<String>>,
    /// `use path::*` sources, as written.
    pub globs: Vec<Vec<String>>,
    /// Paths this module's own code depends on: private `use` declarations and paths in code.
    /// A `pub use` only re-exports, so it is followed when resolving, not counted here.
    pub uses: Vec<Vec<String>>,
}

#[derive(Debug, Default)]
pub struct Tree {
    pub modules: BTreeMap<ModPath, Module>,
}

#[derive(Debug)]
pub struct LoadError(pub String);

impl Tree {
    /// Loads the tree rooted at `root_file` (a `lib.rs`, `main.rs` or `src/bin/*.rs`).
    pub fn load(root_file: &Path) -> Result<Tree, LoadError> {
        let mut tree = Tree::default();
        let dir = root_file.parent().unwrap_or(Path::new(".")).to_path_buf();
        tree.load_file(Vec::new(), root_file, &dir)?;
        Ok(tree)
    }

    /// `dir` is where the module's `mod x;` children are looked for.
    fn load_file(&mut self, path: ModPath, file: &Path, dir: &Path) -> Result<(), LoadError> {
        let text = std::fs::read_to_string(file)
            .map_err(|e| LoadError(format!("{}: {e}", file.display())))?;
        let parsed =
            syn::parse_file(&text).map_err(|e| LoadError(format!("{}: {e}", file.display())))?;
        self.load_items(path, &parsed.items, file, dir)
    }

    fn load_items(
        &mut self,
        path: ModPath,
        items: &[syn::Item],
        file: &Path,
        dir: &Path,
    ) -> Result<(), LoadError> {
        let mut module = Module {
            file: file.to_path_buf(),
            ..Module::default()
        };
        let mut nested = Vec::new();
        for item in items {
            if is_test_only(item_attrs(item)) {
                continue;
            }
            match item {
                syn::Item::Mod(m) => {
                    let name = m.ident.to_string();
                    module.children.insert(name.clone());
                    nested.push((name, m));
                }
                syn::Item::Use(u) => {
                    let private = matches!(u.vis, syn::Visibility::Inherited);
                    let mut found = Vec::new();
                    flatten_use(&u.tree, &mut Vec::new(), &mut found);
                    for entry in found {
                        match entry {
                            UseEntry::Name(name, target) => {
                                if private {
                                    module.uses.push(target.clone());
                                }
                                if name != "_" {
                                    module.imports.insert(name, target);
                                }
                            }
                            UseEntry::Glob(source) => {
                                if private {
                                    module.uses.push(source.clone());
                                }
                                module.globs.push(source);
                            }
                        }
                    }
                }
                other => {
                    if let Some(name) = item_name(other) {
                        module.items.insert(name);
                    }
                    let mut paths = PathCollector::default();
                    paths.visit_item(other);
                    module.uses.extend(paths.found);
                }
            }
        }
        self.modules.insert(path.clone(), module);
        for (name, m) in nested {
            let mut child = path.clone();
            child.push(name.clone());
            let child_dir = dir.join(&name);
            match &m.content {
                Some((_, items)) => self.load_items(child, items, file, &child_dir)?,
                None => {
                    let (child_file, grand_dir) = match path_attr(&m.attrs) {
                        Some(p) => {
                            let f = dir.join(p);
                            let d = f.with_extension("");
                            (f, d)
                        }
                        None => {
                            let flat = dir.join(format!("{name}.rs"));
                            if flat.exists() {
                                (flat, child_dir)
                            } else {
                                (child_dir.join("mod.rs"), child_dir)
                            }
                        }
                    };
                    self.load_file(child, &child_file, &grand_dir)?;
                }
            }
        }
        Ok(())
    }
}

enum UseEntry {
    Name(String, Vec<String>),
    Glob(Vec<String>),
}

fn flatten_use(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<UseEntry>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            flatten_use(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let ident = n.ident.to_string();
            if ident == "self" {
                if let Some(last) = prefix.last() {
                    out.push(UseEntry::Name(last.clone(), prefix.clone()));
                }
            } else {
                let mut target = prefix.clone();
                target.push(ident.clone());
                out.push(UseEntry::Name(ident, target));
            }
        }
        syn::UseTree::Rename(r) => {
            let mut target = prefix.clone();
            if r.ident != "self" {
                target.push(r.ident.to_string());
            }
            out.push(UseEntry::Name(r.rename.to_string(), target));
        }
        syn::UseTree::Glob(_) => out.push(UseEntry::Glob(prefix.clone())),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                flatten_use(t, prefix, out);
            }
        }
    }
}

/// Every multi-segment path in an item, and the targets of `use` declarations inside bodies.
#[derive(Default)]
struct PathCollector {
    found: Vec<Vec<String>>,
}

impl<'a> Visit<'a> for PathCollector {
    fn visit_path(&mut self, path: &'a syn::Path) {
        if path.leading_colon.is_none() && path.segments.len() > 1 {
            self.found
                .push(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_item_use(&mut self, u: &'a syn::ItemUse) {
        let mut found = Vec::new();
        flatten_use(&u.tree, &mut Vec::new(), &mut found);
        for entry in found {
            match entry {
                UseEntry::Name(_, target) | UseEntry::Glob(target) => self.found.push(target),
            }
        }
    }

    fn visit_item_mod(&mut self, m: &'a syn::ItemMod) {
        if !is_test_only(&m.attrs) {
            syn::visit::visit_item_mod(self, m);
        }
    }

    fn visit_impl_item_fn(&mut self, f: &'a syn::ImplItemFn) {
        if !is_test_only(&f.attrs) {
            syn::visit::visit_impl_item_fn(self, f);
        }
    }
}

fn item_name(item: &syn::Item) -> Option<String> {
    let ident = match item {
        syn::Item::Const(i) => &i.ident,
        syn::Item::Enum(i) => &i.ident,
        syn::Item::Fn(i) => &i.sig.ident,
        syn::Item::Macro(i) => i.ident.as_ref()?,
        syn::Item::Static(i) => &i.ident,
        syn::Item::Struct(i) => &i.ident,
        syn::Item::Trait(i) => &i.ident,
        syn::Item::TraitAlias(i) => &i.ident,
        syn::Item::Type(i) => &i.ident,
        syn::Item::Union(i) => &i.ident,
        _ => return None,
    };
    Some(ident.to_string())
}

fn item_attrs(item: &syn::Item) -> &[syn::Attribute] {
    match item {
        syn::Item::Const(i) => &i.attrs,
        syn::Item::Enum(i) => &i.attrs,
        syn::Item::ExternCrate(i) => &i.attrs,
        syn::Item::Fn(i) => &i.attrs,
        syn::Item::ForeignMod(i) => &i.attrs,
        syn::Item::Impl(i) => &i.attrs,
        syn::Item::Macro(i) => &i.attrs,
        syn::Item::Mod(i) => &i.attrs,
        syn::Item::Static(i) => &i.attrs,
        syn::Item::Struct(i) => &i.attrs,
        syn::Item::Trait(i) => &i.attrs,
        syn::Item::TraitAlias(i) => &i.attrs,
        syn::Item::Type(i) => &i.attrs,
        syn::Item::Union(i) => &i.attrs,
        syn::Item::Use(i) => &i.attrs,
        _ => &[],
    }
}

/// `#[cfg(test)]` exactly: code that exists only in the crate's unit-test build.
fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && a.parse_args::<syn::Ident>()
                .is_ok_and(|ident| ident == "test")
    })
}

fn path_attr(attrs: &[syn::Attribute]) -> Option<String> {
    attrs.iter().find_map(|a| match &a.meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Some(s.value()),
            _ => None,
        },
        _ => None,
    })
}
