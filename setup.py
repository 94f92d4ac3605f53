"""Map the repository's top-level folders into the ``inferslice`` namespace.

The design card keeps ``exporters/``, ``collectors/`` ... at the top of the repository, but generic
names such as ``control`` must never be installed as top-level packages: each folder is installed
as ``inferslice.<folder>`` (``package_dir``), sub-packages included.
"""

from pathlib import Path

from setuptools import find_packages, setup

MAPPED = [
    "common", "exporters", "collectors", "dashboards", "bottleneck", "control", "deploy", "testbed",
    "service", "cli", "bench",
]

package_dir = {"inferslice": "inferslice"}
packages = ["inferslice", *(f"inferslice.{p}" for p in find_packages("inferslice"))]
for folder in MAPPED:
    if not (Path(folder) / "__init__.py").exists():
        continue
    package_dir[f"inferslice.{folder}"] = folder
    packages.append(f"inferslice.{folder}")
    packages.extend(f"inferslice.{folder}.{sub}" for sub in find_packages(folder))

setup(package_dir=package_dir, packages=packages)
