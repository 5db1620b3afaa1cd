-- Notifications to the operator's phone and team chat (CONTRACT §13): one row per notice and
-- channel, recorded BEFORE it is sent and brought up to date as it goes, so that after a
-- failover the new leader sends what the old one had not (`RETRYING`) and never sends twice
-- what it had. `event_id` is the notice's id (an event-bus id as text, `test-…`,
-- `summary-YYYY-MM-DD`, `digest-…`); `status` is RETRYING (not delivered yet: queued or between
-- attempts), SENT, FAILED or FOLDED (folded into a digest); `critical` is 0/1; `message` is the
-- notice as JSON text, to send it again. Times are wall epoch ms.
CREATE TABLE notification_deliveries (
    delivery_id INTEGER PRIMARY KEY AUTOINCREMENT,
    event_id    TEXT    NOT NULL,
    channel     TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    critical    INTEGER NOT NULL,
    status      TEXT    NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    message     TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL,
    sent_at     BIGINT,
    error       TEXT,
    UNIQUE (event_id, channel)
);
CREATE INDEX notification_deliveries_status ON notification_deliveries (status, delivery_id);
CREATE INDEX notification_deliveries_channel ON notification_deliveries (channel, delivery_id);
CREATE INDEX notification_deliveries_created ON notification_deliveries (created_at);
