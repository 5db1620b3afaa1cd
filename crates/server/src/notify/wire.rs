//! The HTTP wire of each notification channel: one request, one classified [`Outcome`].
//!
//! Telegram's Bot API (send, answer a button, long-poll for commands), Discord and Slack
//! incoming webhooks, ntfy topics and a generic signed webhook, each as the few lines of
//! `reqwest` it takes. No queueing, retries or rate limiting here: the dispatcher decides what
//! to do with an [`Outcome`]; this module only says what the channel answered.
//!
//! Why not a crate: `frankenstein` (WTFPL licence) and `teloxide` (a whole bot framework with
//! its own dispatching) bring the Bot API's full surface for the three methods used here;
//! `twilight-http` is a Discord bot client, not a webhook poster; the `ntfy` crate wraps one
//! POST. The workspace's `reqwest` (rustls, bundled roots) already speaks all of it, and a
//! thin client keeps every request and its secrets in view.
//!
//! What an answer means, for every channel alike: 2xx is [`Outcome::Sent`] (Telegram also
//! needs `ok` not `false`); `429` is [`Outcome::RetryAfter`] the wait the channel named (1 s
//! when it named none); a network error, a timeout, `408`, `5xx` and Telegram's `409` are
//! [`Outcome::Retry`]; any other answer (`400`, `401`, `403`, `404`, a redirect) is
//! [`Outcome::Failed`].
//!
//! Secrets never leave through an outcome: the bot token travels in Telegram's URL path,
//! Discord and Slack webhook URLs carry their token, ntfy topics and webhooks may carry
//! credentials. No outcome text formats a URL (transport errors go through
//! [`reqwest::Error::without_url`]), and every text is scrubbed of the request's URL, its
//! long path segments and query values, and its secrets before it is returned, in case a
//! server echoes them.

use std::time::Duration;

use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION, CONTENT_TYPE, RETRY_AFTER};
use reqwest::{RequestBuilder, StatusCode};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

/// The wait after a `429` that names none.
const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);
/// The most characters of a channel's own words quoted in an outcome.
const QUOTED_CHARS: usize = 200;
/// The most of an answer read: a send's answer is small.
const ANSWER_BYTES: usize = 64 * 1024;
/// The most of a `getUpdates` answer read: up to 100 updates of up to 4,096 characters each.
const UPDATES_BYTES: usize = 8 * 1024 * 1024;
/// Path segments and query values this long are treated as possible secrets when scrubbing.
const SECRET_PIECE_CHARS: usize = 8;

/// What one request's answer means for the delivery.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Delivered.
    Sent,
    /// The channel's rate limit: try again after this long (a `429`'s `retry_after`:
    /// Telegram's JSON `parameters.retry_after` seconds, Discord's JSON `retry_after` seconds
    /// (may be fractional), or the `Retry-After` header in seconds for Slack, ntfy and
    /// webhooks; 1 s if a 429 gives none). The text says what happened, for `last_error`.
    RetryAfter(Duration, String),
    /// Worth retrying with backoff: a network error, a timeout (a channel that never
    /// answers), a 5xx, a 408.
    Retry(String),
    /// Will not succeed if repeated: any other 4xx (400 chat not found, 401/403 bad token,
    /// 404 webhook deleted), a redirect, Telegram `ok:false` without `retry_after`.
    Failed(String),
}

impl Outcome {
    fn map_text(self, change: impl Fn(String) -> String) -> Outcome {
        match self {
            Outcome::Sent => Outcome::Sent,
            Outcome::RetryAfter(wait, text) => Outcome::RetryAfter(wait, change(text)),
            Outcome::Retry(text) => Outcome::Retry(change(text)),
            Outcome::Failed(text) => Outcome::Failed(change(text)),
        }
    }
}

/// A ntfy notification: the topic's URL and token are given beside it.
#[derive(Clone, Debug)]
pub struct NtfyMessage<'a> {
    /// The `Title` header; none when empty (ntfy then shows the topic).
    pub title: &'a str,
    /// The request body: the notification's text.
    pub body: &'a str,
    /// ntfy's 1 (min) to 5 (max); values outside are clamped.
    pub priority: u8,
    /// ntfy tags (emoji short codes among them), sent comma separated.
    pub tags: &'a [&'a str],
    /// Where tapping the notification leads (the console).
    pub click: Option<&'a str>,
}

/// One Telegram update, only the parts the commands need.
#[derive(Clone, Debug, PartialEq)]
pub struct TelegramUpdate {
    pub update_id: i64,
    pub kind: UpdateKind,
}

#[derive(Clone, Debug, PartialEq)]
pub enum UpdateKind {
    /// A text message: `message.chat.id`, `message.from`, `message.text`.
    Message { chat_id: i64, user: TelegramUser, text: String },
    /// A pressed inline button: `callback_query.id`, `.from`, `.message.chat.id`, `.data`.
    Callback { callback_id: String, chat_id: i64, user: TelegramUser, data: String },
    /// Anything else (edited messages, stickers, a message without a sender, …): skipped, but
    /// its `update_id` still advances the offset.
    Other,
}

/// The Telegram user behind a message or a button.
#[derive(Clone, Debug, PartialEq)]
pub struct TelegramUser {
    pub id: i64,
    pub username: Option<String>,
    /// `first_name`, and `last_name` after a space when there is one.
    pub name: String,
}

impl TelegramUser {
    /// How the audit names this person: `telegram:@username`, or `telegram:<id>` without one.
    pub fn actor(&self) -> String {
        match &self.username {
            Some(username) => format!("telegram:@{username}"),
            None => format!("telegram:{}", self.id),
        }
    }
}

/// The channels' HTTP client.
#[derive(Clone, Debug)]
pub struct Wire {
    client: reqwest::Client,
    timeout: Duration,
}

impl Wire {
    /// Requests time out after `timeout` (a channel that accepts the connection and never
    /// answers). Redirects are not followed: a POST turned into a GET would look delivered.
    pub fn new(timeout: Duration) -> Wire {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("tradeops/", env!("CARGO_PKG_VERSION")))
            .build()
            .expect("an HTTPS client with bundled roots builds");
        Wire { client, timeout }
    }

    /// Telegram `POST {api_url}/bot{token}/sendMessage` with `{chat_id, text,
    /// disable_web_page_preview: true, reply_markup?}`. No `parse_mode`: plain text, so nothing
    /// in a symbol or a reason can break Markdown. `ok:true` is [`Outcome::Sent`].
    pub async fn telegram_send(
        &self,
        api_url: &str,
        bot_token: &str,
        chat_id: i64,
        text: &str,
        reply_markup: Option<&Value>,
    ) -> Outcome {
        let mut body = json!({"chat_id": chat_id, "text": text, "disable_web_page_preview": true});
        if let Some(markup) = reply_markup {
            body["reply_markup"] = markup.clone();
        }
        match self.telegram(api_url, bot_token, "sendMessage", &body, self.timeout, ANSWER_BYTES).await {
            Ok(_) => Outcome::Sent,
            Err(outcome) => outcome,
        }
    }

    /// Telegram `POST {api_url}/bot{token}/answerCallbackQuery` with `{callback_query_id, text}`:
    /// the pressed button's spinner stops and `text` shows briefly.
    pub async fn telegram_answer_callback(
        &self,
        api_url: &str,
        bot_token: &str,
        callback_query_id: &str,
        text: &str,
    ) -> Outcome {
        let body = json!({"callback_query_id": callback_query_id, "text": text});
        match self.telegram(api_url, bot_token, "answerCallbackQuery", &body, self.timeout, ANSWER_BYTES).await {
            Ok(_) => Outcome::Sent,
            Err(outcome) => outcome,
        }
    }

    /// Telegram `POST {api_url}/bot{token}/getUpdates` with `{offset, timeout: poll_seconds,
    /// allowed_updates: ["message", "callback_query"]}`, waiting up to `poll_seconds` plus this
    /// wire's timeout. The parsed updates, or why there are none: `RetryAfter`, `Retry` (a
    /// `409 Conflict` is another poller on the same bot, which may go away) or `Failed`.
    pub async fn telegram_updates(
        &self,
        api_url: &str,
        bot_token: &str,
        offset: i64,
        poll_seconds: u32,
    ) -> Result<Vec<TelegramUpdate>, Outcome> {
        let body = json!({
            "offset": offset,
            "timeout": poll_seconds,
            "allowed_updates": ["message", "callback_query"],
        });
        let timeout = Duration::from_secs(poll_seconds.into()) + self.timeout;
        let answer = self.telegram(api_url, bot_token, "getUpdates", &body, timeout, UPDATES_BYTES).await;
        match answer?.as_array() {
            Some(updates) => Ok(updates.iter().filter_map(telegram_update).collect()),
            None => Err(Outcome::Retry("unreadable getUpdates answer: no list of updates".into())),
        }
    }

    /// Discord webhook: `POST webhook_url` with `{content, allowed_mentions: {parse: []}}` (no
    /// text can ping `@everyone` or a role). `204` (or `200`) is [`Outcome::Sent`]. Discord
    /// refuses `content` over 2,000 characters with a `400`.
    pub async fn discord(&self, webhook_url: &str, content: &str) -> Outcome {
        let body = json!({"content": content, "allowed_mentions": {"parse": []}});
        let request = self.client.post(webhook_url).json(&body);
        self.send(request, Dialect::Discord, &Scrub::new(webhook_url, &[])).await
    }

    /// Slack incoming webhook: `POST webhook_url` with `{text}`; `200` (body `ok`) is
    /// [`Outcome::Sent`]. `&`, `<` and `>` are escaped as Slack asks, so the text shows as
    /// written and nothing in it becomes a link or an `@channel` mention.
    pub async fn slack(&self, webhook_url: &str, text: &str) -> Outcome {
        let body = json!({"text": slack_escape(text)});
        let request = self.client.post(webhook_url).json(&body);
        self.send(request, Dialect::Plain, &Scrub::new(webhook_url, &[])).await
    }

    /// ntfy: `POST url` (the topic's URL) with the message text as the body and the headers
    /// `Title`, `Priority` (1–5), `Tags` (comma separated), `Click` (when given) and
    /// `Authorization: Bearer {token}` (when given). Header values that are not printable ASCII
    /// are sent as RFC 2047 encoded-words (`=?UTF-8?B?…?=`), which ntfy decodes. ntfy turns a
    /// body over 4,096 bytes into an attachment (or refuses it).
    pub async fn ntfy(&self, url: &str, token: Option<&str>, message: &NtfyMessage<'_>) -> Outcome {
        let scrub = Scrub::new(url, &[token.unwrap_or_default()]);
        let mut request = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "text/plain; charset=utf-8")
            .header("Priority", message.priority.clamp(1, 5).to_string())
            .body(message.body.to_owned());
        if !message.title.is_empty() {
            request = request.header("Title", header_text(message.title));
        }
        if !message.tags.is_empty() {
            request = request.header("Tags", header_text(&message.tags.join(",")));
        }
        if let Some(click) = message.click {
            request = request.header("Click", header_text(click));
        }
        if let Some(token) = token {
            let Ok(mut bearer) = HeaderValue::from_str(&format!("Bearer {token}")) else {
                return Outcome::Failed("the ntfy token is not a valid header value".into());
            };
            bearer.set_sensitive(true);
            request = request.header(AUTHORIZATION, bearer);
        }
        self.send(request, Dialect::Plain, &scrub).await
    }

    /// Generic webhook: `POST url` with `body` (already serialised JSON, so the signature is
    /// over exactly what is sent), `Content-Type: application/json`, `X-Tradeops-Event-Id:
    /// {event_id}` (so a receiver can drop a repeat) and, with a `secret`,
    /// `X-Tradeops-Signature: sha256=<hex HMAC-SHA256 of the body>` (see [`signature`]). Any
    /// 2xx is [`Outcome::Sent`].
    pub async fn webhook(&self, url: &str, secret: Option<&str>, event_id: &str, body: &[u8]) -> Outcome {
        let Ok(event) = HeaderValue::from_str(event_id) else {
            return Outcome::Failed("the event id is not a valid header value".into());
        };
        let mut request = self
            .client
            .post(url)
            .header(CONTENT_TYPE, "application/json")
            .header("X-Tradeops-Event-Id", event)
            .body(body.to_vec());
        if let Some(secret) = secret {
            request = request.header("X-Tradeops-Signature", signature(secret, body));
        }
        self.send(request, Dialect::Plain, &Scrub::new(url, &[secret.unwrap_or_default()])).await
    }

    /// Calls the Bot API's `method`: its `result` when Telegram answers `ok`, else the outcome.
    async fn telegram(
        &self,
        api_url: &str,
        bot_token: &str,
        method: &str,
        body: &Value,
        timeout: Duration,
        limit: usize,
    ) -> Result<Value, Outcome> {
        // The token goes into the URL's path: anything but a token's characters could move
        // the request elsewhere on the API.
        if bot_token.is_empty() || !bot_token.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-:".contains(&b)) {
            return Err(Outcome::Failed("the bot token is malformed".into()));
        }
        let url = format!("{}/bot{bot_token}/{method}", api_url.trim_end_matches('/'));
        // The method's name may show; the API's URL and the token may not.
        let scrub = Scrub::new(api_url, &[bot_token, &url]);
        let request = self.client.post(&url).json(body).timeout(timeout);
        let answer = self.exchange(request, timeout, limit).await.map_err(|outcome| scrub.outcome(outcome))?;
        match answer.outcome(Dialect::Telegram) {
            Outcome::Sent => {
                let json: Option<Value> = serde_json::from_slice(&answer.body).ok();
                Ok(json.map(|mut json| json["result"].take()).unwrap_or_default())
            }
            outcome => Err(scrub.outcome(outcome)),
        }
    }

    /// Sends `request` and classifies the answer in `dialect`.
    async fn send(&self, request: RequestBuilder, dialect: Dialect, scrub: &Scrub) -> Outcome {
        let outcome = match self.exchange(request, self.timeout, ANSWER_BYTES).await {
            Ok(answer) => answer.outcome(dialect),
            Err(outcome) => outcome,
        };
        scrub.outcome(outcome)
    }

    /// Sends `request` and reads its answer, at most `limit` bytes of the body; a transport
    /// failure as its outcome.
    async fn exchange(&self, request: RequestBuilder, timeout: Duration, limit: usize) -> Result<Answer, Outcome> {
        let mut response = request.send().await.map_err(|error| transport_outcome(error, timeout))?;
        let status = response.status();
        let headers = std::mem::take(response.headers_mut());
        let mut body = Vec::new();
        // The status decides; a body cut short (over the limit, the connection dropped) only
        // loses words for the outcome's text.
        while let Ok(Some(chunk)) = response.chunk().await {
            body.extend_from_slice(&chunk[..chunk.len().min(limit - body.len())]);
            if body.len() >= limit {
                break;
            }
        }
        Ok(Answer { status, headers, body })
    }
}

/// `sha256=<lowercase hex HMAC-SHA256 of body keyed with secret>`: the webhook's
/// `X-Tradeops-Signature`, which a receiver recomputes over the raw body it got.
pub fn signature(secret: &str, body: &[u8]) -> String {
    format!("sha256={}", hex::encode(hmac_sha256(secret.as_bytes(), body)))
}

/// HMAC (RFC 2104) over SHA-256: the workspace's `hmac` release is built on a newer `digest`
/// than the `sha2` the server uses, and the construction is these few lines.
fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|k| k ^ byte);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

/// Where a channel puts its rate-limit wait.
#[derive(Clone, Copy, PartialEq)]
enum Dialect {
    /// `{"ok": false, "description", "parameters": {"retry_after": seconds}}`.
    Telegram,
    /// `{"message", "retry_after": seconds, possibly fractional}`.
    Discord,
    /// Slack, ntfy, webhooks: the `Retry-After` header.
    Plain,
}

/// A channel's answer: its status, headers and (the start of) its body.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn outcome(&self, dialect: Dialect) -> Outcome {
        let json: Option<Value> = serde_json::from_slice(&self.body).ok();
        let json = json.as_ref().unwrap_or(&Value::Null);
        let telegram_wait = match dialect {
            Dialect::Telegram => seconds(&json["parameters"]["retry_after"]),
            _ => None,
        };
        let refused = dialect == Dialect::Telegram && json["ok"] == Value::Bool(false);
        if self.status.is_success() && !refused {
            return Outcome::Sent;
        }
        let code = self.status.as_u16();
        let what = format!("HTTP {code}: {}", self.detail(json));
        if self.status == StatusCode::TOO_MANY_REQUESTS || telegram_wait.is_some() {
            let json_wait = || match dialect {
                Dialect::Discord => seconds(&json["retry_after"]),
                _ => None,
            };
            let header_wait = || {
                let value = self.headers.get(RETRY_AFTER)?.to_str().ok()?;
                seconds(&Value::from(value.trim().parse::<f64>().ok()?))
            };
            let wait = telegram_wait.or_else(json_wait).or_else(header_wait).unwrap_or(DEFAULT_RETRY_AFTER);
            Outcome::RetryAfter(wait, what)
        } else if self.status.is_server_error() || self.status == StatusCode::REQUEST_TIMEOUT {
            Outcome::Retry(what)
        } else if dialect == Dialect::Telegram && self.status == StatusCode::CONFLICT {
            // Telegram's 409 is `getUpdates` meeting another poller of the same bot (or its
            // webhook): worth trying again once that one is gone.
            Outcome::Retry(what)
        } else if self.status.is_redirection() {
            Outcome::Failed(format!("HTTP {code}: redirected elsewhere; configure the final URL"))
        } else {
            Outcome::Failed(what)
        }
    }

    /// The channel's own words: Telegram's `description`, Discord's `message`, ntfy's
    /// `error`, else the body's text, else the status's name; at most [`QUOTED_CHARS`].
    fn detail(&self, json: &Value) -> String {
        let said = ["description", "message", "error"]
            .iter()
            .filter_map(|field| json[field].as_str())
            .map(str::trim)
            .find(|text| !text.is_empty());
        let text = match said {
            Some(text) => text.to_owned(),
            None => String::from_utf8_lossy(&self.body).split_whitespace().collect::<Vec<_>>().join(" "),
        };
        if text.is_empty() {
            return self.status.canonical_reason().unwrap_or("no reason given").to_owned();
        }
        match text.char_indices().nth(QUOTED_CHARS) {
            Some((cut, _)) => format!("{}…", &text[..cut]),
            None => text,
        }
    }
}

/// A non-negative, finite number of seconds.
fn seconds(value: &Value) -> Option<Duration> {
    Duration::try_from_secs_f64(value.as_f64()?).ok()
}

/// A request that got no answer: a timeout, a refused or broken connection (worth retrying),
/// or a request that cannot be made (an invalid URL: it will not improve).
fn transport_outcome(error: reqwest::Error, timeout: Duration) -> Outcome {
    let error = error.without_url();
    if error.is_timeout() {
        return Outcome::Retry(format!("timed out after {timeout:?}"));
    }
    let mut cause: &dyn std::error::Error = &error;
    while let Some(next) = cause.source() {
        cause = next;
    }
    if error.is_builder() {
        Outcome::Failed(format!("cannot make the request: {cause}"))
    } else if error.is_connect() {
        Outcome::Retry(format!("connection failed: {cause}"))
    } else {
        Outcome::Retry(format!("request failed: {cause}"))
    }
}

/// What an outcome's text must never show: a request's URL, the pieces of it that may be
/// credentials, and its secrets.
struct Scrub(Vec<String>);

impl Scrub {
    fn new(url: &str, secrets: &[&str]) -> Scrub {
        let mut pieces: Vec<String> = secrets.iter().map(|secret| secret.to_string()).collect();
        pieces.push(url.trim().to_owned());
        if let Ok(parsed) = reqwest::Url::parse(url.trim()) {
            pieces.push(parsed.to_string());
            pieces.push(parsed.path().to_owned());
            if let Some(query) = parsed.query() {
                pieces.push(format!("{}?{query}", parsed.path()));
                pieces.push(query.to_owned());
            }
            pieces.extend(parsed.path_segments().into_iter().flatten().map(str::to_owned));
            pieces.extend(parsed.query_pairs().map(|(_, value)| value.into_owned()));
        }
        pieces.retain(|piece| piece.chars().count() >= SECRET_PIECE_CHARS);
        // The longest first, so a URL goes whole rather than leaving pieces around its secret.
        pieces.sort_by_key(|piece| std::cmp::Reverse(piece.len()));
        pieces.dedup();
        Scrub(pieces)
    }

    fn outcome(&self, outcome: Outcome) -> Outcome {
        outcome.map_text(|text| self.0.iter().fold(text, |text, piece| text.replace(piece.as_str(), "<redacted>")))
    }
}

/// One element of `getUpdates`' `result`; none without an `update_id`.
fn telegram_update(update: &Value) -> Option<TelegramUpdate> {
    let update_id = update["update_id"].as_i64()?;
    let kind = update_kind(update).unwrap_or(UpdateKind::Other);
    Some(TelegramUpdate { update_id, kind })
}

fn update_kind(update: &Value) -> Option<UpdateKind> {
    if let Some(message) = update.get("message") {
        return Some(UpdateKind::Message {
            chat_id: message["chat"]["id"].as_i64()?,
            user: telegram_user(&message["from"])?,
            text: message["text"].as_str()?.to_owned(),
        });
    }
    let query = update.get("callback_query")?;
    Some(UpdateKind::Callback {
        callback_id: query["id"].as_str()?.to_owned(),
        chat_id: query["message"]["chat"]["id"].as_i64()?,
        user: telegram_user(&query["from"])?,
        data: query["data"].as_str()?.to_owned(),
    })
}

fn telegram_user(from: &Value) -> Option<TelegramUser> {
    let first = from["first_name"].as_str().unwrap_or_default();
    let name = match from["last_name"].as_str() {
        Some(last) if !last.is_empty() => format!("{first} {last}"),
        _ => first.to_owned(),
    };
    let username = from["username"].as_str().filter(|username| !username.is_empty()).map(str::to_owned);
    Some(TelegramUser { id: from["id"].as_i64()?, username, name })
}

/// Slack's three control characters, escaped as its message formatting asks.
fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A header value as given when it is printable ASCII, else an RFC 2047 encoded-word.
fn header_text(text: &str) -> HeaderValue {
    let printable = text.bytes().all(|b| (b' '..=b'~').contains(&b));
    let value = if printable { text.to_owned() } else { format!("=?UTF-8?B?{}?=", base64(text.as_bytes())) };
    HeaderValue::from_str(&value).expect("printable ASCII is a header value")
}

/// Standard base64 with padding (RFC 4648), for encoded-words: the server does not depend on
/// a base64 crate for these few lines.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            out.push(if i <= chunk.len() { char::from(ALPHABET[(n >> (18 - 6 * i) & 63) as usize]) } else { '=' });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use axum::response::IntoResponse;

    use super::*;

    const TOKEN: &str = "123456:AAE-secret_bot_token";

    /// One request a stand-in received.
    #[derive(Clone, Debug)]
    struct Seen {
        path: String,
        headers: HeaderMap,
        body: Vec<u8>,
    }

    impl Seen {
        fn header(&self, name: &str) -> Option<&str> {
            self.headers.get(name).map(|value| value.to_str().unwrap())
        }

        fn json(&self) -> Value {
            serde_json::from_slice(&self.body).unwrap()
        }
    }

    /// A channel on 127.0.0.1: records every request and answers each as scripted.
    struct StandIn {
        url: String,
        seen: Arc<Mutex<Vec<Seen>>>,
    }

    impl StandIn {
        async fn answering(status: u16, headers: &[(&'static str, &'static str)], body: impl Into<String>) -> StandIn {
            let seen = Arc::new(Mutex::new(Vec::new()));
            let record = seen.clone();
            let (headers, body) = (headers.to_vec(), body.into());
            let app = axum::Router::new().fallback(move |request: axum::extract::Request| {
                let (record, headers, body) = (record.clone(), headers.clone(), String::clone(&body));
                async move {
                    let (parts, request_body) = request.into_parts();
                    let request_body = axum::body::to_bytes(request_body, usize::MAX).await.unwrap().to_vec();
                    let path = parts.uri.to_string();
                    record.lock().unwrap().push(Seen { path, headers: parts.headers, body: request_body });
                    let mut response = (StatusCode::from_u16(status).unwrap(), body).into_response();
                    for (name, value) in headers {
                        response.headers_mut().insert(name, HeaderValue::from_static(value));
                    }
                    response
                }
            });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, app).await });
            StandIn { url, seen }
        }

        fn requests(&self) -> Vec<Seen> {
            self.seen.lock().unwrap().clone()
        }

        fn only_request(&self) -> Seen {
            let requests = self.requests();
            assert_eq!(requests.len(), 1, "{requests:?}");
            requests[0].clone()
        }
    }

    fn wire() -> Wire {
        Wire::new(Duration::from_secs(5))
    }

    fn text(outcome: &Outcome) -> &str {
        match outcome {
            Outcome::Sent => "",
            Outcome::RetryAfter(_, text) | Outcome::Retry(text) | Outcome::Failed(text) => text,
        }
    }

    #[tokio::test]
    async fn telegram_send_posts_plain_text_to_the_bots_send_message() {
        let telegram = StandIn::answering(200, &[], r#"{"ok":true,"result":{"message_id":7}}"#).await;
        let markup = json!({"inline_keyboard": [[{"text": "Confirm halt", "callback_data": "halt:1"}]]});

        let outcome = wire().telegram_send(&telegram.url, TOKEN, -100123, "LIVE *AAPL* filled", Some(&markup)).await;

        assert_eq!(outcome, Outcome::Sent);
        let request = telegram.only_request();
        assert_eq!(request.path, format!("/bot{TOKEN}/sendMessage"));
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(
            request.json(),
            json!({"chat_id": -100123, "text": "LIVE *AAPL* filled", "disable_web_page_preview": true,
                "reply_markup": markup})
        );

        let outcome = wire().telegram_send(&format!("{}/", telegram.url), TOKEN, 5, "plain", None).await;
        assert_eq!(outcome, Outcome::Sent);
        let request = &telegram.requests()[1];
        assert_eq!(request.path, format!("/bot{TOKEN}/sendMessage"), "a trailing slash on api_url is dropped");
        assert_eq!(request.json(), json!({"chat_id": 5, "text": "plain", "disable_web_page_preview": true}));
    }

    #[tokio::test]
    async fn telegram_flood_control_waits_the_retry_after_it_names() {
        let telegram = StandIn::answering(
            429,
            &[],
            r#"{"ok":false,"error_code":429,"description":"Too Many Requests: retry after 3","parameters":{"retry_after":3}}"#,
        )
        .await;

        let outcome = wire().telegram_send(&telegram.url, TOKEN, 1, "hi", None).await;

        assert_eq!(
            outcome,
            Outcome::RetryAfter(Duration::from_secs(3), "HTTP 429: Too Many Requests: retry after 3".into())
        );
    }

    #[tokio::test]
    async fn telegram_chat_not_found_fails() {
        let telegram = StandIn::answering(
            400,
            &[],
            r#"{"ok":false,"error_code":400,"description":"Bad Request: chat not found"}"#,
        )
        .await;

        let outcome = wire().telegram_send(&telegram.url, TOKEN, 1, "hi", None).await;

        assert_eq!(outcome, Outcome::Failed("HTTP 400: Bad Request: chat not found".into()));
    }

    #[tokio::test]
    async fn telegram_answer_callback_names_the_query() {
        let telegram = StandIn::answering(200, &[], r#"{"ok":true,"result":true}"#).await;

        let outcome = wire().telegram_answer_callback(&telegram.url, TOKEN, "4382bfdwdsb323b2d9", "Halting").await;

        assert_eq!(outcome, Outcome::Sent);
        let request = telegram.only_request();
        assert_eq!(request.path, format!("/bot{TOKEN}/answerCallbackQuery"));
        assert_eq!(request.json(), json!({"callback_query_id": "4382bfdwdsb323b2d9", "text": "Halting"}));
    }

    #[tokio::test]
    async fn telegram_updates_parse_messages_and_buttons_and_skip_other_kinds() {
        let telegram = StandIn::answering(
            200,
            &[],
            r#"{"ok":true,"result":[
                {"update_id":100,"message":{"message_id":1,"date":0,"chat":{"id":-100123,"type":"group"},
                    "from":{"id":42,"is_bot":false,"first_name":"Ada","last_name":"Lovelace","username":"ada"},
                    "text":"/halt spreads blew out"}},
                {"update_id":101,"callback_query":{"id":"cbq-9","chat_instance":"x","data":"halt:confirm",
                    "from":{"id":43,"is_bot":false,"first_name":"Grace"},
                    "message":{"message_id":2,"date":0,"chat":{"id":-100123,"type":"group"}}}},
                {"update_id":102,"edited_message":{"message_id":1,"date":0,"chat":{"id":-100123,"type":"group"}}},
                {"update_id":103,"message":{"message_id":3,"date":0,"chat":{"id":-100123,"type":"group"},
                    "from":{"id":42,"is_bot":false,"first_name":"Ada"},"sticker":{}}}
            ]}"#,
        )
        .await;

        let updates = wire().telegram_updates(&telegram.url, TOKEN, 100, 25).await.unwrap();

        let ada = TelegramUser { id: 42, username: Some("ada".into()), name: "Ada Lovelace".into() };
        let grace = TelegramUser { id: 43, username: None, name: "Grace".into() };
        assert_eq!(
            updates,
            vec![
                TelegramUpdate {
                    update_id: 100,
                    kind: UpdateKind::Message { chat_id: -100123, user: ada, text: "/halt spreads blew out".into() },
                },
                TelegramUpdate {
                    update_id: 101,
                    kind: UpdateKind::Callback {
                        callback_id: "cbq-9".into(),
                        chat_id: -100123,
                        user: grace,
                        data: "halt:confirm".into(),
                    },
                },
                TelegramUpdate { update_id: 102, kind: UpdateKind::Other },
                TelegramUpdate { update_id: 103, kind: UpdateKind::Other },
            ]
        );
        let request = telegram.only_request();
        assert_eq!(request.path, format!("/bot{TOKEN}/getUpdates"));
        assert_eq!(
            request.json(),
            json!({"offset": 100, "timeout": 25, "allowed_updates": ["message", "callback_query"]})
        );
    }

    #[tokio::test]
    async fn telegram_updates_conflict_with_another_poller_is_retried() {
        let telegram = StandIn::answering(
            409,
            &[],
            r#"{"ok":false,"error_code":409,"description":"Conflict: terminated by other getUpdates request"}"#,
        )
        .await;

        let outcome = wire().telegram_updates(&telegram.url, TOKEN, 0, 0).await;

        assert_eq!(outcome, Err(Outcome::Retry("HTTP 409: Conflict: terminated by other getUpdates request".into())));
    }

    #[test]
    fn actor_names_the_username_or_else_the_id() {
        let user = TelegramUser { id: 42, username: Some("ada".into()), name: "Ada".into() };
        assert_eq!(user.actor(), "telegram:@ada");
        assert_eq!(TelegramUser { username: None, ..user }.actor(), "telegram:42");
    }

    #[tokio::test]
    async fn discord_204_is_sent_with_mentions_disabled() {
        let discord = StandIn::answering(204, &[], "").await;
        let hook = format!("{}/api/webhooks/1234/discord-webhook-token", discord.url);

        let outcome = wire().discord(&hook, "@everyone LIVE AAPL stopped out").await;

        assert_eq!(outcome, Outcome::Sent);
        let request = discord.only_request();
        assert_eq!(request.path, "/api/webhooks/1234/discord-webhook-token");
        assert_eq!(
            request.json(),
            json!({"content": "@everyone LIVE AAPL stopped out", "allowed_mentions": {"parse": []}})
        );
    }

    #[tokio::test]
    async fn discord_rate_limit_waits_its_fractional_retry_after() {
        let discord = StandIn::answering(
            429,
            &[("retry-after", "1")],
            r#"{"message":"You are being rate limited.","retry_after":0.75,"global":false}"#,
        )
        .await;

        let outcome = wire().discord(&discord.url, "hi").await;

        assert_eq!(
            outcome,
            Outcome::RetryAfter(Duration::from_millis(750), "HTTP 429: You are being rate limited.".into())
        );
    }

    #[tokio::test]
    async fn slack_200_ok_is_sent_with_control_characters_escaped() {
        let slack = StandIn::answering(200, &[], "ok").await;

        let outcome = wire().slack(&format!("{}/services/T0/B0/slack-secret", slack.url), "P&L <!channel> > 0").await;

        assert_eq!(outcome, Outcome::Sent);
        let request = slack.only_request();
        assert_eq!(request.path, "/services/T0/B0/slack-secret");
        assert_eq!(request.json(), json!({"text": "P&amp;L &lt;!channel&gt; &gt; 0"}));
    }

    #[tokio::test]
    async fn slack_rate_limit_waits_the_retry_after_header() {
        let slack = StandIn::answering(429, &[("retry-after", "2")], "rate_limited").await;

        let outcome = wire().slack(&slack.url, "hi").await;

        assert_eq!(outcome, Outcome::RetryAfter(Duration::from_secs(2), "HTTP 429: rate_limited".into()));
    }

    #[tokio::test]
    async fn ntfy_sends_the_text_with_title_priority_tags_click_and_token() {
        let ntfy = StandIn::answering(200, &[], r#"{"id":"x","event":"message"}"#).await;
        let message = NtfyMessage {
            title: "LIVE AAPL stopped out",
            body: "Sold 100 AAPL at 187.20, P&L -312.00",
            priority: 5,
            tags: &["warning", "chart_with_downwards_trend"],
            click: Some("https://console.example/positions"),
        };

        let outcome = wire().ntfy(&format!("{}/tradeops-alerts", ntfy.url), Some("tk_ntfy"), &message).await;

        assert_eq!(outcome, Outcome::Sent);
        let request = ntfy.only_request();
        assert_eq!(request.path, "/tradeops-alerts");
        assert_eq!(request.body, b"Sold 100 AAPL at 187.20, P&L -312.00");
        assert_eq!(request.header("title"), Some("LIVE AAPL stopped out"));
        assert_eq!(request.header("priority"), Some("5"));
        assert_eq!(request.header("tags"), Some("warning,chart_with_downwards_trend"));
        assert_eq!(request.header("click"), Some("https://console.example/positions"));
        assert_eq!(request.header("authorization"), Some("Bearer tk_ntfy"));
    }

    #[tokio::test]
    async fn ntfy_encodes_a_non_ascii_title_and_leaves_out_what_is_not_given() {
        let ntfy = StandIn::answering(200, &[], "{}").await;
        let message = NtfyMessage { title: "Ärger", body: "x", priority: 9, tags: &[], click: None };

        assert_eq!(wire().ntfy(&ntfy.url, None, &message).await, Outcome::Sent);

        let request = ntfy.only_request();
        assert_eq!(request.header("title"), Some("=?UTF-8?B?w4RyZ2Vy?="));
        assert_eq!(request.header("priority"), Some("5"), "clamped to ntfy's 1-5");
        assert_eq!((request.header("tags"), request.header("click")), (None, None));
        assert_eq!(request.header("authorization"), None);
    }

    #[tokio::test]
    async fn webhook_signs_the_exact_body_and_names_the_event() {
        let receiver = StandIn::answering(202, &[], "").await;
        let body = br#"{"event_id":"ev-1","kind":"test"}"#;

        let outcome = wire().webhook(&receiver.url, Some("Jefe"), "ev-1", body).await;

        assert_eq!(outcome, Outcome::Sent);
        let request = receiver.only_request();
        assert_eq!(request.body, body);
        assert_eq!(request.header("content-type"), Some("application/json"));
        assert_eq!(request.header("x-tradeops-event-id"), Some("ev-1"));
        // The same key and body signed by `printf %s '{"event_id":"ev-1","kind":"test"}' |
        // openssl dgst -sha256 -hmac Jefe`, independently of this module.
        assert_eq!(
            request.header("x-tradeops-signature"),
            Some("sha256=15e6df2d695328e2a09a602b3c4ef31599df08c760c61488244ad6b64d10288c")
        );

        assert_eq!(wire().webhook(&receiver.url, None, "ev-2", body).await, Outcome::Sent);
        assert_eq!(receiver.requests()[1].header("x-tradeops-signature"), None, "unsigned without a secret");
    }

    /// RFC 4231 test cases 1, 2 and 6 (a key longer than SHA-256's block).
    #[test]
    fn signature_is_hmac_sha256_of_rfc_4231() {
        let cases: [(&[u8], &[u8], &str); 3] = [
            (&[0x0b; 20], b"Hi There", "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
            (
                b"Jefe",
                b"what do ya want for nothing?",
                "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843",
            ),
            (
                &[0xaa; 131],
                b"Test Using Larger Than Block-Size Key - Hash Key First",
                "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54",
            ),
        ];
        for (key, data, mac) in cases {
            assert_eq!(hex::encode(hmac_sha256(key, data)), mac);
        }
        assert_eq!(
            signature("Jefe", b"what do ya want for nothing?"),
            "sha256=5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn base64_matches_rfc_4648() {
        let cases =
            [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="), ("foobar", "Zm9vYmFy")];
        for (plain, encoded) in cases {
            assert_eq!(base64(plain.as_bytes()), encoded);
        }
    }

    #[tokio::test]
    async fn a_channel_that_never_answers_is_retried_after_the_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });

        let outcome = tokio::time::timeout(
            Duration::from_secs(10),
            Wire::new(Duration::from_millis(300)).webhook(&url, None, "ev-1", b"{}"),
        )
        .await
        .expect("the wire's own timeout ends the request");

        assert_eq!(outcome, Outcome::Retry("timed out after 300ms".into()));
    }

    #[tokio::test]
    async fn answers_are_classified_by_status() {
        let cases = [
            (500, "oops", Outcome::Retry("HTTP 500: oops".into())),
            (502, "", Outcome::Retry("HTTP 502: Bad Gateway".into())),
            (408, "", Outcome::Retry("HTTP 408: Request Timeout".into())),
            (429, "", Outcome::RetryAfter(Duration::from_secs(1), "HTTP 429: Too Many Requests".into())),
            (
                401,
                r#"{"code":40101,"http":401,"error":"unauthorized"}"#,
                Outcome::Failed("HTTP 401: unauthorized".into()),
            ),
            (
                404,
                r#"{"message": "Unknown Webhook", "code": 10015}"#,
                Outcome::Failed("HTTP 404: Unknown Webhook".into()),
            ),
            (410, "channel_is_archived", Outcome::Failed("HTTP 410: channel_is_archived".into())),
            (301, "", Outcome::Failed("HTTP 301: redirected elsewhere; configure the final URL".into())),
        ];
        for (status, body, expected) in cases {
            let receiver = StandIn::answering(status, &[("location", "https://elsewhere.example/")], body).await;
            assert_eq!(wire().webhook(&receiver.url, None, "ev-1", b"{}").await, expected, "HTTP {status}");
        }
    }

    #[tokio::test]
    async fn a_long_answer_is_quoted_in_part() {
        let receiver = StandIn::answering(400, &[], "x".repeat(5000)).await;

        let outcome = wire().webhook(&receiver.url, None, "ev-1", b"{}").await;

        assert_eq!(outcome, Outcome::Failed(format!("HTTP 400: {}…", "x".repeat(QUOTED_CHARS))));
    }

    #[tokio::test]
    async fn failures_never_show_the_token_or_the_url() {
        // Nothing listens on a port just let go: connection refused.
        let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let refused = format!("http://{}", closed.local_addr().unwrap());
        drop(closed);
        // A server that echoes the path it was asked for, credentials and all.
        let echo = StandIn::answering(404, &[], "no webhook at /hook/super-secret-path?key=query-secret-value").await;
        let telegram_echo = StandIn::answering(
            404,
            &[],
            r#"{"ok":false,"error_code":404,"description":"Not Found: /bot123456:AAE-secret_bot_token/sendMessage"}"#,
        )
        .await;

        let wire = wire();
        let outcomes = [
            wire.telegram_send(&refused, TOKEN, 1, "hi", None).await,
            wire.discord(&format!("{refused}/api/webhooks/1/discord-secret"), "hi").await,
            wire.ntfy(
                &format!("{refused}/secret-topic"),
                Some("tk_secret"),
                &NtfyMessage { title: "t", body: "b", priority: 3, tags: &[], click: None },
            )
            .await,
            wire.webhook(
                &format!("{}/hook/super-secret-path?key=query-secret-value", echo.url),
                Some("s3cret!"),
                "e",
                b"{}",
            )
            .await,
            wire.telegram_send(&telegram_echo.url, TOKEN, 1, "hi", None).await,
            wire.telegram_send(&refused, "123:bad/../token", 1, "hi", None).await,
        ];

        let secrets = ["secret", "127.0.0.1", "http://", "123456:", "tk_", "s3cret", "bad/../token"];
        for outcome in &outcomes {
            assert_ne!(*outcome, Outcome::Sent);
            for secret in secrets {
                assert!(!text(outcome).contains(secret), "{outcome:?} shows {secret}");
            }
        }
        assert!(text(&outcomes[0]).starts_with("connection failed: "), "{:?}", outcomes[0]);
        assert!(matches!(outcomes[0], Outcome::Retry(_)), "{:?}", outcomes[0]);
        assert_eq!(outcomes[3], Outcome::Failed("HTTP 404: no webhook at <redacted>".into()));
        assert_eq!(outcomes[4], Outcome::Failed("HTTP 404: Not Found: /bot<redacted>/sendMessage".into()));
        assert_eq!(outcomes[5], Outcome::Failed("the bot token is malformed".into()));
    }
}
