-- Orders (written before they are sent), executions, positions, the risk state latch, daily
-- counters and the paper broker's account.
CREATE TABLE orders (
    client_order_id  TEXT   PRIMARY KEY,
    broker_order_id  TEXT,
    symbol           TEXT   NOT NULL,
    side             TEXT   NOT NULL,
    order_type       TEXT   NOT NULL,
    time_in_force    TEXT   NOT NULL,
    quantity         BIGINT NOT NULL,
    limit_price      TEXT,
    stop_price       TEXT,
    status           TEXT   NOT NULL,
    filled_quantity  BIGINT NOT NULL,
    filled_notional  TEXT   NOT NULL,
    fees             TEXT   NOT NULL,
    reason           TEXT,
    strategy_id      TEXT,
    reject_reason    TEXT,
    mode             TEXT   NOT NULL,
    trading_date     TEXT   NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX orders_date ON orders (trading_date, created_at);
CREATE INDEX orders_status ON orders (status);

CREATE TABLE executions (
    execution_id     TEXT   PRIMARY KEY,
    client_order_id  TEXT   NOT NULL REFERENCES orders (client_order_id),
    ts               BIGINT NOT NULL,
    quantity         BIGINT NOT NULL,
    price            TEXT   NOT NULL,
    fee              TEXT   NOT NULL
);
CREATE INDEX executions_order ON executions (client_order_id, ts);

CREATE TABLE positions (
    symbol        TEXT   PRIMARY KEY,
    quantity      BIGINT NOT NULL,
    cost_basis    TEXT   NOT NULL,
    realized_pnl  TEXT   NOT NULL,
    fees          TEXT   NOT NULL,
    opened_at     BIGINT,
    updated_at    BIGINT
);

CREATE TABLE trading_state (
    id             BIGINT PRIMARY KEY,
    state          TEXT   NOT NULL,
    halted_at      BIGINT,
    halt_reason    TEXT,
    halt_actor     TEXT,
    trading_date   TEXT,
    trades_today   BIGINT NOT NULL,
    realized_today TEXT   NOT NULL,
    start_equity   TEXT   NOT NULL,
    peak_equity    TEXT   NOT NULL,
    cash           TEXT   NOT NULL,
    updated_at     BIGINT NOT NULL
);
