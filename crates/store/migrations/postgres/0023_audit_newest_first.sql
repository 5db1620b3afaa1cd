-- The audit log is listed newest first by its timestamp, then by id (a row written late, from
-- the outbox or an aggregated refusal, takes its place in time): the index that order and its
-- keyset cursor read.
CREATE INDEX audit_log_ts_id ON audit_log (ts, audit_id);
