//! Commands from Telegram (CONTRACT §13): a channel whose `commands_role` is `viewer` answers
//! `/status`, `/positions` and `/pnl`; `operator` also takes `/halt <reason>`, which answers with
//! a confirm button and runs the same emergency halt as the console once it is pressed, audited
//! with the chat's user as the actor. Only the channel's `chat_ids` are listened to: anything
//! from another chat is ignored and audited.
//!
//! Updates come by long polling (`getUpdates`), on the node that leads (two pollers of one bot
//! would take each other's updates). The offset is kept in memory: a new leader may be given
//! again the updates of the last seconds, which at worst answers a `/status` twice — a `/halt`
//! confirmation is a one-time token of the node that offered it, so an old button press only
//! says it has expired.

use super::wire::{Outcome, TelegramUpdate, TelegramUser, UpdateKind, Wire};
use super::{Notifier, NotifierDeps};
use crate::config::ChannelTarget;
use crate::domain::trading::TradingService;
use crate::engine_view::EngineView;
use rust_decimal::Decimal;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tradeops_core::time::format_ts;
use tradeops_core::Role;
use tradeops_store::AuditEntry;

use super::message::{dollars, mode_label};

/// How long `getUpdates` waits for an update before answering empty.
pub const POLL_SECONDS: u32 = 25;
/// How long a `/halt` confirmation button stays good.
pub const CONFIRM_FOR: Duration = Duration::from_secs(120);
/// The audit's action for a command that was not run (a chat not configured, a role too low).
pub const COMMAND_ACTION: &str = "notifications.telegram_command";

/// One poller per Telegram channel that takes commands.
pub(super) fn spawn_pollers(notifier: &Arc<Notifier>, deps: &Arc<NotifierDeps>) -> Vec<JoinHandle<()>> {
    notifier
        .channels
        .iter()
        .filter_map(|channel| match &channel.config.target {
            ChannelTarget::Telegram { bot_token, chat_ids, api_url, commands_role: Some(role) } => {
                let poller = Poller {
                    channel: channel.config.name.clone(),
                    api_url: api_url.clone(),
                    bot_token: bot_token.expose().to_string(),
                    chat_ids: chat_ids.clone(),
                    role: *role,
                    wire: notifier.wire.clone(),
                    clock: notifier.clock.clone(),
                    deps: deps.clone(),
                    confirmations: HashMap::new(),
                    next_token: 0,
                    strangers: HashMap::new(),
                    term: notifier.term.clone(),
                };
                Some(tokio::spawn(poller.run()))
            }
            _ => None,
        })
        .collect()
}

/// A `/halt` waiting for its button.
struct Confirmation {
    reason: String,
    chat_id: i64,
    offered: Instant,
}

struct Poller {
    channel: String,
    api_url: String,
    bot_token: String,
    chat_ids: Vec<i64>,
    role: Role,
    wire: Arc<Wire>,
    clock: Arc<dyn tradeops_core::Clock>,
    deps: Arc<NotifierDeps>,
    confirmations: HashMap<String, Confirmation>,
    next_token: u64,
    /// When each chat not configured was last audited: one row a minute at most, so strangers
    /// writing to the bot cannot flood the audit log.
    strangers: HashMap<i64, Instant>,
    /// The engine's term: a node that no longer leads reads no more commands.
    term: Arc<crate::cluster::Term>,
}

impl Poller {
    async fn run(mut self) {
        let mut offset = 0i64;
        let mut failures = 0u32;
        loop {
            if self.term.is_over() {
                return tracing::info!(channel = %self.channel, "this node no longer leads: it reads no more commands");
            }
            match self.wire.telegram_updates(&self.api_url, &self.bot_token, offset, POLL_SECONDS).await {
                Ok(updates) => {
                    failures = 0;
                    for update in updates {
                        offset = offset.max(update.update_id + 1);
                        self.handle(update).await;
                    }
                }
                Err(outcome) => {
                    failures += 1;
                    let pause = match &outcome {
                        Outcome::RetryAfter(pause, _) => *pause,
                        _ => Duration::from_secs(1u64 << failures.min(6)).min(Duration::from_secs(60)),
                    };
                    if failures == 1 {
                        tracing::warn!(channel = %self.channel, outcome = ?outcome, "cannot read Telegram commands; trying again");
                    }
                    tokio::time::sleep(pause).await;
                }
            }
        }
    }

    async fn handle(&mut self, update: TelegramUpdate) {
        match update.kind {
            UpdateKind::Message { chat_id, user, text } => {
                if !self.chat_ids.contains(&chat_id) {
                    return self.audit_stranger(&user, chat_id, &text).await;
                }
                let reply = self.command(chat_id, &user, text.trim()).await;
                if let Some((text, markup)) = reply {
                    self.reply(chat_id, &text, markup.as_ref()).await;
                }
            }
            UpdateKind::Callback { callback_id, chat_id, user, data } => {
                if !self.chat_ids.contains(&chat_id) {
                    return self.audit_stranger(&user, chat_id, &format!("button {data}")).await;
                }
                let answer = self.button(chat_id, &user, &data).await;
                let _ = self.wire.telegram_answer_callback(&self.api_url, &self.bot_token, &callback_id, &answer).await;
                self.reply(chat_id, &answer, None).await;
            }
            UpdateKind::Other => {}
        }
    }

    /// The answer to a command from a configured chat, with its buttons.
    async fn command(
        &mut self,
        chat_id: i64,
        user: &TelegramUser,
        text: &str,
    ) -> Option<(String, Option<serde_json::Value>)> {
        let (command, rest) = text.split_once(char::is_whitespace).unwrap_or((text, ""));
        // `/status@my_bot` in a group names the bot.
        let command = command.split('@').next().unwrap_or_default();
        let view = self.deps.engine.view();
        let mode = self.deps.settings.current().runtime.trading_mode;
        let answer = match command {
            "/status" => status(&view, mode),
            "/positions" => positions(&view, mode),
            "/pnl" => pnl(&view, mode),
            "/halt" if self.role < Role::Operator => {
                self.audit(user, "FORBIDDEN", chat_id, text).await;
                "This chat may read only (commands_role = viewer): /halt needs an operator channel.".to_string()
            }
            "/halt" => {
                let reason = rest.trim();
                if reason.is_empty() {
                    return Some(("Say why: /halt <reason>".into(), None));
                }
                self.next_token += 1;
                let token = format!("{}-{}", self.next_token, rand::random::<u32>());
                self.confirmations.retain(|_, c| c.offered.elapsed() < CONFIRM_FOR);
                self.confirmations.insert(
                    token.clone(),
                    Confirmation { reason: reason.chars().take(500).collect(), chat_id, offered: Instant::now() },
                );
                let buttons = serde_json::json!({"inline_keyboard": [[
                    {"text": "⛔ Confirm: liquidate and halt", "callback_data": format!("halt:{token}")},
                    {"text": "Cancel", "callback_data": format!("cancel:{token}")}
                ]]});
                let text = format!(
                    "{} · Emergency halt?\nEvery strategy stops, every open order is cancelled and every position is \
                     closed at market.\nReason: {reason}\nThe button is good for {} s.",
                    mode_label(mode),
                    CONFIRM_FOR.as_secs()
                );
                return Some((text, Some(buttons)));
            }
            "/start" | "/help" => help(self.role),
            _ => return Some((format!("Unknown command {command:?}.\n{}", help(self.role)), None)),
        };
        Some((answer, None))
    }

    /// The answer to a pressed button.
    async fn button(&mut self, chat_id: i64, user: &TelegramUser, data: &str) -> String {
        let (action, token) = data.split_once(':').unwrap_or((data, ""));
        let Some(confirmation) = self.confirmations.remove(token) else {
            return "This confirmation has expired: send /halt <reason> again.".into();
        };
        if confirmation.chat_id != chat_id || confirmation.offered.elapsed() >= CONFIRM_FOR {
            return "This confirmation has expired: send /halt <reason> again.".into();
        }
        if action != "halt" {
            return "Cancelled: nothing was halted.".into();
        }
        if self.role < Role::Operator {
            self.audit(user, "FORBIDDEN", chat_id, data).await;
            return "This chat may read only.".into();
        }
        let actor = user.actor();
        let outcome =
            TradingService::new(&self.deps.engine).emergency_halt(confirmation.reason.clone(), actor.clone()).await;
        let code = match &outcome {
            Ok(_) => "OK".to_string(),
            Err(e) => e.code().as_str().to_string(),
        };
        self.audit_halt(user, &code, chat_id, &confirmation.reason).await;
        match outcome {
            Ok(halted) => format!(
                "HALTED at {} by {actor}.{}",
                format_ts(&halted.timestamp),
                if halted.liquidation_requested {
                    " Exits were sent for every open position."
                } else {
                    " No position was open."
                }
            ),
            Err(e) => format!("The halt failed: {e}. Use the console's Emergency halt now."),
        }
    }

    async fn reply(&self, chat_id: i64, text: &str, markup: Option<&serde_json::Value>) {
        for part in super::channel::split(text, super::channel::TELEGRAM_LIMIT) {
            let outcome = self.wire.telegram_send(&self.api_url, &self.bot_token, chat_id, &part, markup).await;
            if outcome != Outcome::Sent {
                tracing::warn!(channel = %self.channel, outcome = ?outcome, "could not answer a Telegram command");
            }
        }
    }

    /// An audit row for what a chat not configured sent (ignored), one a minute per chat.
    async fn audit_stranger(&mut self, user: &TelegramUser, chat_id: i64, text: &str) {
        let now = Instant::now();
        if self.strangers.get(&chat_id).is_some_and(|at| now.duration_since(*at) < Duration::from_secs(60)) {
            return;
        }
        self.strangers.retain(|_, at| now.duration_since(*at) < Duration::from_secs(60));
        self.strangers.insert(chat_id, now);
        self.audit(user, "FORBIDDEN", chat_id, text).await;
    }

    /// An audit row for a command that was refused.
    async fn audit(&self, user: &TelegramUser, outcome: &str, chat_id: i64, text: &str) {
        let request = serde_json::json!({"channel": self.channel, "chat_id": chat_id, "text": text.chars().take(200).collect::<String>()});
        self.write_audit(user, COMMAND_ACTION, None, outcome, request).await;
    }

    /// The audit row of a halt run from a chat: the console's action, the chat's user as actor.
    async fn audit_halt(&self, user: &TelegramUser, outcome: &str, chat_id: i64, reason: &str) {
        let request =
            serde_json::json!({"reason": reason, "via": "telegram", "channel": self.channel, "chat_id": chat_id});
        self.write_audit(user, crate::domain::actions::EMERGENCY_HALT.name, Some(Role::Operator), outcome, request)
            .await;
    }

    async fn write_audit(
        &self,
        user: &TelegramUser,
        action: &str,
        role: Option<Role>,
        outcome: &str,
        request: serde_json::Value,
    ) {
        let mode = self.deps.settings.current().runtime.trading_mode;
        let entry = AuditEntry {
            ts: self.deps.market_clock.now().timestamp_millis(),
            wall_ts: self.clock.now().timestamp_millis(),
            actor: user.actor(),
            role: role.map(|r| r.as_str().to_string()),
            action: action.to_string(),
            target: if action == COMMAND_ACTION { format!("telegram:{}", self.channel) } else { "trading".into() },
            request: request.to_string(),
            outcome: outcome.to_string(),
            mode: mode.as_str().to_string(),
            request_id: uuid::Uuid::new_v4().to_string(),
        };
        if let Err(e) = self.deps.audit.append_audit(&entry).await {
            tracing::error!(error = %e, action, "could not write the audit row");
        }
    }
}

fn help(role: Role) -> String {
    let mut text =
        "/status — trading state, day P&L, positions and orders\n/positions — open positions\n/pnl — today's P&L"
            .to_string();
    if role >= Role::Operator {
        text.push_str("\n/halt <reason> — emergency liquidate and halt (asks to confirm)");
    }
    text
}

/// `/status`: the trading state, the day's P&L, how many positions and orders are open.
pub fn status(view: &EngineView, mode: tradeops_core::TradingMode) -> String {
    let state = format!("{:?}", view.trading_state).to_uppercase();
    let mut text = format!(
        "{} · trading {state}\nday P&L {} · equity {}\n{} positions · {} open orders",
        mode_label(mode),
        dollars(view.daily_pnl, true),
        dollars(view.equity, false),
        view.positions.iter().filter(|p| p.position.quantity > 0).count(),
        view.open_orders
    );
    if let Some(halt) = &view.halt {
        text.push_str(&format!("\nHalted by {}: {}", halt.actor, halt.reason));
    }
    if let Some(why) = &view.venue_unavailable {
        text.push_str(&format!("\nBroker unavailable: {why}"));
    }
    text
}

/// `/positions`: each open position with its P&L and what protects it.
pub fn positions(view: &EngineView, mode: tradeops_core::TradingMode) -> String {
    let open: Vec<_> = view.positions.iter().filter(|p| p.position.quantity > 0).collect();
    if open.is_empty() {
        return format!("{} · no open positions", mode_label(mode));
    }
    let mut text = format!("{} · {} open positions", mode_label(mode), open.len());
    for p in open {
        let qty = Decimal::from(p.position.quantity);
        let average = p.position.cost_basis / qty;
        let unrealized = p.mark * qty - p.position.cost_basis;
        let protection = match p.protection.kind {
            tradeops_core::engine::ProtectionKind::Broker => "stop at broker",
            tradeops_core::engine::ProtectionKind::Engine => "stop held by engine",
            tradeops_core::engine::ProtectionKind::None => "UNPROTECTED",
        };
        text.push_str(&format!(
            "\n{} {} @ {} → {} {} · {protection}{}",
            p.position.symbol,
            p.position.quantity,
            dollars(average, false),
            dollars(p.mark, false),
            dollars(unrealized, true),
            if p.halted { " · HALTED" } else { "" }
        ));
    }
    text
}

/// `/pnl`: realized, unrealized and the day's P&L, trades today.
pub fn pnl(view: &EngineView, mode: tradeops_core::TradingMode) -> String {
    format!(
        "{} · day P&L {}\nrealized {} · unrealized {}\n{} entries today · drawdown {}",
        mode_label(mode),
        dollars(view.daily_pnl, true),
        dollars(view.realized_today, true),
        dollars(view.unrealized, true),
        view.trades_today,
        dollars(view.drawdown, false)
    )
}
