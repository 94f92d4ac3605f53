"""Per-tier serving front: Ray-Serve-like router, queue and autoscaler in front of the engine hosts."""
