-- The event stream as the engine's leader published it (issue 25.4, PostgreSQL): the next
-- leader reads the newest back into its resume buffer, so a client's Last-Event-ID resumes on
-- any node after a failover. `event_id`s grow across engine terms (epoch << 32, then one by
-- one); `wire` is the SSE data as sent; `published_at` wall epoch ms (kept a day).
CREATE TABLE cluster_events (
    event_id BIGINT PRIMARY KEY,
    kind TEXT NOT NULL,
    wire TEXT NOT NULL,
    published_at BIGINT NOT NULL
);
CREATE INDEX cluster_events_published ON cluster_events (published_at);
