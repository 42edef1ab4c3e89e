"""The HTTP endpoint: streaming overhead against the engine, and a loopback load check."""
