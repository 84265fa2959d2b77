//! Who may read the admin server, over real HTTP requests: with a cluster secret, every endpoint
//! but the probes refuses a request without the admin token, with a wrong one (another
//! cluster's, the secret itself, a cut one) with 401 and a log line naming the client, and
//! answers the right one (header or cookie) exactly as an open server over the same job does;
//! `?token=` is exchanged for a cookie; without a secret the server binds loopback only.

mod common;

use clasp_admin::{Access, AdminError, AdminServer};
use clasp_plan::autoscaler::Mode;
use clasp_runtime::observe::Observatory;
use clasp_wire::Secret;
use common::{Answer, exchange, secret, token};
use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, OnceLock};

fn log() -> &'static Mutex<Vec<u8>> {
    static LOG: OnceLock<Mutex<Vec<u8>>> = OnceLock::new();
    LOG.get_or_init(|| {
        tracing_subscriber::fmt().with_writer(|| Capture).with_ansi(false).init();
        Mutex::new(Vec::new())
    })
}

struct Capture;

impl Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        clasp_core::sync::lock(log()).extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn logged() -> String {
    String::from_utf8_lossy(&clasp_core::sync::lock(log())).into_owned()
}

/// A protected server and an open one over the same observatory.
fn servers() -> (AdminServer, AdminServer) {
    log();
    let p = common::pipeline("wc.toml");
    let obs = Arc::new(Observatory::new(&p, "static", Mode::Act));
    let protected =
        AdminServer::start("127.0.0.1:0", obs.clone(), Access::Token(secret().clone())).unwrap();
    let open = AdminServer::start("127.0.0.1:0", obs, Access::Loopback).unwrap();
    (protected, open)
}

/// Every kind of endpoint: the dashboard, an asset, the metrics, the API, an unknown API path.
const PROTECTED: [&str; 6] = [
    "/",
    "/assets/app.js",
    "/metrics",
    "/api/v1/pipeline",
    "/api/v1/events?kind=rescale",
    "/api/v1/nothing",
];

fn get(addr: SocketAddr, path: &str, headers: &[(&str, &str)]) -> Answer {
    exchange(addr, "GET", path, headers)
}

fn bearer(t: &str) -> String {
    format!("Bearer {t}")
}

fn assert_refused(a: &Answer, what: &str) {
    assert_eq!(a.status, 401, "{what}: {}", a.body);
    assert_eq!(a.header("www-authenticate"), Some("Bearer realm=\"clasp admin\""), "{what}");
    assert!(!a.body.contains(&token()), "{what}: the answer shows the token");
    let me = a.local.to_string();
    assert!(
        logged().lines().any(|l| l.contains("refused") && l.contains(&me)),
        "{what}: no log line names {me}"
    );
}

#[test]
fn without_the_token_every_endpoint_but_the_probes_is_refused() {
    let (server, _open) = servers();
    let other = clasp_wire::auth::admin_token(&Secret::parse(&"x".repeat(40), "t").unwrap());
    let good = token();
    let cut = &good[..good.len() - 1];
    let wrong: Vec<(String, Vec<(&str, String)>)> = vec![
        ("no token".into(), vec![]),
        ("another cluster's token".into(), vec![("Authorization", bearer(&other))]),
        ("the secret itself".into(), vec![("Authorization", bearer(secret().expose()))]),
        ("a cut token".into(), vec![("Authorization", bearer(cut))]),
        ("no scheme".into(), vec![("Authorization", good.clone())]),
        ("basic".into(), vec![("Authorization", format!("Basic {good}"))]),
        (
            "a wrong cookie".into(),
            vec![("Cookie", format!("clasp-admin-{}={other}", server.addr().port()))],
        ),
        ("another server's cookie".into(), vec![("Cookie", format!("clasp-admin-1={good}"))]),
    ];
    for path in PROTECTED {
        for (what, headers) in &wrong {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            let a = get(server.addr(), path, &headers);
            assert_refused(&a, &format!("{path} with {what}"));
            if path.starts_with("/api/") {
                let v: serde_json::Value = serde_json::from_str(&a.body).unwrap();
                assert!(v["error"].as_str().unwrap().starts_with("unauthorized"), "{v}");
            }
        }
        // A wrong token in the query is refused too, and not exchanged for a cookie.
        let sep = if path.contains('?') { '&' } else { '?' };
        let a = get(server.addr(), &format!("{path}{sep}token={other}"), &[]);
        assert_refused(&a, &format!("{path} with a wrong ?token="));
        assert_eq!(a.header("set-cookie"), None);
        assert!(!logged().contains(&other), "the log shows a query's token");
    }
}

#[test]
fn the_right_token_gets_what_an_open_server_answers() {
    let (server, open) = servers();
    let auth = bearer(&token());
    for path in PROTECTED {
        let want = get(open.addr(), path, &[]);
        let got = get(server.addr(), path, &[("Authorization", &auth)]);
        assert_eq!((got.status, &got.body), (want.status, &want.body), "{path}");
        let cookie = format!("clasp-admin-{}={}", server.addr().port(), token());
        let got = get(server.addr(), path, &[("Cookie", &format!("theme=dark; {cookie}"))]);
        assert_eq!((got.status, &got.body), (want.status, &want.body), "{path} by cookie");
    }
    // The probes need no token, and answer as the open server's do.
    for path in clasp_admin::access::OPEN_PATHS {
        let want = get(open.addr(), path, &[]);
        let got = get(server.addr(), path, &[]);
        assert_eq!((got.status, &got.body), (want.status, &want.body), "{path}");
    }
}

#[test]
fn a_token_in_the_query_is_exchanged_for_a_cookie() {
    let (server, _open) = servers();
    let cookie_name = format!("clasp-admin-{}", server.addr().port());
    for (path, location) in [
        (format!("/?token={}", token()), "/"),
        (format!("/api/v1/events?kind=rescale&token={}", token()), "/api/v1/events?kind=rescale"),
        (format!("//elsewhere.example?token={}", token()), "/"),
    ] {
        let a = get(server.addr(), &path, &[]);
        assert_eq!(a.status, 303, "{path}: {}", a.body);
        assert_eq!(a.header("location"), Some(location), "{path}");
        let cookie = a.header("set-cookie").expect("a cookie");
        let (pair, attributes) = cookie.split_once(';').unwrap();
        assert_eq!(pair, format!("{cookie_name}={}", token()));
        for attr in ["HttpOnly", "SameSite=Strict", "Path=/"] {
            assert!(attributes.contains(attr), "{cookie}");
        }
        // The cookie opens the page it was sent to.
        let next = get(server.addr(), location, &[("Cookie", pair)]);
        assert_eq!(next.status, 200, "{location}: {}", next.body);
    }
    // The dashboard URL the server gives carries the token.
    assert_eq!(server.dashboard_url(), format!("{}?token={}", server.url(), token()));
    assert_eq!(server.token(), Some(token().as_str()));
}

#[test]
fn without_a_secret_the_server_binds_loopback_only() {
    let p = common::pipeline("wc.toml");
    let obs = || Arc::new(Observatory::new(&p, "static", Mode::Act));
    match AdminServer::start("0.0.0.0:0", obs(), Access::Loopback) {
        Err(e @ AdminError::Unprotected { .. }) => {
            let message = e.to_string();
            for hint in ["--token-file", "127.0.0.1", "--insecure"] {
                assert!(message.contains(hint), "{message}");
            }
        }
        other => panic!("an open server bound every address: {other:?}"),
    }
    let open = AdminServer::start("0.0.0.0:0", obs(), Access::Insecure).unwrap();
    assert!(open.addr().ip().is_unspecified() && open.token().is_none());
    assert_eq!(open.dashboard_url(), open.url());
    let guarded = AdminServer::start("0.0.0.0:0", obs(), Access::Token(secret().clone())).unwrap();
    let to = SocketAddr::from(([127, 0, 0, 1], guarded.addr().port()));
    assert_eq!(get(to, "/metrics", &[]).status, 401);
}
