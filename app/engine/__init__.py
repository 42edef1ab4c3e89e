"""The llama.cpp session, decode loop, KV/prefix cache and the one engine thread that owns every context (no Qt)."""
