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

# Folders of data files (no __init__.py) inside a package are data-only packages: setuptools warns
# "Package would be ignored" for a folder Python could import that `packages` does not list, and a
# future setuptools drops its files. Their files are package_data in pyproject.toml.
DATA_PACKAGES = ["inferslice.service.console.static", "inferslice.service.console.static.vendor.uplot"]
packages.extend(p for p in DATA_PACKAGES if p not in packages)

setup(package_dir=package_dir, packages=packages)
