//! Our own extractors: their rejections are the contract's envelope (`VALIDATION_ERROR` with
//! `detail.field`, `PAYLOAD_TOO_LARGE`), never axum's plain text.

use crate::error::{ApiError, ErrorCode};
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;

/// Maximum JSON body (CONTRACT §8).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A raw body that never rejects: the result is kept so a guarded handler can audit a refused
/// body like any other refusal.
pub struct RawBody(pub Result<Bytes, ApiError>);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = std::convert::Infallible;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let json = is_json(req.headers());
        let body = Bytes::from_request(req, state).await.map_err(body_rejection);
        // A body must say it is JSON: browsers send `text/plain` cross-site without a
        // preflight, and that must never be able to act on this API.
        Ok(RawBody(body.and_then(|b| {
            if json || b.iter().all(u8::is_ascii_whitespace) {
                Ok(b)
            } else {
                Err(ApiError::validation("content-type", "request bodies must be sent as application/json"))
            }
        })))
    }
}

fn is_json(headers: &axum::http::HeaderMap) -> bool {
    headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| is_json_type(&mime.trim().to_ascii_lowercase()))
}

/// `application/json` or an `application/*+json` type (lowercase, no parameters).
pub(crate) fn is_json_type(mime: &str) -> bool {
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

pub(crate) fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(ErrorCode::PayloadTooLarge, format!("Request body is larger than {MAX_BODY_BYTES} bytes"))
            .with_detail(serde_json::json!({"limit_bytes": MAX_BODY_BYTES}))
    } else {
        ApiError::validation("body", format!("could not read the request body: {rejection}"))
    }
}

/// Parses a JSON body; an empty body is `{}` so bodies whose fields are all optional may be
/// omitted. The failing field's path is reported (`detail.field`).
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    let body: &[u8] = if body.iter().all(u8::is_ascii_whitespace) { b"{}" } else { body };
    let mut de = serde_json::Deserializer::from_slice(body);
    let parsed: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            return ApiError::validation("body", format!("malformed JSON: {inner}"));
        }
        let reason = strip_location(&inner.to_string());
        // A missing field is reported at its parent; name the field itself.
        let named = reason.strip_prefix("missing field `").and_then(|rest| rest.split('`').next());
        let field = match (path.as_str(), named) {
            (".", Some(name)) => name.to_string(),
            (".", None) => "body".to_string(),
            (parent, Some(name)) => format!("{parent}.{name}"),
            (parent, None) => parent.to_string(),
        };
        ApiError::validation(field, reason)
    })?;
    de.end().map_err(|e| ApiError::validation("body", format!("malformed JSON: {e}")))?;
    Ok(parsed)
}

/// serde_json appends " at line 1 column 17"; the field path already says where.
fn strip_location(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

/// A JSON body with envelope rejections.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let RawBody(body) = RawBody::from_request(req, state).await.unwrap_or_else(|never| match never {});
        Ok(Json(parse_json(&body?)?))
    }
}

/// Query parameters with envelope rejections naming the parameter.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Query(value)),
            Err(rejection) => Err(query_rejection(rejection)),
        }
    }
}

fn query_rejection(rejection: QueryRejection) -> ApiError {
    // axum's text reads "Failed to deserialize query string: limit: invalid digit found in string".
    let text = rejection.body_text();
    let detail = text.split_once(": ").map(|(_, rest)| rest).unwrap_or(&text);
    match detail.split_once(": ") {
        Some((field, reason)) if !field.contains(' ') => ApiError::validation(field, reason),
        _ => ApiError::validation("query", detail.to_string()),
    }
}

/// Path parameters with envelope rejections.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Path(value)),
            Err(rejection) => Err(path_rejection(rejection)),
        }
    }
}

fn path_rejection(rejection: PathRejection) -> ApiError {
    ApiError::validation("path", rejection.body_text())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Req {
        name: String,
        n: Option<u32>,
    }

    #[test]
    fn reports_the_failing_field() {
        let e = parse_json::<Req>(br#"{"name":"x","n":"seven"}"#).unwrap_err();
        assert_eq!(e.detail["field"], "n");
        let e = parse_json::<Req>(br#"{"name":"x","extra":1}"#).unwrap_err();
        assert_eq!(e.detail["field"], "extra");
        assert!(e.detail["reason"].as_str().unwrap().contains("unknown field"), "{:?}", e.detail);
        let e = parse_json::<Req>(br#"{"n":1}"#).unwrap_err();
        assert_eq!(e.detail["field"], "name");
        assert!(e.detail["reason"].as_str().unwrap().contains("missing field `name`"), "{:?}", e.detail);
        let e = parse_json::<Req>(br#"{"name":"x""#).unwrap_err();
        assert!(e.detail["reason"].as_str().unwrap().starts_with("malformed JSON"), "{:?}", e.detail);
        let e = parse_json::<Req>(br#"{"name":"x"} trailing"#).unwrap_err();
        assert_eq!(e.detail["field"], "body");
    }

    #[test]
    fn empty_body_is_an_empty_object() {
        let e = parse_json::<Req>(b"  ").unwrap_err();
        assert!(e.detail["reason"].as_str().unwrap().contains("missing field"));
        assert!(parse_json::<serde_json::Value>(b"").unwrap().is_object());
    }
}
