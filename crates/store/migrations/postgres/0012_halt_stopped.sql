-- The watched symbols whose running strategy the emergency halt stopped (comma-separated),
-- kept until an operator restarts them (POST /api/risk/resume-strategies) so a restart of the
-- service does not forget which strategies to offer to restart.
ALTER TABLE trading_state ADD COLUMN halt_stopped TEXT NOT NULL DEFAULT '';
