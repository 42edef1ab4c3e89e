"""Tests of the local OpenAI-compatible endpoint."""
