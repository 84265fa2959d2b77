//! Who may read the admin server (docs/security.md, "The admin server").
//!
//! With a cluster secret, every endpoint but the health probes needs the cluster's admin token
//! ([`clasp_wire::auth::admin_token`], an HMAC of the secret): as `Authorization: Bearer TOKEN`
//! (curl, Prometheus), or as a cookie. A browser gets the cookie by opening any page once with
//! `?token=TOKEN` (the URL `clasp run` prints): the server answers with the cookie and a
//! redirect to the same page without the token, so the token leaves the address bar and the
//! history, and the dashboard's own requests carry the cookie. Without a secret the server
//! serves anyone, and binds loopback only unless it is told to be insecure.

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use clasp_wire::Secret;
use clasp_wire::auth::{BearerError, admin_token, check_admin_token, check_bearer};
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;

/// Who may read the server.
#[derive(Clone, Debug)]
pub enum Access {
    /// Every endpoint but [`OPEN_PATHS`] needs the admin token of this cluster secret.
    Token(Secret),
    /// Anyone who reaches it: the server must bind a loopback address.
    Loopback,
    /// Anyone who reaches it, on any address (`--insecure`).
    Insecure,
}

/// Served without a token: liveness and readiness, for probes (a load balancer's, Kubernetes')
/// that cannot hold a secret. They tell whether the job runs and how many workers joined.
pub const OPEN_PATHS: [&str; 2] = ["/healthz", "/readyz"];

/// The query parameter that hands a browser the token once.
pub const TOKEN_PARAM: &str = "token";

/// The check a token-protected server runs on every request.
#[derive(Debug)]
pub(crate) struct Guard {
    secret: Secret,
    /// The cookie's name: cookies ignore ports, so two servers on one host name theirs apart.
    cookie: String,
}

/// How a request proved the token.
enum Proof {
    /// In its `Authorization` header or its cookie.
    Held,
    /// In its query: answered with the cookie and a redirect.
    Handed,
}

/// Why a request was refused.
#[derive(Debug, thiserror::Error)]
enum Refusal {
    #[error("Authorization header: {0}")]
    Header(#[source] BearerError),
    #[error("`{TOKEN_PARAM}` in the query: {0}")]
    Query(#[source] BearerError),
    #[error("cookie: {0}")]
    Cookie(#[source] BearerError),
    #[error(
        "no token: send `Authorization: Bearer <token>` (`clasp admin-token` prints it), or open the dashboard at the URL with ?{TOKEN_PARAM}= that clasp printed"
    )]
    Missing,
}

impl Guard {
    pub(crate) fn new(secret: Secret, port: u16) -> Self {
        Self { secret, cookie: format!("clasp-admin-{port}") }
    }

    fn check(&self, headers: &HeaderMap, query: Option<&str>) -> Result<Proof, Refusal> {
        if let Some(value) = headers.get(header::AUTHORIZATION) {
            let value = value.to_str().map_err(|_| Refusal::Header(BearerError::Malformed))?;
            return check_bearer(&self.secret, Some(value))
                .map(|()| Proof::Held)
                .map_err(Refusal::Header);
        }
        if let Some(token) = query_token(query) {
            return check_admin_token(&self.secret, token)
                .map(|()| Proof::Handed)
                .map_err(Refusal::Query);
        }
        match self.cookie_token(headers) {
            Some(token) => check_admin_token(&self.secret, token)
                .map(|()| Proof::Held)
                .map_err(Refusal::Cookie),
            None => Err(Refusal::Missing),
        }
    }

    fn cookie_token<'h>(&self, headers: &'h HeaderMap) -> Option<&'h str> {
        headers
            .get_all(header::COOKIE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(';'))
            .find_map(|pair| {
                let (name, value) = pair.trim().split_once('=')?;
                (name == self.cookie).then_some(value)
            })
    }

    /// The answer to a valid `?token=`: the cookie, and the same page without the token.
    fn hand_cookie(&self, path: &str, query: Option<&str>) -> Response {
        let rest: Vec<&str> = query
            .unwrap_or_default()
            .split('&')
            .filter(|p| !p.is_empty() && p.split('=').next() != Some(TOKEN_PARAM))
            .collect();
        // A path of `//host` would send the browser to another site.
        let path = if path.starts_with("//") { "/" } else { path };
        let location =
            if rest.is_empty() { path.to_string() } else { format!("{path}?{}", rest.join("&")) };
        let cookie = format!(
            "{}={}; Path=/; HttpOnly; SameSite=Strict",
            self.cookie,
            admin_token(&self.secret)
        );
        let mut response = StatusCode::SEE_OTHER.into_response();
        let headers = response.headers_mut();
        for (name, value) in [
            (header::LOCATION, location),
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, "no-store".into()),
        ] {
            if let Ok(v) = HeaderValue::try_from(value) {
                headers.insert(name, v);
            }
        }
        response
    }
}

/// The value of `token=` in a query string.
fn query_token(query: Option<&str>) -> Option<&str> {
    query?.split('&').find_map(|pair| pair.strip_prefix(TOKEN_PARAM)?.strip_prefix('='))
}

/// The middleware of a token-protected server.
pub(crate) async fn guard(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    let path = req.uri().path().to_string();
    if OPEN_PATHS.contains(&path.as_str()) {
        return next.run(req).await;
    }
    let query = req.uri().query().map(str::to_string);
    match guard.check(req.headers(), query.as_deref()) {
        Ok(Proof::Held) => next.run(req).await,
        Ok(Proof::Handed) => guard.hand_cookie(&path, query.as_deref()),
        Err(refusal) => {
            let peer = req
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map_or_else(|| "an unknown peer".to_string(), |c| c.0.to_string());
            // The path only: a query may hold a (wrong) token.
            tracing::warn!("admin server: refused {} {path} from {peer}: {refusal}", req.method());
            unauthorized(&path, &refusal)
        }
    }
}

fn unauthorized(path: &str, refusal: &Refusal) -> Response {
    let challenge = [(header::WWW_AUTHENTICATE, "Bearer realm=\"clasp admin\"")];
    let message = format!("unauthorized: {refusal}");
    if path.starts_with("/api/") {
        (StatusCode::UNAUTHORIZED, challenge, axum::Json(json!({ "error": message })))
            .into_response()
    } else {
        (StatusCode::UNAUTHORIZED, challenge, format!("{message}\n")).into_response()
    }
}
