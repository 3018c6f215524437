//! The CEL environment rules are compiled and run in.

use std::sync::Arc;

use cel::Env;

/// The environment every rule is compiled and run in: the standard library
/// (with `matches`, `startsWith`, ...) plus the string and list extensions
/// Kubernetes also offers.
///
/// Built once and shared: it is the same for every schema and never changed
/// after it is built, and building it (a few hundred overloads) cost more
/// than compiling a small schema's rules.
pub(crate) fn env() -> Arc<Env> {
    static ENV: std::sync::OnceLock<Arc<Env>> = std::sync::OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = Env::stdlib();
        // Neither extension clashes with the standard library; if a future cel
        // release made them, rules using them would fail to compile instead.
        let _ = env.add_extension(cel::extensions::strings);
        let _ = env.add_extension(cel::extensions::lists);
        Arc::new(env)
    })
    .clone()
}
