-- Whether an order is marked for the extended sessions (CONTRACT §12): 1 for a LIMIT DAY order
-- the venue works from 04:00 to 20:00 New York, 0 for every other.
ALTER TABLE orders ADD COLUMN extended_hours INTEGER NOT NULL DEFAULT 0;
