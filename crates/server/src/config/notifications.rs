//! The `[notifications]` section (CONTRACT §13): where messages' links point and the channels
//! from `[[notifications.channels]]`. Channels come from the configuration only because they
//! hold secrets (bot tokens, webhook URLs, which carry their own token, ntfy tokens, signing
//! secrets): each is a [`Secret`], whose `Debug` shows nothing, so no log line, API answer or
//! audit row can carry one.

use super::notice_kinds::NoticeKind;
use super::reader::Reader;
use std::fmt;
use toml::{Table, Value};
use tradeops_core::Role;

/// A value that must never be shown: `Debug` and `Display` print `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The value itself, for the request that needs it and nothing else.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct NotificationsConfig {
    /// The console's address as the operator's phone reaches it, for the links in messages;
    /// `None`: the cluster's advertised address, or the bind address.
    pub console_url: Option<String>,
    pub channels: Vec<ChannelConfig>,
}

/// One `[[notifications.channels]]` table.
#[derive(Clone, Debug, PartialEq)]
pub struct ChannelConfig {
    /// Unique among the channels: what the API and the audit name it by.
    pub name: String,
    /// What it is sent ([`NoticeKind::DEFAULT`] unless configured); a test goes to any channel.
    pub events: Vec<NoticeKind>,
    pub target: ChannelTarget,
}

impl ChannelConfig {
    pub fn kind(&self) -> &'static str {
        self.target.kind()
    }

    /// Whether notices of `kind` go to this channel.
    pub fn wants(&self, kind: NoticeKind) -> bool {
        kind == NoticeKind::Test || self.events.contains(&kind)
    }
}

/// Where a channel's messages go, by kind.
#[derive(Clone, Debug, PartialEq)]
pub enum ChannelTarget {
    Telegram {
        bot_token: Secret,
        chat_ids: Vec<i64>,
        api_url: String,
        /// Who may command the service from the chats: nobody, `viewer` (`/status`,
        /// `/positions`, `/pnl`) or `operator` (also `/halt`).
        commands_role: Option<Role>,
    },
    Discord {
        webhook_url: Secret,
    },
    Slack {
        webhook_url: Secret,
    },
    Ntfy {
        /// The topic's URL; on a public server the topic's name is all it takes to read and
        /// write it, so it is kept like a secret.
        url: Secret,
        token: Option<Secret>,
    },
    Webhook {
        url: Secret,
        /// Signs each body: header `X-Tradeops-Signature: sha256=<hex HMAC-SHA256>`.
        secret: Option<Secret>,
    },
}

impl ChannelTarget {
    pub fn kind(&self) -> &'static str {
        match self {
            ChannelTarget::Telegram { .. } => "telegram",
            ChannelTarget::Discord { .. } => "discord",
            ChannelTarget::Slack { .. } => "slack",
            ChannelTarget::Ntfy { .. } => "ntfy",
            ChannelTarget::Webhook { .. } => "webhook",
        }
    }
}

/// Telegram's Bot API.
pub const TELEGRAM_API_URL: &str = "https://api.telegram.org";

impl Reader {
    /// The `[notifications]` section; every problem of every channel is listed.
    pub(super) fn notifications(&mut self) -> NotificationsConfig {
        let console_url = Some(self.string("notifications.console_url").trim().trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty());
        if let Some(url) = &console_url {
            if !is_http_url(url) {
                self.problems
                    .push(format!("notifications.console_url: must be an http:// or https:// URL (got {url:?})"));
            }
        }
        let tables = match self.take("notifications.channels") {
            None => Vec::new(),
            Some(Value::Array(items)) => items,
            Some(other) => {
                self.problems.push(format!(
                    "notifications.channels: must be [[notifications.channels]] tables (got {})",
                    other.type_str()
                ));
                Vec::new()
            }
        };
        let mut channels: Vec<ChannelConfig> = Vec::new();
        let mut names: Vec<String> = Vec::new();
        for (i, item) in tables.into_iter().enumerate() {
            let at = format!("notifications.channels[{i}]");
            let Value::Table(table) = item else {
                self.problems.push(format!("{at}: must be a table"));
                continue;
            };
            if let Some(name) = table.get("name").and_then(Value::as_str).map(|n| n.trim().to_string()) {
                if names.contains(&name) {
                    self.problems.push(format!("{at}.name: {name:?} names another channel already"));
                }
                names.push(name);
            }
            let mut problems = Vec::new();
            if let Some(channel) = channel(table, &at, &mut problems) {
                channels.push(channel);
            }
            self.problems.extend(problems);
        }
        // One reader of a bot's updates: a second would take the first's (Telegram answers 409).
        let mut pollers: Vec<(&str, &str)> = Vec::new();
        for c in &channels {
            if let ChannelTarget::Telegram { bot_token, commands_role: Some(_), .. } = &c.target {
                match pollers.iter().find(|(token, _)| *token == bot_token.expose()) {
                    Some((_, other)) => self.problems.push(format!(
                        "notifications.channels: {:?} and {other:?} take commands through the same bot: one bot \
                         token can have one commands_role channel (list every chat in its chat_ids)",
                        c.name
                    )),
                    None => pollers.push((bot_token.expose(), &c.name)),
                }
            }
        }
        NotificationsConfig { console_url, channels }
    }
}

/// One channel's table, its problems (never a secret's value) added to `problems`.
fn channel(mut t: Table, at: &str, problems: &mut Vec<String>) -> Option<ChannelConfig> {
    let text = |t: &mut Table, key: &str, required: bool, problems: &mut Vec<String>| -> Option<String> {
        match t.remove(key) {
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Some(Value::String(_)) | None if required => {
                problems.push(format!("{at}.{key}: required"));
                None
            }
            Some(Value::String(_)) | None => None,
            Some(other) => {
                problems.push(format!("{at}.{key}: must be a string (got a {})", other.type_str()));
                None
            }
        }
    };
    let url = |value: Option<String>, key: &str, problems: &mut Vec<String>| -> Option<String> {
        let value = value?;
        if !is_http_url(&value) {
            // The URL may hold a token: the problem does not repeat it.
            problems.push(format!("{at}.{key}: must be an http:// or https:// URL"));
        }
        Some(value.trim_end_matches('/').to_string())
    };
    let kind = text(&mut t, "kind", true, problems);
    let name = text(&mut t, "name", true, problems);
    if let Some(name) = &name {
        if name.len() > 64 || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            problems.push(format!("{at}.name: 1 to 64 letters, digits, '-', '_' or '.' (got {name:?})"));
        }
    }
    let events = match t.remove("events") {
        None => NoticeKind::DEFAULT.to_vec(),
        Some(Value::Array(items)) => {
            let mut events = Vec::new();
            for item in items {
                match item.as_str().map(NoticeKind::parse) {
                    Some(Some(kind)) if !events.contains(&kind) => events.push(kind),
                    Some(Some(_)) => {}
                    _ => problems.push(format!(
                        "{at}.events: unknown kind {item} (known: {})",
                        NoticeKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>().join(", ")
                    )),
                }
            }
            events
        }
        Some(other) => {
            problems.push(format!("{at}.events: must be a list of kinds (got a {})", other.type_str()));
            Vec::new()
        }
    };
    let target = match kind.as_deref() {
        Some("telegram") => {
            let bot_token = text(&mut t, "bot_token", true, problems);
            let chat_ids = match t.remove("chat_ids") {
                Some(Value::Array(items)) if !items.is_empty() => items
                    .into_iter()
                    .filter_map(|v| match v {
                        Value::Integer(id) => Some(id),
                        other => {
                            problems.push(format!("{at}.chat_ids: must be whole numbers (got {other})"));
                            None
                        }
                    })
                    .collect(),
                None | Some(Value::Array(_)) => {
                    problems.push(format!("{at}.chat_ids: required: the chats to send to, as numbers"));
                    Vec::new()
                }
                Some(other) => {
                    problems
                        .push(format!("{at}.chat_ids: must be a list of whole numbers (got a {})", other.type_str()));
                    Vec::new()
                }
            };
            let api_url = url(text(&mut t, "api_url", false, problems), "api_url", problems)
                .unwrap_or_else(|| TELEGRAM_API_URL.to_string());
            let commands_role = match text(&mut t, "commands_role", false, problems).as_deref() {
                None | Some("none") => None,
                Some("viewer") => Some(Role::Viewer),
                Some("operator") => Some(Role::Operator),
                Some(other) => {
                    problems.push(format!("{at}.commands_role: must be none, viewer or operator (got {other:?})"));
                    None
                }
            };
            bot_token.map(|token| ChannelTarget::Telegram {
                bot_token: Secret(token),
                chat_ids,
                api_url,
                commands_role,
            })
        }
        Some(kind @ ("discord" | "slack")) => url(text(&mut t, "webhook_url", true, problems), "webhook_url", problems)
            .map(|u| match kind {
                "discord" => ChannelTarget::Discord { webhook_url: Secret(u) },
                _ => ChannelTarget::Slack { webhook_url: Secret(u) },
            }),
        Some("ntfy") => {
            let topic = url(text(&mut t, "url", true, problems), "url", problems);
            let token = text(&mut t, "token", false, problems).map(Secret);
            topic.map(|u| ChannelTarget::Ntfy { url: Secret(u), token })
        }
        Some("webhook") => {
            let target = url(text(&mut t, "url", true, problems), "url", problems);
            let secret = text(&mut t, "secret", false, problems).map(Secret);
            target.map(|u| ChannelTarget::Webhook { url: Secret(u), secret })
        }
        Some(other) => {
            problems.push(format!("{at}.kind: must be telegram, discord, slack, ntfy or webhook (got {other:?})"));
            None
        }
        None => None,
    };
    for key in t.keys() {
        problems.push(format!("{at}.{key}: unknown key for a {} channel", kind.as_deref().unwrap_or("?")));
    }
    Some(ChannelConfig { name: name?, events, target: target? })
}

fn is_http_url(url: &str) -> bool {
    (url.starts_with("http://") || url.starts_with("https://")) && !url.contains(char::is_whitespace)
}

#[cfg(test)]
mod tests {
    use crate::config::notice_kinds::NoticeKind;
    use crate::config::Config;
    use std::collections::BTreeMap;

    const CHANNELS: &str = r#"
[notifications]
console_url = "https://desk.example.com/"

[[notifications.channels]]
kind = "telegram"
name = "phone"
bot_token = "123456:SECRET-bot-token"
chat_ids = [42, -1001234]
commands_role = "operator"

[[notifications.channels]]
kind = "discord"
name = "team"
webhook_url = "https://discord.com/api/webhooks/1/SECRET-discord"
events = ["position.stopped_out", "risk.state_changed"]

[[notifications.channels]]
kind = "webhook"
name = "ops"
url = "https://ops.example.com/hook"
secret = "SECRET-signing"
"#;

    #[test]
    fn channels_are_read_with_their_defaults() {
        let c = Config::from_sources(Some(CHANNELS), &BTreeMap::new()).unwrap();
        let n = &c.notifications;
        assert_eq!(n.console_url.as_deref(), Some("https://desk.example.com"));
        assert_eq!(
            n.channels.iter().map(|c| (c.name.as_str(), c.kind())).collect::<Vec<_>>(),
            [("phone", "telegram"), ("team", "discord"), ("ops", "webhook")]
        );
        assert_eq!(n.channels[0].events, NoticeKind::DEFAULT, "no events: the default set");
        assert_eq!(n.channels[1].events, [NoticeKind::PositionStoppedOut, NoticeKind::RiskStateChanged]);
        match &n.channels[0].target {
            super::ChannelTarget::Telegram { chat_ids, api_url, commands_role, .. } => {
                assert_eq!(chat_ids, &[42, -1001234]);
                assert_eq!(api_url, super::TELEGRAM_API_URL);
                assert_eq!(*commands_role, Some(tradeops_core::Role::Operator));
            }
            other => panic!("{other:?}"),
        }
        assert!(Config::default().notifications.channels.is_empty(), "none unless configured");
    }

    /// Secrets never reach a log line through the configuration's `Debug`, nor a problem's text.
    #[test]
    fn secrets_never_show() {
        let c = Config::from_sources(Some(CHANNELS), &BTreeMap::new()).unwrap();
        let shown = format!("{c:?}");
        assert!(!shown.contains("SECRET"), "{shown}");
        let bad = CHANNELS.replace("https://discord.com/api/webhooks/1/SECRET-discord", "ftp://SECRET-discord");
        let errs = Config::from_sources(Some(&bad), &BTreeMap::new()).unwrap_err().to_string();
        assert!(errs.contains("notifications.channels[1].webhook_url"), "{errs}");
        assert!(!errs.contains("SECRET"), "{errs}");
    }

    /// One bot, one reader of its commands: a second would steal the first's updates.
    #[test]
    fn one_bot_takes_commands_through_one_channel() {
        let channel = |name: &str| {
            format!(
                "[[notifications.channels]]\nkind = \"telegram\"\nname = \"{name}\"\nbot_token = \"1:SECRET\"\n\
                 chat_ids = [1]\ncommands_role = \"viewer\"\n"
            )
        };
        let file = format!("{}{}", channel("a"), channel("b"));
        let errs = Config::from_sources(Some(&file), &BTreeMap::new()).unwrap_err().to_string();
        assert!(errs.contains("\"b\" and \"a\" take commands through the same bot"), "{errs}");
        assert!(!errs.contains("SECRET"), "{errs}");
    }

    #[test]
    fn every_channel_problem_is_listed() {
        let file = r#"
[[notifications.channels]]
kind = "telegram"
name = "a"
chat_ids = ["me"]
commands_role = "admin"
events = ["order.filed"]

[[notifications.channels]]
kind = "pager"
name = "a"

[[notifications.channels]]
kind = "ntfy"
name = "a"
url = "https://ntfy.sh/topic"
colour = "red"
"#;
        let errs = Config::from_sources(Some(file), &BTreeMap::new()).unwrap_err().0;
        for expected in [
            "notifications.channels[0].bot_token: required",
            "notifications.channels[0].chat_ids: must be whole numbers",
            "notifications.channels[0].commands_role: must be none, viewer or operator",
            "notifications.channels[0].events: unknown kind \"order.filed\"",
            "notifications.channels[1].kind: must be telegram",
            "notifications.channels[2].colour: unknown key",
            "notifications.channels[2].name: \"a\" names another channel already",
        ] {
            assert!(errs.iter().any(|e| e.starts_with(expected)), "{expected} not in {errs:#?}");
        }
    }
}
