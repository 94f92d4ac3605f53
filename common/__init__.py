"""The shared-mechanism layer (``inferslice.common``): what several rooms need for real, written once.

Registry file, SSE parsing, the one exposition parser, namespace entry, child-process management,
free ports, atomic writes and Prometheus duration formatting. Imports only the vocabulary.
"""
