-- Parameter sweeps (issue 26.1): a sweep is a grid of one strategy's parameters over one range
-- of bars; its combinations are split into parts, each a durable job (claimed, leased, taken
-- back like a backtest) that loads the bars once and runs its combinations, storing their
-- metrics. A sweep's status and results are read from its parts.
CREATE TABLE sweeps (
    sweep_id     TEXT   PRIMARY KEY,
    strategy_id  TEXT   NOT NULL,
    symbol       TEXT   NOT NULL,
    request      TEXT   NOT NULL,
    combinations INTEGER NOT NULL,
    requested_by TEXT   NOT NULL,
    created_at   BIGINT NOT NULL
);
CREATE TABLE sweep_parts (
    part_id          TEXT   PRIMARY KEY,
    sweep_id         TEXT   NOT NULL REFERENCES sweeps (sweep_id),
    status           TEXT   NOT NULL,
    progress         REAL NOT NULL,
    combos           TEXT   NOT NULL,
    results          TEXT,
    error            TEXT,
    created_at       BIGINT NOT NULL,
    started_at       BIGINT,
    finished_at      BIGINT,
    lease_owner      TEXT,
    lease_expires_at BIGINT
);
CREATE INDEX sweep_parts_status ON sweep_parts (status, created_at);
CREATE INDEX sweep_parts_sweep ON sweep_parts (sweep_id);
