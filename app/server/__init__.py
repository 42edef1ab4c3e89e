"""The local OpenAI-compatible HTTP endpoint: wire schemas, adapters and routes (no Qt)."""
