"""The application layer's service (``inferslice.service``): the diagnosis service and loops, the one
``Platform`` stack, the thin FastAPI app, the SQLite store. Imported by nothing below it."""
