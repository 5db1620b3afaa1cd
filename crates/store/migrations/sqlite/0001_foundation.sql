-- Foundation: API tokens, audit log, versioned settings.
-- Timestamps are epoch milliseconds; money is decimal text; flags are 0/1 (README, Storage).
CREATE TABLE api_tokens (
    token_id     INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL,
    role         TEXT    NOT NULL,
    token_hash   TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    created_by   TEXT    NOT NULL,
    last_used_at BIGINT,
    revoked_at   BIGINT
);
CREATE UNIQUE INDEX api_tokens_active_name ON api_tokens (name) WHERE revoked_at IS NULL;
CREATE UNIQUE INDEX api_tokens_active_hash ON api_tokens (token_hash) WHERE revoked_at IS NULL;

CREATE TABLE audit_log (
    audit_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    ts         BIGINT NOT NULL,
    actor      TEXT   NOT NULL,
    role       TEXT,
    action     TEXT   NOT NULL,
    target     TEXT   NOT NULL,
    request    TEXT   NOT NULL,
    outcome    TEXT   NOT NULL,
    mode       TEXT   NOT NULL,
    request_id TEXT   NOT NULL
);
CREATE INDEX audit_log_action ON audit_log (action, audit_id);

CREATE TABLE settings_versions (
    version    BIGINT PRIMARY KEY,
    settings   TEXT   NOT NULL,
    updated    TEXT   NOT NULL,
    actor      TEXT   NOT NULL,
    created_at BIGINT NOT NULL
);
