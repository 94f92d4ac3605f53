"""The diagnosis API (FastAPI): on top of everything, imported by nothing."""
