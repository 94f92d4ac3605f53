"""A real Ray Serve application per tier (``--serving ray``): Serve replicas wrap the engine emulator.

Needs the optional extra ``ray`` (``pip install 'inferslice[ray]'``). Nothing here is imported unless
a Ray-served testbed or a Ray test asks for it.
"""
