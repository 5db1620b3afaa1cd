-- Where the engine's leader answers (issue 25.2): the holder of the term writes the address
-- other services forward requests to (`http://host:port`); cleared with the holder.
ALTER TABLE engine_leases ADD COLUMN advertise_url TEXT;
