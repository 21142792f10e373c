"""The decision engine: pure, synchronous, deterministic. No I/O, no clock."""
