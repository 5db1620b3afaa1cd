-- The secret the nodes of a cluster share (issue 25.2): a follower sends it with every request it
-- forwards, with the client's address, and the leader believes that address (budgets, audit)
-- only from a request that carries it. Made by the first node that needs it; read by every node
-- (whoever can read the database is a node).
CREATE TABLE cluster_secret (
    id INTEGER PRIMARY KEY,
    secret TEXT NOT NULL
);
