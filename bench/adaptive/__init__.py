"""Inside a request: adaptive draft length, the source pool, its memory, warm-up, catch-up and cost stop."""
