"""Emulated vLLM engines: performance model, OpenAI-compatible replica servers, the PoP engine host."""
