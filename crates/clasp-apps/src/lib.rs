//! The benchmark applications of the CLASP paper (Fig. 1) and the Planner paper's taxi
//! workflows: their operators, registered under the function names the spec files in
//! `pipelines/` use.

pub mod syn;
pub mod wc;

use clasp_core::Registry;

/// A registry with every application function (plus the built-in `identity`).
pub fn registry() -> Registry {
    let mut r = Registry::new();
    wc::register(&mut r);
    syn::register(&mut r);
    r
}
