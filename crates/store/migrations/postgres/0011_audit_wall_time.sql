-- One clock (issue 21.4): an audit row's `ts` is market time (the simulated market's in DEMO),
-- like the orders and executions it sits beside; `wall_ts` keeps the wall time it was written
-- at, which retention prunes by (a faster market must not age the log faster). Rows written
-- before this migration were stamped with the wall clock: both columns say so.
ALTER TABLE audit_log ADD COLUMN wall_ts BIGINT;
UPDATE audit_log SET wall_ts = ts;
CREATE INDEX audit_log_wall_ts ON audit_log (wall_ts);
