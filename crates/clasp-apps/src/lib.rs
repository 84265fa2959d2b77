//! The benchmark applications of the CLASP paper (Fig. 1) and the Planner paper's taxi
//! workflows: their operators, registered under the function names the spec files in
//! `pipelines/` use, seeded generators and loaders for their inputs ([`inputs`]), and a
//! profile of each app's selectivities and state ([`profile`]).
//!
//! Every operator parses bytes in place and formats into stack buffers, so the steady state
//! allocates nothing per record (new keys of keyed state aside). Malformed input is rejected
//! through `Context::reject` with a reason and never stops a pipeline. Numbers with decimals
//! are fixed-point integers, so results are exact and identical wherever they are computed.

pub mod aa;
pub mod date;
pub mod error;
pub use error::AppError;
pub mod etl;
pub mod inputs;
pub mod json;
pub mod nwm;
pub mod pl;
pub mod profile;
pub mod sd;
pub mod syn;
pub mod taxi;
pub mod text;
pub mod wc;

use clasp_core::{Pipeline, Registry};

/// Every application, by pipeline name.
pub const APPS: [&str; 10] =
    ["wc", "sd", "aa", "pl", "nwm", "etl", "syn", "taxi-w1", "taxi-w2", "taxi-w3"];

/// The spec file of an application as shipped in `pipelines/`.
pub fn spec_text(app: &str) -> Option<&'static str> {
    Some(match app {
        "wc" => include_str!("../../../pipelines/wc.toml"),
        "sd" => include_str!("../../../pipelines/sd.toml"),
        "aa" => include_str!("../../../pipelines/aa.toml"),
        "pl" => include_str!("../../../pipelines/pl.toml"),
        "nwm" => include_str!("../../../pipelines/nwm.toml"),
        "etl" => include_str!("../../../pipelines/etl.toml"),
        "syn" => include_str!("../../../pipelines/syn.toml"),
        "taxi-w1" => include_str!("../../../pipelines/taxi-w1.toml"),
        "taxi-w2" => include_str!("../../../pipelines/taxi-w2.toml"),
        "taxi-w3" => include_str!("../../../pipelines/taxi-w3.toml"),
        _ => return None,
    })
}

/// The parsed pipeline of an application (from its shipped spec).
pub fn pipeline(app: &str) -> Result<Pipeline, AppError> {
    let text = spec_text(app).ok_or_else(|| unknown_app(app))?;
    Ok(clasp_core::spec::parse(text, &format!("pipelines/{app}.toml"))?)
}

/// The error for an application that is not shipped.
pub(crate) fn unknown_app(app: &str) -> AppError {
    AppError::UnknownApp { app: app.to_owned(), known: APPS.join(", ") }
}

/// A registry with every application function (plus the built-in `identity`).
pub fn registry() -> Registry {
    let mut r = Registry::new();
    wc::register(&mut r);
    syn::register(&mut r);
    sd::register(&mut r);
    aa::register(&mut r);
    pl::register(&mut r);
    nwm::register(&mut r);
    etl::register(&mut r);
    taxi::register(&mut r);
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_shipped_pipeline_instantiates() {
        let reg = registry();
        for app in APPS {
            let p = pipeline(app).unwrap();
            reg.instantiate_all(&p).unwrap_or_else(|e| panic!("{app}: {e}"));
        }
    }
}
