"""DynaDraft's benchmarks: scripts that print side-by-side ratios, each run as `python -m bench.THEME.NAME`."""
