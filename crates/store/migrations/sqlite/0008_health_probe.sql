-- One row the database probe writes while writes are failing (a full disk): a write that
-- succeeds again tells the service it may write.
CREATE TABLE health_probe (
    id INTEGER PRIMARY KEY,
    probed_at BIGINT NOT NULL
);
