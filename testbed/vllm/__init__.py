"""The real vLLM engine (CPU build here, CUDA on a GPU machine) as a testbed engine."""
