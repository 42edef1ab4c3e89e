"""Calibration sweeps on this device, the frontier builder and static-vs-DD reports (no Qt)."""
