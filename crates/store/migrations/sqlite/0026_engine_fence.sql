-- The engine's fence, apart from its lease: one row holding the current term's epoch. Every
-- write of trading state checks it in its own transaction (on PostgreSQL holding it FOR SHARE
-- to the commit), and a takeover moves it on in the transaction that takes the term, so a
-- takeover still waits for a write in flight. The holder's renewals update `engine_leases`
-- only, so a renewal never queues behind the engine's writes in flight: under load it answers
-- as fast as the database does, and the holder's sending window does not lapse for a slow write.
CREATE TABLE engine_fence (
    id INTEGER PRIMARY KEY,
    epoch BIGINT NOT NULL
);
INSERT INTO engine_fence (id, epoch) SELECT id, epoch FROM engine_leases WHERE id = 1;
