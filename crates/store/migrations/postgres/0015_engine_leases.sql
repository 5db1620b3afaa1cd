-- The engine's term (issue 25): one row. `epoch` moves on at every start of an engine (in a
-- cluster, at every takeover); every write of trading state checks, in its own transaction,
-- that its engine's epoch is still the current one, so an engine whose term was taken over
-- writes nothing more (fencing). `node_id` and `acquired_at` (epoch ms) say who took it, when
-- (`node_id` NULL: released, free to take at once); the holder moves `renew_seq` on every
-- `renewed_at` (epoch ms) while it lives, and a term left unrenewed for the lease's length is
-- taken over.
CREATE TABLE engine_leases (
    id INTEGER PRIMARY KEY,
    epoch BIGINT NOT NULL,
    node_id TEXT,
    acquired_at BIGINT,
    renew_seq BIGINT NOT NULL DEFAULT 0,
    renewed_at BIGINT
);
INSERT INTO engine_leases (id, epoch) VALUES (1, 0);
