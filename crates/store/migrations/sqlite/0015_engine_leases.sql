-- The engine's term (issue 25): one row. `epoch` moves on at every start of an engine (in a
-- cluster, at every takeover); every write of trading state checks, in its own transaction,
-- that its engine's epoch is still the current one, so an engine whose term was taken over
-- writes nothing more (fencing). `node_id` and `acquired_at` (epoch ms) say who took it, when.
CREATE TABLE engine_leases (
    id INTEGER PRIMARY KEY,
    epoch BIGINT NOT NULL,
    node_id TEXT,
    acquired_at BIGINT
);
INSERT INTO engine_leases (id, epoch) VALUES (1, 0);
