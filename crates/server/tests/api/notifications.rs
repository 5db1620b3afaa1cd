//! Notifications (CONTRACT §13) through the real server, against a stand-in written here that
//! speaks each service's wire format — Telegram's Bot API (`sendMessage`, `getUpdates`,
//! `answerCallbackQuery`, its `429` with `parameters.retry_after`), Discord's webhook (its `429`
//! with a fractional `retry_after`), Slack's webhook, an ntfy topic, a signed webhook — and a
//! channel that accepts the connection and never answers.

use crate::helpers::*;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tradeops_server::config::{Config, NotificationsConfig};

const TELEGRAM_TOKEN: &str = "777:SECRET-telegram-token";
const WEBHOOK_SECRET: &str = "SECRET-signing-key";

/// One request the stand-in was sent, and what it answered.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    headers: HeaderMap,
    body: Bytes,
    status: u16,
    at: Instant,
}

impl Seen {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }

    /// The message's words: a JSON body's `title`, `text` and `content`, or the body itself.
    fn text(&self) -> String {
        let json = self.json();
        let words: Vec<&str> = ["title", "text", "content"].iter().filter_map(|k| json[*k].as_str()).collect();
        match words.is_empty() {
            true => String::from_utf8_lossy(&self.body).into_owned(),
            false => words.join("\n"),
        }
    }
}

/// A scripted answer: status, extra headers, body.
type Answer = (u16, Vec<(String, String)>, String);

#[derive(Default)]
struct Script {
    /// Answers to give, in turn, to requests whose path ends with the key (then the usual one).
    answers: BTreeMap<String, VecDeque<Answer>>,
    /// Fail every request whose path ends with one of these, with 500.
    down: Vec<String>,
    /// Updates `getUpdates` hands out next.
    updates: VecDeque<Value>,
}

/// The stand-in of Telegram, Discord, Slack, ntfy and a webhook receiver, on one port.
#[derive(Clone)]
struct StandIn {
    base: String,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<Script>>,
}

impl StandIn {
    async fn start() -> StandIn {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(Script::default()));
        let (s, sc) = (seen.clone(), script.clone());
        let app = axum::Router::new().fallback(move |uri: Uri, headers: HeaderMap, body: Bytes| {
            let (seen, script) = (s.clone(), sc.clone());
            async move { answer(uri, headers, body, seen, script).await }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        StandIn { base, seen, script }
    }

    fn then_answer(&self, path_end: &str, status: u16, headers: &[(&str, &str)], body: Value) {
        let headers = headers.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        let mut script = self.script.lock().unwrap();
        script.answers.entry(path_end.to_string()).or_default().push_back((status, headers, body.to_string()));
    }

    fn set_down(&self, path_end: &str, down: bool) {
        let mut script = self.script.lock().unwrap();
        script.down.retain(|p| p != path_end);
        if down {
            script.down.push(path_end.to_string());
        }
    }

    fn send_update(&self, update: Value) {
        self.script.lock().unwrap().updates.push_back(update);
    }

    fn seen(&self, path_end: &str) -> Vec<Seen> {
        self.seen.lock().unwrap().iter().filter(|s| s.path.ends_with(path_end)).cloned().collect()
    }

    /// Waits until a request to `path_end` answered `status` whose text contains `needle`.
    async fn wait_for(&self, path_end: &str, status: u16, needle: &str) -> Seen {
        for _ in 0..300 {
            if let Some(seen) =
                self.seen(path_end).into_iter().find(|s| s.status == status && s.text().contains(needle))
            {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let got: Vec<(u16, String)> = self.seen(path_end).iter().map(|s| (s.status, s.text())).collect();
        panic!("no {status} request to …{path_end} with {needle:?}; got {got:#?}");
    }
}

async fn answer(
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
    seen: Arc<Mutex<Vec<Seen>>>,
    script: Arc<Mutex<Script>>,
) -> Response {
    let path = uri.path().to_string();
    if path.ends_with("/getUpdates") {
        let next = script.lock().unwrap().updates.pop_front();
        let updates = match next {
            Some(update) => vec![update],
            None => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Vec::new()
            }
        };
        return axum::Json(json!({"ok": true, "result": updates})).into_response();
    }
    let scripted = {
        let mut script = script.lock().unwrap();
        if script.down.iter().any(|p| path.ends_with(p.as_str())) {
            Some((500, Vec::new(), "{\"ok\":false,\"description\":\"Internal Server Error\"}".to_string()))
        } else {
            script.answers.iter_mut().find(|(end, _)| path.ends_with(end.as_str())).and_then(|(_, q)| q.pop_front())
        }
    };
    let (status, extra, text) = scripted.unwrap_or_else(|| {
        if path.contains("/bot") {
            (200, Vec::new(), json!({"ok": true, "result": {"message_id": 1}}).to_string())
        } else if path.starts_with("/discord") {
            (204, Vec::new(), String::new())
        } else if path.starts_with("/slack") {
            (200, Vec::new(), "ok".into())
        } else {
            (200, Vec::new(), "{}".into())
        }
    });
    seen.lock().unwrap().push(Seen { path, headers, body, status, at: Instant::now() });
    let mut response = (StatusCode::from_u16(status).unwrap(), text).into_response();
    for (k, v) in extra {
        response.headers_mut().insert(
            axum::http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            axum::http::HeaderValue::from_str(&v).unwrap(),
        );
    }
    response
}

/// A listener that accepts connections and never answers.
async fn black_hole() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    base
}

fn channels(toml: &str) -> NotificationsConfig {
    Config::from_sources(Some(toml), &BTreeMap::new()).expect("the channels parse").notifications
}

/// Every kind of channel, pointed at `base`.
fn every_kind(base: &str, commands_role: &str) -> NotificationsConfig {
    channels(&format!(
        r#"
[[notifications.channels]]
kind = "telegram"
name = "phone"
bot_token = "{TELEGRAM_TOKEN}"
chat_ids = [42]
api_url = "{base}"
commands_role = "{commands_role}"
events = ["order.filled", "position.closed", "risk.state_changed", "health.changed"]

[[notifications.channels]]
kind = "discord"
name = "team"
webhook_url = "{base}/discord/api/webhooks/1/SECRET-discord"

[[notifications.channels]]
kind = "slack"
name = "desk"
webhook_url = "{base}/slack/services/T/B/SECRET-slack"

[[notifications.channels]]
kind = "ntfy"
name = "pager"
url = "{base}/ntfy/SECRET-topic"
token = "SECRET-ntfy-token"

[[notifications.channels]]
kind = "webhook"
name = "ops"
url = "{base}/hook"
secret = "{WEBHOOK_SECRET}"
"#
    ))
}

fn assert_no_secret(what: &str, text: &str) {
    assert!(!text.contains("SECRET"), "a secret in {what}: {text}");
}

fn channel<'a>(rows: &'a Value, name: &str) -> &'a Value {
    rows.as_array().unwrap().iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("{name} in {rows}"))
}

/// An emergency halt reaches every kind of channel in its own wire format, LIVE or not named
/// first; the webhook's body is signed; the API lists the channels and their deliveries, and no
/// token, webhook URL or secret appears in the API or the audit.
#[tokio::test]
async fn a_halt_reaches_every_channel_in_its_own_format_and_no_secret_shows() {
    let stand_in = StandIn::start().await;
    let base = stand_in.base.clone();
    let app = spawn_app_with(|c| c.notifications = every_kind(&base, "none")).await;

    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "runaway"})).await.assert_ok(200);

    let telegram = stand_in.wait_for("/bot777:SECRET-telegram-token/sendMessage", 200, "trading HALTED").await;
    assert_eq!(telegram.json()["chat_id"], 42);
    let text = telegram.json()["text"].as_str().unwrap().to_string();
    assert!(text.starts_with("PAPER · trading HALTED"), "the mode first: {text}");
    assert!(text.contains("Emergency halt by admin: runaway"), "{text}");
    assert!(text.contains("/#/health"), "a link to the console: {text}");

    let discord = stand_in.wait_for("/discord/api/webhooks/1/SECRET-discord", 204, "trading HALTED").await;
    assert!(discord.json()["content"].as_str().unwrap().starts_with("**PAPER · trading HALTED**"));
    assert_eq!(discord.json()["allowed_mentions"], json!({"parse": []}), "never pings @everyone");
    stand_in.wait_for("/slack/services/T/B/SECRET-slack", 200, "*PAPER · trading HALTED*").await;

    let ntfy = stand_in.wait_for("/ntfy/SECRET-topic", 200, "Emergency halt by admin").await;
    assert_eq!(ntfy.headers["authorization"], "Bearer SECRET-ntfy-token");
    assert_eq!(ntfy.headers["priority"], "4", "critical: high priority");
    assert!(ntfy.headers["click"].to_str().unwrap().ends_with("/#/health"));

    let hook = stand_in.wait_for("/hook", 200, "trading HALTED").await;
    let body = hook.json();
    assert_eq!(
        (body["kind"].as_str(), body["critical"].as_bool(), body["mode"].as_str()),
        (Some("risk.state_changed"), Some(true), Some("PAPER"))
    );
    assert_eq!(body["data"]["state"], "HALTED");
    let signature = hook.headers["x-tradeops-signature"].to_str().unwrap();
    assert_eq!(signature, tradeops_server::notify::wire::signature(WEBHOOK_SECRET, &hook.body));
    assert_eq!(hook.headers["x-tradeops-event-id"].to_str().unwrap(), body["event_id"].as_str().unwrap());

    let rows = app.get("/api/notifications/channels").await;
    let rows = rows.assert_ok(200).clone();
    let names: Vec<&str> = rows.as_array().unwrap().iter().map(|r| r["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["phone", "team", "desk", "pager", "ops"]);
    for name in names {
        let row = channel(&rows, name);
        assert_eq!(
            (row["sent"].as_u64(), row["failed"].as_u64(), row["state"].as_str()),
            (Some(1), Some(0), Some("OK"))
        );
    }
    assert_eq!(
        channel(&rows, "phone")["events"],
        json!(["order.filled", "position.closed", "risk.state_changed", "health.changed"])
    );
    assert_eq!(channel(&rows, "team")["events"].as_array().unwrap().len(), 8, "the default set");
    let deliveries = app.get("/api/notifications/deliveries?channel=ops").await;
    let ops = deliveries.assert_ok(200).as_array().unwrap().clone();
    assert_eq!(ops.len(), 1, "{ops:?}");
    assert_eq!(
        (ops[0]["kind"].as_str(), ops[0]["status"].as_str(), ops[0]["attempts"].as_u64()),
        (Some("risk.state_changed"), Some("SENT"), Some(1))
    );
    assert_eq!(ops[0]["event_id"], body["event_id"]);

    let viewer = app.token("v", "viewer").await;
    let test = app.post("/api/notifications/test", &viewer, json!({"channel": "ops"})).await;
    test.assert_error(403, "FORBIDDEN");
    let unknown = app.post("/api/notifications/test", ADMIN_TOKEN, json!({"channel": "nope"})).await;
    unknown.assert_error(404, "NOT_FOUND");
    assert!(unknown.body["error"]["message"].as_str().unwrap().contains("(configured: phone, team, desk, pager, ops)"));
    let test = app.post("/api/notifications/test", ADMIN_TOKEN, json!({"channel": "pager"})).await;
    assert_eq!(test.assert_ok(200)["status"], "SENT", "{}", test.body);
    stand_in.wait_for("/ntfy/SECRET-topic", 200, "notifications reach you here").await;

    for path in [
        "/api/notifications/channels",
        "/api/notifications/deliveries",
        "/api/audit?limit=1000",
        "/api/settings",
        "/api/health/components",
    ] {
        assert_no_secret(path, &app.get(path).await.body.to_string());
    }
    let audit = app.get("/api/audit?action=notifications.test").await;
    let rows = audit.assert_ok(200).as_array().unwrap().clone();
    let outcomes: Vec<&str> = rows.iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["OK", "NOT_FOUND", "FORBIDDEN"], "every test audited, newest first");
}

/// Telegram's `429` with `parameters.retry_after` and Discord's with a fractional
/// `retry_after` are waited out, then the message goes through, once.
#[tokio::test]
async fn flood_control_is_waited_out_then_the_message_goes_once() {
    let stand_in = StandIn::start().await;
    let base = stand_in.base.clone();
    let app = spawn_app_with(|c| c.notifications = every_kind(&base, "none")).await;
    stand_in.then_answer(
        "/sendMessage",
        429,
        &[],
        json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 1",
               "parameters": {"retry_after": 1}}),
    );
    stand_in.then_answer(
        "/discord/api/webhooks/1/SECRET-discord",
        429,
        &[],
        json!({"message": "You are being rate limited.", "retry_after": 0.4, "global": false}),
    );
    let test = app.post("/api/notifications/test", ADMIN_TOKEN, json!({"channel": "phone"})).await;
    let test = test.assert_ok(200).clone();
    assert_eq!((test["status"].as_str(), test["attempts"].as_u64()), (Some("SENT"), Some(2)), "{test}");
    let sends = stand_in.seen("/sendMessage");
    assert_eq!(sends.iter().map(|s| s.status).collect::<Vec<_>>(), [429, 200], "sent once after the 429");
    assert!(sends[1].at.duration_since(sends[0].at) >= Duration::from_millis(950), "retry_after was waited out");

    let test = app.post("/api/notifications/test", ADMIN_TOKEN, json!({"channel": "team"})).await;
    assert_eq!(test.assert_ok(200)["status"], "SENT");
    let posts = stand_in.seen("/discord/api/webhooks/1/SECRET-discord");
    assert_eq!(posts.iter().map(|s| s.status).collect::<Vec<_>>(), [429, 204]);
    assert!(posts[1].at.duration_since(posts[0].at) >= Duration::from_millis(380));
    let rows = app.get("/api/notifications/deliveries?channel=phone").await;
    let row = &rows.assert_ok(200)[0];
    assert_eq!((row["status"].as_str(), row["attempts"].as_u64()), (Some("SENT"), Some(2)));
}

/// A chat that refuses the bot for good (removed from it) does not keep the message from the
/// channel's other chats; the delivery says which chat refused.
#[tokio::test]
async fn a_chat_that_refuses_does_not_keep_the_others_from_the_message() {
    let stand_in = StandIn::start().await;
    let config = channels(&format!(
        r#"
[[notifications.channels]]
kind = "telegram"
name = "phones"
bot_token = "{TELEGRAM_TOKEN}"
chat_ids = [7, 42]
api_url = "{}"
"#,
        stand_in.base
    ));
    let app = spawn_app_with(|c| c.notifications = config).await;
    stand_in.then_answer(
        "/sendMessage",
        403,
        &[],
        json!({"ok": false, "error_code": 403, "description": "Forbidden: bot was kicked from the group chat"}),
    );
    let test = app.post("/api/notifications/test", ADMIN_TOKEN, json!({"channel": "phones"})).await;
    let test = test.assert_ok(200).clone();
    assert_eq!((test["status"].as_str(), test["attempts"].as_u64()), (Some("FAILED"), Some(1)), "{test}");
    assert!(test["error"].as_str().unwrap().starts_with("chat 7: "), "{test}");
    let chats: Vec<(Value, u16)> =
        stand_in.seen("/sendMessage").iter().map(|s| (s.json()["chat_id"].clone(), s.status)).collect();
    assert_eq!(chats, [(json!(7), 403), (json!(42), 200)], "chat 42 got it all the same");
}

/// A channel that accepts the connection and never answers holds up nothing: the halt is
/// answered, the other channels are sent it, and the silent one shows `RETRYING` with why.
#[tokio::test]
async fn a_channel_that_never_answers_holds_up_nothing() {
    let stand_in = StandIn::start().await;
    let hole = black_hole().await;
    let config = channels(&format!(
        r#"
[[notifications.channels]]
kind = "webhook"
name = "silent"
url = "{hole}/hook"

[[notifications.channels]]
kind = "telegram"
name = "phone"
bot_token = "{TELEGRAM_TOKEN}"
chat_ids = [42]
api_url = "{}"
"#,
        stand_in.base
    ));
    let app = spawn_app_with(|c| c.notifications = config).await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let placed = app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 10})).await;
    let id = placed.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&id, "FILLED").await;
    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "silence"})).await.assert_ok(200);
    stand_in.wait_for("/sendMessage", 200, "trading HALTED").await;
    stand_in.wait_for("/sendMessage", 200, &format!("{symbol} BUY 10 @")).await;

    let rows = app.get("/api/notifications/channels").await;
    let silent = channel(rows.data(), "silent").clone();
    assert_eq!(silent["sent"], 0, "{silent}");
    assert!(silent["queued"].as_u64().unwrap() >= 1, "the rest wait their turn: {silent}");
    let test = app.post("/api/notifications/test", ADMIN_TOKEN, json!({"channel": "silent"})).await;
    assert_eq!(test.assert_ok(200)["status"], "RETRYING", "answered after its wait, not the channel's: {}", test.body);
}

/// An entry's fill is told with its strategy and what protects the position; the close with
/// its P&L and exit reason.
#[tokio::test]
async fn fills_and_closes_are_told_with_protection_and_pnl() {
    let stand_in = StandIn::start().await;
    let base = stand_in.base.clone();
    let app = spawn_app_with(|c| c.notifications = every_kind(&base, "none")).await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let placed = app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 100})).await;
    let id = placed.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&id, "FILLED").await;
    let fill = stand_in.wait_for("/sendMessage", 200, &format!("PAPER · {symbol} BUY 100 @ $")).await;
    let text = fill.json()["text"].as_str().unwrap().to_string();
    assert!(text.contains("entry filled · manual"), "{text}");
    assert!(text.contains("100 shares held"), "{text}");
    assert!(text.contains(&format!("/#/positions?symbol={symbol}")), "{text}");

    let close = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": symbol})).await;
    let close_id = close.assert_ok(200)["close_order_client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&close_id, "FILLED").await;
    let closed = stand_in.wait_for("/sendMessage", 200, &format!("PAPER · {symbol} closed ")).await;
    let text = closed.json()["text"].as_str().unwrap().to_string();
    assert!(text.contains("manual · MANUAL_CLOSE"), "the exit reason: {text}");
    let hook = stand_in.wait_for("/hook", 200, &format!("{symbol} SELL 100")).await;
    assert_eq!(hook.json()["data"]["entry"], false, "the exit's fill");
    // The webhook's default set has no position.closed: the close is told to Telegram only.
    assert!(stand_in.seen("/hook").iter().all(|s| s.json()["kind"] != "position.closed"));
}

/// A delivery recorded and not sent when the service stopped is sent by the next run, once; a
/// delivery already sent is not sent again (CONTRACT §13: record before sending).
#[tokio::test]
async fn what_was_left_unsent_is_sent_after_a_restart_and_nothing_twice() {
    let stand_in = StandIn::start().await;
    let base = stand_in.base.clone();
    let app = spawn_app_with(|c| c.notifications = every_kind(&base, "none")).await;
    let test = app.post("/api/notifications/test", ADMIN_TOKEN, json!({"channel": "ops"})).await;
    assert_eq!(test.assert_ok(200)["status"], "SENT");
    stand_in.set_down("/hook", true);
    app.post("/api/risk/emergency-halt", ADMIN_TOKEN, json!({"reason": "before the restart"})).await.assert_ok(200);
    stand_in.wait_for("/hook", 500, "trading HALTED").await;
    let rows = app.get("/api/notifications/deliveries?channel=ops").await;
    assert_eq!(rows.data()[0]["status"], "RETRYING", "{}", rows.body);

    let app = app.restart().await;
    stand_in.set_down("/hook", false);
    stand_in.wait_for("/hook", 200, "trading HALTED").await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let delivered: Vec<String> =
        stand_in.seen("/hook").iter().filter(|s| s.status == 200).map(|s| s.json()["kind"].to_string()).collect();
    assert_eq!(delivered, ["\"test\"", "\"risk.state_changed\""], "each once; the restored halt is not a new one");
    let rows = app.get("/api/notifications/deliveries?channel=ops").await;
    let statuses: Vec<&str> = rows.data().as_array().unwrap().iter().map(|r| r["status"].as_str().unwrap()).collect();
    assert_eq!(statuses, ["SENT", "SENT"]);
    let ops = app.get("/api/notifications/channels").await;
    assert_eq!(channel(ops.data(), "ops")["sent"], 2, "the counts go on across runs");
}

fn message(update_id: i64, chat_id: i64, username: &str, text: &str) -> Value {
    json!({"update_id": update_id, "message": {"message_id": update_id, "date": 0, "text": text,
           "chat": {"id": chat_id, "type": "private"},
           "from": {"id": 1000 + update_id, "is_bot": false, "first_name": username, "username": username}}})
}

/// From the configured chat: `/status` answers, `/halt <reason>` asks to confirm with a button
/// and the button runs the emergency halt, audited with the chat's user; a chat not configured
/// is ignored and audited; a viewer channel cannot halt.
#[tokio::test]
async fn telegram_commands_and_a_confirmed_halt() {
    let stand_in = StandIn::start().await;
    let base = stand_in.base.clone();
    let app = spawn_app_with(|c| c.notifications = every_kind(&base, "operator")).await;

    stand_in.send_update(message(1, 42, "alice", "/status"));
    stand_in.wait_for("/sendMessage", 200, "PAPER · trading ACTIVE").await;
    stand_in.send_update(message(2, 99, "mallory", "/halt now"));
    stand_in.send_update(message(3, 42, "alice", "/halt spread blew out"));
    let ask = stand_in.wait_for("/sendMessage", 200, "Emergency halt?").await;
    assert!(stand_in.seen("/sendMessage").iter().all(|s| s.json()["chat_id"] != 99), "the stranger is not answered");
    let button = ask.json()["reply_markup"]["inline_keyboard"][0][0]["callback_data"].as_str().unwrap().to_string();
    assert_eq!(app.get("/api/risk/state").await.data()["trading_state"], "ACTIVE", "nothing before the button");

    stand_in.send_update(json!({"update_id": 4, "callback_query": {"id": "cb-1", "data": button,
        "from": {"id": 1003, "is_bot": false, "first_name": "alice", "username": "alice"},
        "message": {"message_id": 3, "date": 0, "chat": {"id": 42, "type": "private"}}}}));
    stand_in.wait_for("/sendMessage", 200, "HALTED at").await;
    stand_in.wait_for("/answerCallbackQuery", 200, "").await;
    let risk = app.get("/api/risk/state").await;
    assert_eq!(risk.data()["trading_state"], "HALTED");
    assert_eq!(
        (risk.data()["halted_by"].as_str(), risk.data()["halt_reason"].as_str()),
        (Some("telegram:@alice"), Some("spread blew out"))
    );
    // The same button again is spent.
    stand_in.send_update(json!({"update_id": 5, "callback_query": {"id": "cb-2", "data": button,
        "from": {"id": 1003, "is_bot": false, "first_name": "alice", "username": "alice"},
        "message": {"message_id": 3, "date": 0, "chat": {"id": 42, "type": "private"}}}}));
    stand_in.wait_for("/sendMessage", 200, "has expired").await;

    let audit = app.get("/api/audit?action=risk.emergency_halt").await;
    let row = &audit.assert_ok(200)[0];
    assert_eq!((row["actor"].as_str(), row["outcome"].as_str()), (Some("telegram:@alice"), Some("OK")));
    assert_eq!(row["request"]["via"], "telegram");
    let audit = app.get("/api/audit?action=notifications.telegram_command").await;
    let rows = audit.assert_ok(200).as_array().unwrap().clone();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0]["actor"].as_str(), rows[0]["outcome"].as_str()),
        (Some("telegram:@mallory"), Some("FORBIDDEN"))
    );
    assert_eq!(rows[0]["request"]["chat_id"], 99);
    assert_no_secret("the audit", &app.get("/api/audit?limit=1000").await.body.to_string());
}

#[tokio::test]
async fn a_viewer_channel_reads_and_cannot_halt() {
    let stand_in = StandIn::start().await;
    let base = stand_in.base.clone();
    let app = spawn_app_with(|c| c.notifications = every_kind(&base, "viewer")).await;
    stand_in.send_update(message(1, 42, "bob", "/positions"));
    stand_in.wait_for("/sendMessage", 200, "no open positions").await;
    stand_in.send_update(message(2, 42, "bob", "/halt please"));
    stand_in.wait_for("/sendMessage", 200, "may read only").await;
    assert!(stand_in.seen("/sendMessage").iter().all(|s| s.json()["reply_markup"].is_null()), "no button offered");
    assert_eq!(app.get("/api/risk/state").await.data()["trading_state"], "ACTIVE");
    let audit = app.get("/api/audit?action=notifications.telegram_command").await;
    assert_eq!(audit.assert_ok(200)[0]["actor"], "telegram:@bob");
}

/// The day's summary comes once the trading day ends (midnight New York on the simulated
/// market's calendar, which is open all day): its trades, win rate and P&L, once per channel.
#[tokio::test]
async fn the_day_is_summed_up_once_after_it_ends() {
    let stand_in = StandIn::start().await;
    let base = stand_in.base.clone();
    let app = spawn_app_with(|c| {
        c.notifications = every_kind(&base, "none");
        c.sim.symbols = 20;
    })
    .await;
    let (symbol, _) = app.market_symbols(1).await.remove(0);
    let placed = app.post("/api/orders", ADMIN_TOKEN, json!({"symbol": symbol, "side": "BUY", "quantity": 10})).await;
    let id = placed.assert_ok(201)["client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&id, "FILLED").await;
    let close = app.post("/api/positions/close", ADMIN_TOKEN, json!({"symbol": symbol})).await;
    let close_id = close.assert_ok(200)["close_order_client_order_id"].as_str().unwrap().to_string();
    app.wait_for_order(&close_id, "FILLED").await;

    // Friday 2026-11-20 ends at midnight New York (05:00 UTC).
    app.market.set(tradeops_core::time::parse_ts("2026-11-21T05:00:01Z").unwrap());
    let summary = stand_in.wait_for("/hook", 200, "day summary 2026-11-20").await;
    let body = summary.json();
    assert_eq!(body["kind"], "session.summary");
    assert_eq!(body["event_id"], "summary-2026-11-20-PAPER");
    assert_eq!((body["data"]["trades"].as_u64(), body["data"]["held"].as_array().map(Vec::len)), (Some(1), Some(0)));
    assert!(body["text"].as_str().unwrap().starts_with("1 trades · win rate "), "{body}");
    assert!(body["link"].as_str().unwrap().ends_with("/#/pnl?date=2026-11-20"));
    // The next midnight: a day with no trade, flat, is not news; the summary is not repeated.
    app.market.set(tradeops_core::time::parse_ts("2026-11-22T05:00:01Z").unwrap());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let summaries: Vec<Value> =
        stand_in.seen("/hook").iter().map(|s| s.json()).filter(|b| b["kind"] == "session.summary").collect();
    assert_eq!(summaries.len(), 1, "{summaries:?}");
}

/// A real `tradeops serve` process, logging at `debug`, whose channels fail every way they can
/// (a bot token Telegram refuses, a webhook that is not there, a signed webhook answering 500):
/// its logs show the failures and never a token, a webhook URL or a secret.
#[test]
fn secrets_never_reach_the_logs() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let stand_in = rt.block_on(StandIn::start());
    stand_in.then_answer(
        "/sendMessage",
        401,
        &[],
        json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
    );
    stand_in.set_down("/hook", true);
    let dir = tempfile::tempdir().unwrap();
    let config = format!(
        r#"
[[notifications.channels]]
kind = "telegram"
name = "phone"
bot_token = "{TELEGRAM_TOKEN}"
chat_ids = [42]
api_url = "{base}"

[[notifications.channels]]
kind = "discord"
name = "team"
webhook_url = "http://127.0.0.1:1/api/webhooks/1/SECRET-discord"

[[notifications.channels]]
kind = "webhook"
name = "ops"
url = "{base}/hook?key=SECRET-query"
secret = "{WEBHOOK_SECRET}"
"#,
        base = stand_in.base
    );
    std::fs::write(dir.path().join("tradeops.toml"), config).unwrap();
    let log = std::fs::File::create(dir.path().join("log")).unwrap();
    let mut child = crate::cli::tradeops(dir.path())
        .arg("--config")
        .arg(dir.path().join("tradeops.toml"))
        .arg("serve")
        .env("TRADEOPS_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("TRADEOPS_LOG", "debug")
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn()
        .unwrap();
    let read_log = || std::fs::read_to_string(dir.path().join("log")).unwrap_or_default();
    let mut base = None;
    for _ in 0..300 {
        if let Some(line) = read_log().lines().find(|l| l.contains("listening on ")) {
            base = line.split("listening on ").nth(1).and_then(|r| r.split_whitespace().next()).map(str::to_string);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let base = base.unwrap_or_else(|| {
        let _ = child.kill();
        panic!("the service never listened: {}", read_log())
    });
    let client = reqwest::Client::new();
    for channel in ["phone", "team", "ops"] {
        let reply = rt.block_on(
            client
                .post(format!("{base}/api/notifications/test"))
                .bearer_auth(ADMIN_TOKEN)
                .json(&json!({"channel": channel}))
                .send(),
        );
        assert_eq!(reply.unwrap().status(), 200, "{channel}");
    }
    let _ = child.kill();
    let _ = child.wait();
    let logs = read_log();
    assert!(logs.contains("notification failed"), "the refused bot token is logged: {logs}");
    assert!(logs.contains("notification will be retried"), "the failing webhooks are logged");
    for secret in ["SECRET", "777:"] {
        let leaks: Vec<&str> = logs.lines().filter(|l| l.contains(secret)).collect();
        assert!(leaks.is_empty(), "{secret} in the logs: {leaks:#?}");
    }
}
