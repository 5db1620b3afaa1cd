//! Our own extractors: their rejections are the contract's envelope (`VALIDATION_ERROR` with
//! `detail.field`, `PAYLOAD_TOO_LARGE`), never axum's plain text.

use crate::http::error::{ApiError, ErrorCode};
use crate::http::fields::{self, Source};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use bytes::Bytes;
use serde::de::DeserializeOwned;
use serde_json::Value;

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
        // preflight, and that must never be able to act on this API. Only a request without a
        // body (zero bytes) needs no content type; any byte at all, whitespace included, is a
        // body ([`parse_json`]).
        Ok(RawBody(body.and_then(|b| {
            if json || b.is_empty() {
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

/// Parses a JSON body. Only a body that is not JSON at all is refused as `body`: anything else
/// names the failing field by its path (`detail.field`) and says what it accepts
/// ([`crate::http::fields`]).
///
/// A body is JSON text (RFC 8259): one value, with only space, `\t`, `\n` and `\r` around it.
/// Any other byte sequence — a form feed, a vertical tab, a byte-order mark, whitespace with no
/// value — is not a request of no fields but a body that is not JSON, refused naming `body`
/// (CONTRACT §2: malformed JSON is `VALIDATION_ERROR`), so nothing is acted on.
///
/// No body at all (zero bytes) is refused naming `body` too: every write that takes a body
/// needs one (seed §4: "All bodies are JSON"; `{}` is the body of a request of no fields, as the
/// console sends it). The actions that take no request body (`DELETE /api/auth/tokens/{name}`
/// of CONTRACT §6, the job cancels) do not read one ([`crate::http::guard::Sensitive::run_bodyless`]).
pub fn parse_json<T: DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::validation("body", "is required: a JSON object of the request's fields ({} for none)"));
    }
    let (value, repeated) = read_json(body).map_err(|_| ApiError::validation("body", not_json(body)))?;
    // Every request body is an object of named fields (serde would also take a struct's
    // fields from an array, by position).
    let Value::Object(members) = &value else {
        return Err(ApiError::validation("body", "must be a JSON object of the request's fields"));
    };
    // A field given twice would silently take its last value (`"side":"SELL","side":"BUY"` a
    // buy), while a reader of the request — or its audit row — may take the first.
    if let Some(path) = repeated {
        return Err(ApiError::validation(path, "is given more than once; send each field once"));
    }
    let nulls: Vec<String> = members.iter().filter(|(_, v)| v.is_null()).map(|(k, _)| k.clone()).collect();
    let parsed: T = serde_path_to_error::deserialize(value).map_err(|e| {
        let path = e.path().to_string();
        ApiError::fields(vec![fields::explain(&path, &e.into_inner().to_string(), Source::Body)])
    })?;
    // `null` for an optional field would silently mean "the default": refuse it, naming it.
    if let Some(field) = nulls.first() {
        return Err(ApiError::fields(vec![fields::null(field)]));
    }
    Ok(parsed)
}

/// Why `body` (not empty) is not JSON text, in the words of [`parse_json`]'s refusal.
fn not_json(body: &[u8]) -> &'static str {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    if body.starts_with(BOM) {
        "starts with a byte-order mark, which JSON text does not have (RFC 8259 §8.1); send the JSON without it"
    } else if body.iter().all(|b| *b == b' ' || b.is_ascii_control()) {
        "holds no JSON value: send a JSON object of the request's fields (JSON whitespace is only space, tab, \
         line feed and carriage return)"
    } else {
        "is not valid JSON (check its quotes, commas and brackets)"
    }
}

/// Reads `body` as JSON in one pass, with the path of the first key repeated within one of its
/// objects, if any (building a [`Value`] keeps a repeated key's last value silently).
fn read_json(body: &[u8]) -> Result<(Value, Option<String>), serde_json::Error> {
    use serde::de::{DeserializeSeed, MapAccess, SeqAccess, Visitor};

    /// Reads the JSON value at `path`, noting the first repeated key's path below it.
    struct Read(String);

    impl<'de> DeserializeSeed<'de> for Read {
        type Value = (Value, Option<String>);
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(self)
        }
    }

    impl<'de> Visitor<'de> for Read {
        type Value = (Value, Option<String>);
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("any JSON value")
        }
        fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
            Ok((Value::Bool(v), None))
        }
        fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
            Ok((Value::from(v), None))
        }
        fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
            Ok((Value::from(v), None))
        }
        fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
            Ok((Value::from(v), None))
        }
        fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
            Ok((Value::String(v.to_string()), None))
        }
        fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
            Ok((Value::String(v), None))
        }
        fn visit_unit<E>(self) -> Result<Self::Value, E> {
            Ok((Value::Null, None))
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let (mut items, mut repeated) = (Vec::new(), None);
            while let Some((item, inner)) = seq.next_element_seed(Read(format!("{}[{}]", self.0, items.len())))? {
                items.push(item);
                repeated = repeated.or(inner);
            }
            Ok((Value::Array(items), repeated))
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
            let (mut members, mut repeated) = (serde_json::Map::new(), None);
            while let Some(key) = map.next_key::<String>()? {
                let path = if self.0.is_empty() { key.clone() } else { format!("{}.{key}", self.0) };
                let (item, inner) = map.next_value_seed(Read(path.clone()))?;
                if members.insert(key, item).is_some() {
                    repeated = repeated.or(Some(path));
                }
                repeated = repeated.or(inner);
            }
            Ok((Value::Object(members), repeated))
        }
    }

    let mut de = serde_json::Deserializer::from_slice(body);
    let read = Read(String::new()).deserialize(&mut de)?;
    de.end()?;
    Ok(read)
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

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        parse_query(parts.uri.query().unwrap_or_default()).map(Query)
    }
}

/// Parses a query string, naming the refused parameter and what it accepts.
pub fn parse_query<T: DeserializeOwned>(query: &str) -> Result<T, ApiError> {
    let de = serde_urlencoded::Deserializer::new(form_urlencoded::parse(query.as_bytes()));
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        ApiError::fields(vec![fields::explain(&path, &e.into_inner().to_string(), Source::Query)])
    })
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
        assert_eq!(e.detail["reason"], "is not a field of this request; its fields are name, n");
        let e = parse_json::<Req>(br#"{"n":1}"#).unwrap_err();
        assert_eq!(e.detail["field"], "name");
        assert_eq!(e.detail["reason"], "is required: 1 to 64 characters of A-Z, a-z, 0-9, '_', '.' and '-'");
        let e = parse_json::<Req>(br#"{"name":"x""#).unwrap_err();
        assert_eq!(e.detail["field"], "body");
        assert!(!e.message.contains("line"), "{}", e.message);
        let e = parse_json::<Req>(br#"{"name":"x","n":null}"#).unwrap_err();
        assert_eq!(e.detail["field"], "n");
        let e = parse_json::<Req>(br#"[1]"#).unwrap_err();
        assert_eq!(e.detail["field"], "body");
        let e = parse_json::<Req>(br#"{"name":"x"} trailing"#).unwrap_err();
        assert_eq!(e.detail["field"], "body");
    }

    #[test]
    fn a_field_given_twice_is_refused_naming_it() {
        let e = parse_json::<Req>(br#"{"name":"sell","n":1,"name":"buy"}"#).unwrap_err();
        assert_eq!(
            (e.detail["field"].as_str(), e.detail["reason"].as_str()),
            (Some("name"), Some("is given more than once; send each field once"))
        );
        let repeated_key = |body: &[u8]| read_json(body).unwrap().1;
        assert_eq!(repeated_key(br#"{"a":{"b":1,"b":2}}"#).as_deref(), Some("a.b"));
        assert_eq!(repeated_key(br#"{"a":[{"c":1},{"c":1,"c":2}]}"#).as_deref(), Some("a[1].c"));
        assert_eq!(repeated_key(br#"{"a":[{"c":1},{"c":2}],"b":{"c":3}}"#), None, "the same key in different objects");
        assert!(parse_json::<Req>(br#"{"name":"x","n":1}"#).is_ok());
    }

    #[test]
    fn query_parameters_are_named() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Q {
            limit: Option<u32>,
        }
        let e = parse_query::<Q>("limit=abc").unwrap_err();
        assert_eq!(
            (e.detail["field"].as_str(), e.detail["reason"].as_str()),
            (Some("limit"), Some("must be a whole number from 1 to 1,000"))
        );
        let e = parse_query::<Q>("lim=1").unwrap_err();
        assert_eq!(e.detail["field"], "lim");
        assert!(parse_query::<Q>("").unwrap().limit.is_none());
    }

    #[test]
    fn no_body_is_refused_naming_body() {
        #[derive(Debug, Deserialize)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct AllOptional {
            n: Option<u32>,
        }
        // Even a request of no required fields needs its body (`{}`); the body is named.
        for e in [parse_json::<AllOptional>(b"").unwrap_err(), parse_json::<Req>(b"").unwrap_err()] {
            assert_eq!(
                (e.detail["field"].as_str(), e.detail["reason"].as_str()),
                (Some("body"), Some("is required: a JSON object of the request's fields ({} for none)"))
            );
        }
        assert!(parse_json::<AllOptional>(b"{}").unwrap().n.is_none());
    }

    /// Only space, tab, line feed and carriage return are JSON whitespace (RFC 8259 §2); any
    /// other body without a JSON value is refused naming `body`, whatever the request's type.
    #[test]
    fn a_body_that_is_not_json_text_is_refused_naming_body() {
        let bodies: [&[u8]; 12] = [
            b"\x0c",
            b"\x0b",
            b" \x0c\t\r\n",
            b"  ",
            b"\n",
            b"\x00",
            b"\xEF\xBB\xBF",
            b"\xEF\xBB\xBF{}",
            b"abc",
            b"{",
            b"\x0c{}",
            b"{}\x0c",
        ];
        for body in bodies {
            for e in [
                parse_json::<serde_json::Value>(body).unwrap_err(),
                parse_json::<Req>(body).unwrap_err(),
                parse_json::<serde_json::Map<String, Value>>(body).unwrap_err(),
            ] {
                assert_eq!(e.code, ErrorCode::ValidationError, "{body:?}");
                assert_eq!(e.detail["field"], "body", "{body:?}: {}", e.detail);
            }
        }
        let reason =
            |body: &[u8]| parse_json::<Value>(body).unwrap_err().detail["reason"].as_str().unwrap().to_string();
        assert!(reason(b"\x0c").starts_with("holds no JSON value"), "{}", reason(b"\x0c"));
        assert!(reason(b"\xEF\xBB\xBF").starts_with("starts with a byte-order mark"));
        assert!(reason(b"abc").starts_with("is not valid JSON"));
        // JSON whitespace around the value is JSON text.
        assert!(parse_json::<Value>(b" \t\r\n{} \t\r\n").unwrap().is_object());
    }
}
