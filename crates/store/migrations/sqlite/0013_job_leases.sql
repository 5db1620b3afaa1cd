-- Job leases: a worker that claims a queued download or backtest names itself
-- (`lease_owner`) and holds the job until `lease_expires_at` (epoch ms, from the injected
-- clock), renewing it as it makes progress; a RUNNING job whose lease has expired (or that has
-- none: a row from before leases) is taken back by another worker.
ALTER TABLE download_jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE download_jobs ADD COLUMN lease_expires_at BIGINT;
ALTER TABLE backtests ADD COLUMN lease_owner TEXT;
ALTER TABLE backtests ADD COLUMN lease_expires_at BIGINT;
