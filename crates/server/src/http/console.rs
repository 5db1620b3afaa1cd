//! The operator console: the files of `console/dist`, built into the binary, served at `/`.
//! `console.dir` (`TRADEOPS_CONSOLE_DIR`) serves them from a folder instead, for working on
//! the console without rebuilding the service.
//!
//! Each built-in file is served gzip-compressed to clients that accept it (compressed once, on
//! first use), with an `ETag` and `Cache-Control: no-cache`, so a browser revalidates and gets
//! `304 Not Modified` until the service is upgraded. A strict Content-Security-Policy allows
//! nothing from other origins.

use crate::http::state::AppState;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use sha2::{Digest, Sha256};
use std::io::Write;
use std::sync::OnceLock;

/// One file of the console.
pub struct Asset {
    pub name: &'static str,
    pub content_type: &'static str,
    pub bytes: &'static [u8],
}

macro_rules! asset {
    ($name:literal, $type:literal) => {
        Asset {
            name: $name,
            content_type: $type,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../console/dist/", $name)),
        }
    };
}

/// Every file of the built console.
pub static ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.js", "text/javascript; charset=utf-8"),
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("theme.js", "text/javascript; charset=utf-8"),
];

/// The console allows only its own origin: scripts, styles, and the API it calls.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                   connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'";

pub fn router() -> Router<AppState> {
    Router::new().route("/", get(index)).route("/assets/{name}", get(asset))
}

async fn index(State(state): State<AppState>, headers: HeaderMap) -> Response {
    serve(&state, "index.html", &headers).await
}

async fn asset(State(state): State<AppState>, Path(name): Path<String>, headers: HeaderMap) -> Response {
    if name == "index.html" {
        return missing(&name);
    }
    serve(&state, &name, &headers).await
}

/// The built-in files, each with its gzip body and entity tag, prepared once.
struct Prepared {
    asset: &'static Asset,
    /// Shared, so a response costs a reference count rather than a copy.
    gzip: bytes::Bytes,
    etag: String,
}

fn prepared() -> &'static [Prepared] {
    static PREPARED: OnceLock<Vec<Prepared>> = OnceLock::new();
    PREPARED.get_or_init(|| {
        ASSETS
            .iter()
            .map(|asset| {
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
                gz.write_all(asset.bytes).expect("writing to memory");
                let gzip = bytes::Bytes::from(gz.finish().expect("writing to memory"));
                let etag = format!("\"{}\"", &hex::encode(Sha256::digest(asset.bytes))[..20]);
                Prepared { asset, gzip, etag }
            })
            .collect()
    })
}

/// Sizes of the built-in console's files as sent to a browser that accepts gzip:
/// `(name, bytes, gzip bytes)`.
pub fn transfer_sizes() -> Vec<(&'static str, usize, usize)> {
    prepared().iter().map(|p| (p.asset.name, p.asset.bytes.len(), p.gzip.len())).collect()
}

async fn serve(state: &AppState, name: &str, headers: &HeaderMap) -> Response {
    let content_type = match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => a.content_type,
        None => return missing(name),
    };
    if let Some(dir) = &state.config.console_dir {
        return match tokio::fs::read(dir.join(name)).await {
            Ok(bytes) => with_headers(Response::new(Body::from(bytes)), content_type, None),
            Err(_) => missing(name),
        };
    }
    let p = prepared().iter().find(|p| p.asset.name == name).expect("every asset is prepared");
    if headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == p.etag))
    {
        let mut r = with_headers(Response::new(Body::empty()), content_type, Some(&p.etag));
        *r.status_mut() = StatusCode::NOT_MODIFIED;
        return r;
    }
    let gzip_ok = headers
        .get(header::ACCEPT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|e| e.split(';').next().is_some_and(|e| e.trim() == "gzip")));
    let mut r = if gzip_ok {
        let mut r = Response::new(Body::from(p.gzip.clone()));
        r.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        r
    } else {
        Response::new(Body::from(p.asset.bytes))
    };
    r.headers_mut().insert(header::VARY, HeaderValue::from_static("accept-encoding"));
    with_headers(r, content_type, Some(&p.etag))
}

fn missing(name: &str) -> Response {
    crate::http::error::ApiError::not_found(format!("The console has no file {name:?}"))
        .with_detail(serde_json::json!({"path": format!("/assets/{name}")}))
        .into_response()
}

fn with_headers(mut r: Response, content_type: &'static str, etag: Option<&str>) -> Response {
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    if let Some(tag) = etag.and_then(|t| HeaderValue::from_str(t).ok()) {
        h.insert(header::ETAG, tag);
    }
    r
}
