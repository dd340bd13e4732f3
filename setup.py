"""Install the top-level folders under the `accel.` namespace (see DESIGN.md, Folders)."""

from setuptools import find_packages, setup

PACKAGE_DIRS = {
    "accel": "accel",
    "accel.adapters": "adapters",
    "accel.engines": "engines",
    "accel.tracer": "tracer",
    "accel.patches": "patches",
    "accel.benchmarks": "benchmarks",
    "accel.examples": "examples",
}


def _packages() -> list[str]:
    found = []
    for name, folder in PACKAGE_DIRS.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(folder) if f"{name}.{sub}" not in PACKAGE_DIRS]
    return found


setup(packages=_packages(), package_dir=PACKAGE_DIRS)
