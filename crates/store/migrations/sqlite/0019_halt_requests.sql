-- Emergency halts accepted by a node that does not run the engine (issue 25.2): stored first, so
-- the engine's leader — the one running now (it looks every second) or the next one, before it
-- does anything else — applies each, and marks it applied (`applied_epoch`: the term that did;
-- NULL when the node that accepted it saw the leader apply it). Times are wall epoch ms.
CREATE TABLE halt_requests (
    request_id INTEGER PRIMARY KEY AUTOINCREMENT,
    reason TEXT NOT NULL,
    actor TEXT NOT NULL,
    node_id TEXT NOT NULL,
    request_ref TEXT NOT NULL,
    requested_at BIGINT NOT NULL,
    applied_epoch BIGINT,
    applied_at BIGINT
);
