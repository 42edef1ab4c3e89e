"""What runs on the lent GPU machine: cost curves, engine runs, MTP measurements, shape-equivalent GGUFs."""
