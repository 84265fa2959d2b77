//! clasp-admin: the planner's admin HTTP server. It serves
//! - `/metrics`: the Prometheus text exposition of the running job ([`metrics`]);
//! - `/healthz`, `/readyz`: liveness, and readiness once a placement runs on every worker;
//! - `/api/v1/...`: the JSON views of docs/admin-api.md ([`api`]);
//! - `/`: the live dashboard, its assets embedded in the binary ([`dashboard`]).
//!
//! With a cluster secret every endpoint but the probes needs the admin token ([`access`]).
//!
//! The server runs on one OS thread with a single-threaded tokio runtime; it only reads the
//! job's [`Observatory`], which the job's control thread updates once per interval, so the
//! data plane (OS threads and crossbeam queues) never meets the async runtime.

pub mod access;
pub mod api;
pub mod dashboard;
pub mod metrics;

pub use access::Access;

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::{any, get};
use clasp_runtime::observe::Observatory;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;
use tokio::sync::oneshot;

/// Why the admin server could not start or ended badly.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The address could not be bound.
    #[error("admin server: cannot listen on {addr}")]
    Bind {
        /// The address asked for.
        addr: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// No secret protects it and the address is beyond this machine.
    #[error(
        "admin server: {addr} is reachable beyond this machine and no cluster secret protects it: give --token-file FILE (or set CLASP_TOKEN), listen on 127.0.0.1, or run with --insecure"
    )]
    Unprotected {
        /// The address bound.
        addr: SocketAddr,
    },
    /// The runtime could not be built or the server failed.
    #[error("admin server: {what}")]
    Io {
        /// What failed.
        what: &'static str,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The name of the server's thread.
pub const THREAD_NAME: &str = "admin";

/// A running admin server; dropping it stops it.
#[derive(Debug)]
pub struct AdminServer {
    addr: SocketAddr,
    token: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<Result<(), AdminError>>>,
}

/// The routes over `obs`, each behind the token of `access` but the probes.
pub fn router(obs: Arc<Observatory>, access: &Access, port: u16) -> Router {
    let routes = routes(obs);
    match access {
        Access::Token(secret) => routes.layer(axum::middleware::from_fn_with_state(
            Arc::new(access::Guard::new(secret.clone(), port)),
            access::guard,
        )),
        Access::Loopback | Access::Insecure => routes,
    }
}

fn routes(obs: Arc<Observatory>) -> Router {
    Router::new()
        .route("/", get(dashboard::index))
        .route("/assets/{file}", get(dashboard::asset))
        .route("/metrics", get(scrape))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .route("/api/v1/{endpoint}", any(api::handle))
        .route("/api/{*rest}", any(api::not_found))
        .with_state(obs)
}

async fn scrape(State(obs): State<Arc<Observatory>>) -> impl IntoResponse {
    match obs.read(metrics::encode) {
        Ok(body) => (StatusCode::OK, [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)], body),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/plain")],
            format!("encoding the metrics failed: {e}\n").into_bytes(),
        ),
    }
}

async fn ready(State(obs): State<Arc<Observatory>>) -> (StatusCode, String) {
    obs.read(|s| match (&s.placement, s.ready()) {
        (_, true) => (StatusCode::OK, "ready\n".into()),
        (None, _) => {
            (StatusCode::SERVICE_UNAVAILABLE, "not ready: no placement installed\n".into())
        }
        (Some(p), false) => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("not ready: {} of {} workers joined\n", s.workers.len(), p.workers),
        ),
    })
}

impl AdminServer {
    /// Binds `addr` (e.g. `127.0.0.1:9898`; port 0 picks one) and serves `obs` from a thread
    /// of its own to whoever `access` lets in. Without a secret ([`Access::Loopback`]) an
    /// address beyond this machine is refused.
    pub fn start(addr: &str, obs: Arc<Observatory>, access: Access) -> Result<Self, AdminError> {
        let bind = |source| AdminError::Bind { addr: addr.into(), source };
        let listener = std::net::TcpListener::bind(addr).map_err(bind)?;
        let local = listener.local_addr().map_err(bind)?;
        if matches!(access, Access::Loopback) && !local.ip().is_loopback() {
            return Err(AdminError::Unprotected { addr: local });
        }
        let token = match &access {
            Access::Token(secret) => Some(clasp_wire::auth::admin_token(secret)),
            Access::Loopback | Access::Insecure => None,
        };
        let app =
            router(obs, &access, local.port()).into_make_service_with_connect_info::<SocketAddr>();
        listener.set_nonblocking(true).map_err(bind)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(|source| AdminError::Io { what: "starting its runtime", source })?;
        let (stop, stopped) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name(THREAD_NAME.into())
            .spawn(move || {
                runtime.block_on(async move {
                    let listener = tokio::net::TcpListener::from_std(listener)
                        .map_err(|source| AdminError::Io { what: "listening", source })?;
                    axum::serve(listener, app)
                        .with_graceful_shutdown(async {
                            let _ = stopped.await;
                        })
                        .await
                        .map_err(|source| AdminError::Io { what: "serving", source })
                })
            })
            .map_err(|source| AdminError::Io { what: "starting its thread", source })?;
        Ok(Self { addr: local, token, stop: Some(stop), thread: Some(thread) })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR/`.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// The admin token requests must carry, if a secret protects the server.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// The dashboard's address to open in a browser: with `?token=` if a secret protects the
    /// server (the browser exchanges it for a cookie on the first request).
    pub fn dashboard_url(&self) -> String {
        match &self.token {
            Some(t) => format!("{}?{}={t}", self.url(), access::TOKEN_PARAM),
            None => self.url(),
        }
    }

    /// Stops serving and waits for the server's thread.
    pub fn stop(mut self) -> Result<(), AdminError> {
        self.shutdown()
    }

    fn shutdown(&mut self) -> Result<(), AdminError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(AdminError::Io {
                what: "its thread panicked",
                source: std::io::Error::other("admin thread panicked"),
            }),
            None => Ok(()),
        }
    }
}

impl Drop for AdminServer {
    fn drop(&mut self) {
        if let Err(e) = self.shutdown() {
            tracing::warn!("{e}");
        }
    }
}
