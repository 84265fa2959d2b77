//! The JSON API under `/api/v1/` (docs/admin-api.md): one GET endpoint per view of the
//! snapshot. Bad requests get a 4xx status and `{"error": "..."}` naming what is wrong.

use axum::extract::{Path, Query, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Json, extract::rejection::QueryRejection};
use clasp_runtime::observe::{Observatory, Snapshot};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;

/// The endpoints, with the query parameters each takes.
pub const ENDPOINTS: [(&str, &[&str]); 9] = [
    ("pipeline", &[]),
    ("placement", &[]),
    ("workers", &[]),
    ("operators", &[]),
    ("coefficients", &["since"]),
    ("events", &["since", "kind"]),
    ("autoscaler", &[]),
    ("counters", &[]),
    ("series", &["since"]),
];

/// Event kinds `events?kind=` accepts.
const EVENT_KINDS: [&str; 2] = ["rescale", "recommendation"];

/// A request the API refuses.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

impl ApiError {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.status, Json(json!({ "error": self.message }))).into_response()
    }
}

/// The parameters of one request, checked against the endpoint's.
struct Params(BTreeMap<String, String>);

impl Params {
    fn check(
        endpoint: &str,
        known: &[&str],
        q: Result<Query<BTreeMap<String, String>>, QueryRejection>,
    ) -> Result<Self, ApiError> {
        let Query(q) = q.map_err(|e| {
            ApiError::new(StatusCode::BAD_REQUEST, format!("bad query string: {}", e.body_text()))
        })?;
        if let Some(k) = q.keys().find(|k| !known.contains(&k.as_str())) {
            let takes = if known.is_empty() {
                "takes no parameters".to_string()
            } else {
                format!("takes {}", known.join(", "))
            };
            return Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("unknown parameter `{k}`: /api/v1/{endpoint} {takes}"),
            ));
        }
        Ok(Self(q))
    }

    /// `since` in seconds, if given: a finite number.
    fn since(&self) -> Result<Option<f64>, ApiError> {
        let Some(v) = self.0.get("since") else { return Ok(None) };
        match v.parse::<f64>() {
            Ok(t) if t.is_finite() => Ok(Some(t)),
            _ => Err(ApiError::new(
                StatusCode::BAD_REQUEST,
                format!("`since={v}` is not a number of seconds since the start of the run"),
            )),
        }
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).expect("views serialize to JSON")
}

/// The body of `endpoint` for `s`.
fn answer(endpoint: &str, s: &Snapshot, params: &Params) -> Result<Value, ApiError> {
    let since = params.since()?;
    let after = |t: f64| since.is_none_or(|s| t > s);
    Ok(match endpoint {
        "pipeline" => to_json(&s.pipeline),
        "placement" => match &s.placement {
            Some(p) => to_json(p),
            None => {
                return Err(ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "no placement is installed yet",
                ));
            }
        },
        "workers" => to_json(&s.workers),
        "operators" => to_json(&s.operators),
        "coefficients" => json!({
            "current": s.coefficients.current,
            "observations": s.coefficients.observations,
            "history": s.coefficients.history.iter().filter(|c| after(c.time_s)).collect::<Vec<_>>(),
        }),
        "events" => {
            let kind = params.0.get("kind").map(String::as_str);
            if let Some(k) = kind.filter(|k| !EVENT_KINDS.contains(k)) {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    format!("`kind={k}` is not an event kind; kinds: {}", EVENT_KINDS.join(", ")),
                ));
            }
            let events: Vec<_> = s
                .events
                .iter()
                .filter(|e| after(e.time_s) && kind.is_none_or(|k| e.kind == k))
                .collect();
            to_json(&events)
        }
        "autoscaler" => to_json(&s.autoscaler),
        "counters" => to_json(&s.counters),
        "series" => to_json(&s.series.iter().filter(|p| after(p.t)).collect::<Vec<_>>()),
        _ => unreachable!("endpoints are checked before"),
    })
}

/// `/api/v1/{endpoint}`.
pub async fn handle(
    State(obs): State<Arc<Observatory>>,
    method: Method,
    Path(endpoint): Path<String>,
    query: Result<Query<BTreeMap<String, String>>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Some((name, known)) = ENDPOINTS.iter().find(|(e, _)| *e == endpoint) else {
        let names: Vec<&str> = ENDPOINTS.iter().map(|(e, _)| *e).collect();
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            format!("no endpoint /api/v1/{endpoint}; endpoints: {}", names.join(", ")),
        ));
    };
    if method != Method::GET {
        return Err(ApiError::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!("/api/v1/{name} is read-only: use GET, not {method}"),
        ));
    }
    let params = Params::check(name, known, query)?;
    obs.read(|s| answer(name, s, &params)).map(Json)
}

/// Anything else under `/api/`.
pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    let names: Vec<&str> = ENDPOINTS.iter().map(|(e, _)| *e).collect();
    ApiError::new(
        StatusCode::NOT_FOUND,
        format!("no endpoint {}; endpoints under /api/v1/: {}", uri.path(), names.join(", ")),
    )
}
