-- The protective stop a strategy planned for an entry (the base of a trade's R multiple), and
-- durable backtest runs: the request as given, progress, and the result once completed.
ALTER TABLE orders ADD COLUMN stop_loss TEXT;

CREATE TABLE backtests (
    backtest_id  TEXT   PRIMARY KEY,
    strategy_id  TEXT   NOT NULL,
    symbol       TEXT   NOT NULL,
    status       TEXT   NOT NULL,
    progress     DOUBLE PRECISION NOT NULL,
    request      TEXT   NOT NULL,
    result       TEXT,
    error        TEXT,
    requested_by TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    started_at   BIGINT,
    finished_at  BIGINT
);
CREATE INDEX backtests_status ON backtests (status, created_at);
