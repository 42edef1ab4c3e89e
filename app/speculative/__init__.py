"""Draft sources, verification, adaptive draft length, source selection and telemetry (no Qt)."""
