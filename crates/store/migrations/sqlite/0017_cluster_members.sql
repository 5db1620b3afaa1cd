-- The processes of a cluster (issue 25.6): every `serve` and `worker` process on the database
-- heartbeats its row about every second (`heartbeat_at`, its own wall clock, epoch ms); the
-- `cluster` health component lists those seen lately, and a row left unrenewed for a minute is
-- removed by any member. `kind`: serve or worker.
CREATE TABLE cluster_members (
    node_id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    heartbeat_at BIGINT NOT NULL
);
