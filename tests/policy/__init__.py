"""Tests for the pure Dynamic Draft policy package (app.policy)."""
