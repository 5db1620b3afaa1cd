-- Radar history, watchlist, symbol blocks and risk violations.
CREATE TABLE radar_rows (
    captured_at      BIGINT  NOT NULL,
    rank             BIGINT  NOT NULL,
    symbol           TEXT    NOT NULL,
    price            TEXT    NOT NULL,
    percentage_gain  DOUBLE PRECISION NOT NULL,
    change_1m        DOUBLE PRECISION,
    change_5m        DOUBLE PRECISION,
    volume           BIGINT  NOT NULL,
    average_volume   BIGINT  NOT NULL,
    relative_volume  DOUBLE PRECISION,
    float_shares     BIGINT  NOT NULL,
    sector           TEXT    NOT NULL,
    PRIMARY KEY (captured_at, rank)
);
CREATE INDEX radar_rows_symbol ON radar_rows (symbol, captured_at);

CREATE TABLE watchlist (
    symbol           TEXT   PRIMARY KEY,
    source           TEXT   NOT NULL,
    strategy_id      TEXT   NOT NULL,
    strategy_version TEXT   NOT NULL,
    strategy_status  TEXT   NOT NULL,
    polling_status   TEXT   NOT NULL,
    time_added       BIGINT NOT NULL,
    time_closed      BIGINT,
    time_completed   BIGINT,
    reason           TEXT
);

CREATE TABLE symbol_blocks (
    block_id       INTEGER PRIMARY KEY AUTOINCREMENT,
    symbol         TEXT   NOT NULL,
    block_scope    TEXT   NOT NULL,
    reason         TEXT   NOT NULL,
    actor          TEXT   NOT NULL,
    effective_from BIGINT NOT NULL,
    expires_at     BIGINT,
    lifted_at      BIGINT,
    lifted_by      TEXT,
    lift_reason    TEXT
);
CREATE INDEX symbol_blocks_symbol ON symbol_blocks (symbol, lifted_at);

CREATE TABLE risk_violations (
    violation_id    INTEGER PRIMARY KEY AUTOINCREMENT,
    ts              BIGINT NOT NULL,
    rule            TEXT   NOT NULL,
    symbol          TEXT,
    client_order_id TEXT,
    detail          TEXT   NOT NULL
);
