-- A counter bumped in the same transaction as every token write (create, revoke, replace):
-- a running service polls it and reloads its tokens when it moves, so a token created or
-- revoked by the CLI (or another node) takes effect without a restart. Token writes also lock
-- this row first, which serialises them: two revokes cannot both see a second active admin.
CREATE TABLE token_changes (
    id INTEGER PRIMARY KEY,
    version BIGINT NOT NULL
);
INSERT INTO token_changes (id, version) VALUES (1, 0);
