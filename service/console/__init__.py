"""The operator console: ``GET /console`` on the API, fed by one read-only ``/v1/console/state``.

``view`` builds the page's document from plain data (pure), ``feed`` reads it from the store
incrementally, ``links`` adds WAN telemetry, ``routes`` mounts page and endpoint on the FastAPI app.
The page itself is static ES modules under ``static/`` with uPlot vendored (``static/vendor/uplot``).
"""
