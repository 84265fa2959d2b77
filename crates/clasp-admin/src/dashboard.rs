//! The dashboard at `/`: a page, its script and style, and the vendored uPlot charting library
//! (MIT, from the npm registry; its licence beside it in `assets/vendor/uplot/`), all embedded
//! in the binary.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

/// The embedded assets: name, content type, bytes.
const ASSETS: [(&str, &str, &str); 4] = [
    ("app.js", "text/javascript; charset=utf-8", include_str!("../assets/app.js")),
    ("app.css", "text/css; charset=utf-8", include_str!("../assets/app.css")),
    (
        "uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/vendor/uplot/uPlot.iife.min.js"),
    ),
    (
        "uPlot.min.css",
        "text/css; charset=utf-8",
        include_str!("../assets/vendor/uplot/uPlot.min.css"),
    ),
];

/// `/`.
pub async fn index() -> Html<&'static str> {
    Html(include_str!("../assets/index.html"))
}

/// `/assets/{file}`.
pub async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, kind, body)) => ([(header::CONTENT_TYPE, *kind)], *body).into_response(),
        None => (StatusCode::NOT_FOUND, format!("no asset `{file}`\n")).into_response(),
    }
}
