//! The kinds of notice a channel can be sent (CONTRACT §13), which of them are critical (never
//! folded into a digest), and the set a channel gets when its configuration names none.

use serde::Serialize;

/// One kind of notice. Its wire name is what `events = [...]` in a channel's configuration and
/// the API's `events`/`kind` fields use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, utoipa::ToSchema)]
pub enum NoticeKind {
    #[serde(rename = "order.filled")]
    OrderFilled,
    #[serde(rename = "order.rejected")]
    OrderRejected,
    #[serde(rename = "position.closed")]
    PositionClosed,
    #[serde(rename = "position.stopped_out")]
    PositionStoppedOut,
    #[serde(rename = "risk.violation")]
    RiskViolation,
    #[serde(rename = "risk.state_changed")]
    RiskStateChanged,
    #[serde(rename = "symbol.halted")]
    SymbolHalted,
    #[serde(rename = "symbol.resumed")]
    SymbolResumed,
    #[serde(rename = "health.changed")]
    HealthChanged,
    #[serde(rename = "session.summary")]
    SessionSummary,
    #[serde(rename = "test")]
    Test,
}

impl NoticeKind {
    /// Every kind, in the order of CONTRACT §13.
    pub const ALL: [NoticeKind; 11] = [
        NoticeKind::OrderFilled,
        NoticeKind::OrderRejected,
        NoticeKind::PositionClosed,
        NoticeKind::PositionStoppedOut,
        NoticeKind::RiskViolation,
        NoticeKind::RiskStateChanged,
        NoticeKind::SymbolHalted,
        NoticeKind::SymbolResumed,
        NoticeKind::HealthChanged,
        NoticeKind::SessionSummary,
        NoticeKind::Test,
    ];

    /// What a channel is sent when its configuration lists no `events`: entries' and exits'
    /// fills, stop-outs, rejections, trading halts of held or watched symbols, the risk state,
    /// the components going down and back, and the day's summary — not every risk refusal nor
    /// every close (an exit's fill already says it).
    pub const DEFAULT: [NoticeKind; 8] = [
        NoticeKind::OrderFilled,
        NoticeKind::OrderRejected,
        NoticeKind::PositionStoppedOut,
        NoticeKind::RiskStateChanged,
        NoticeKind::SymbolHalted,
        NoticeKind::SymbolResumed,
        NoticeKind::HealthChanged,
        NoticeKind::SessionSummary,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            NoticeKind::OrderFilled => "order.filled",
            NoticeKind::OrderRejected => "order.rejected",
            NoticeKind::PositionClosed => "position.closed",
            NoticeKind::PositionStoppedOut => "position.stopped_out",
            NoticeKind::RiskViolation => "risk.violation",
            NoticeKind::RiskStateChanged => "risk.state_changed",
            NoticeKind::SymbolHalted => "symbol.halted",
            NoticeKind::SymbolResumed => "symbol.resumed",
            NoticeKind::HealthChanged => "health.changed",
            NoticeKind::SessionSummary => "session.summary",
            NoticeKind::Test => "test",
        }
    }

    pub fn parse(name: &str) -> Option<NoticeKind> {
        NoticeKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    /// Never folded into a digest nor dropped when a channel's queue is full (CONTRACT §13):
    /// what asks the operator to act now.
    pub fn is_critical(self) -> bool {
        matches!(
            self,
            NoticeKind::RiskViolation
                | NoticeKind::RiskStateChanged
                | NoticeKind::PositionStoppedOut
                | NoticeKind::SymbolHalted
                | NoticeKind::HealthChanged
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_critical_kinds_are_the_contracts() {
        let critical: Vec<&str> = NoticeKind::ALL.iter().filter(|k| k.is_critical()).map(|k| k.as_str()).collect();
        assert_eq!(
            critical,
            ["position.stopped_out", "risk.violation", "risk.state_changed", "symbol.halted", "health.changed"]
        );
        for kind in NoticeKind::ALL {
            assert_eq!(NoticeKind::parse(kind.as_str()), Some(kind));
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
        }
    }
}
