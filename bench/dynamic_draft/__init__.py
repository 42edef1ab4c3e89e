"""Dynamic Draft: calibration, class-aware picks, the policy's decision cost, in-request adaptation (SIMULATED)."""
