-- Historical bars (prices as integer ticks of 1/10,000 dollar: exact and compact) and the
-- durable download jobs that fill them.
CREATE TABLE bars (
    symbol     TEXT   NOT NULL,
    timeframe  TEXT   NOT NULL,
    start      BIGINT NOT NULL,
    open       BIGINT NOT NULL,
    high       BIGINT NOT NULL,
    low        BIGINT NOT NULL,
    close      BIGINT NOT NULL,
    volume     BIGINT NOT NULL,
    source     TEXT   NOT NULL,
    PRIMARY KEY (symbol, timeframe, start)
);

CREATE TABLE download_jobs (
    request_id   TEXT   PRIMARY KEY,
    symbol       TEXT   NOT NULL,
    timeframe    TEXT   NOT NULL,
    start        BIGINT NOT NULL,
    finish       BIGINT NOT NULL,
    status       TEXT   NOT NULL,
    progress     DOUBLE PRECISION NOT NULL,
    bars         BIGINT NOT NULL,
    error        TEXT,
    requested_by TEXT   NOT NULL,
    created_at   BIGINT NOT NULL,
    started_at   BIGINT,
    finished_at  BIGINT
);
CREATE INDEX download_jobs_status ON download_jobs (status, created_at);
