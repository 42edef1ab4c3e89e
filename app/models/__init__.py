"""Model catalog, Hugging Face downloads, GGUF inspection and runtime compatibility (no Qt)."""
