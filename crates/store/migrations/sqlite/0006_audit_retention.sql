-- Audit retention (issue 20): the periodic prune deletes rows older than
-- `audit.retention_days` by timestamp; without this index each prune scans the whole log.
CREATE INDEX audit_log_ts ON audit_log (ts);
