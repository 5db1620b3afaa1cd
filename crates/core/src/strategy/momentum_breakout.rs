//! The default live strategy (written next).
