//! Audited actions (CONTRACT §6): what an audit row names as its `action`, with the least role
//! that may take it. Most actions are taken through one route and are declared beside it; the
//! ones here are taken through more than one door — the API and the command line (`tradeops
//! token`, `tradeops reference import`), or the API and a Telegram chat (the emergency halt) —
//! whose rows must read the same.

use tradeops_core::Role;

/// A sensitive action: its audit name and the least role that may perform it.
#[derive(Clone, Copy, Debug)]
pub struct Action {
    pub name: &'static str,
    pub role: Role,
}

/// Creating an API token (`POST /api/auth/tokens`, `tradeops token create`).
pub const TOKEN_CREATE: Action = Action { name: "token.create", role: Role::Admin };
/// Revoking an API token (`DELETE /api/auth/tokens/{name}`, `tradeops token revoke`).
pub const TOKEN_REVOKE: Action = Action { name: "token.revoke", role: Role::Admin };

/// Importing reference data (`PUT /api/market/reference`, `tradeops reference import`): it
/// changes what the radar shows and the strategies trade, an admin's write.
pub const REFERENCE_IMPORT: Action = Action { name: "market.reference_import", role: Role::Admin };

/// The emergency halt (`POST /api/risk/emergency-halt`, a confirmed `/halt` from a Telegram
/// chat, CONTRACT §13).
pub const EMERGENCY_HALT: Action = Action { name: "risk.emergency_halt", role: Role::Operator };
