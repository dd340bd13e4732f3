"""Install the top-level folders under the `accel.` namespace (see DESIGN.md, Folders).

`accel/engines`, `accel/adapters`, ... are symbolic links to those folders, so the checkout
also has the import layout on disk (import-linter walks `accel/` and finds every layer)."""

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


def _mapped_elsewhere(package: str, owner: str) -> bool:
    """Whether `package` lives in another mapped folder (accel/engines is a link to engines/)."""
    return any(package == other or package.startswith(other + ".") for other in PACKAGE_DIRS if len(other) > len(owner))


def _packages() -> list[str]:
    found = []
    for name, folder in PACKAGE_DIRS.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_packages(folder) if not _mapped_elsewhere(f"{name}.{sub}", name)]
    return found


setup(packages=_packages(), package_dir=PACKAGE_DIRS)
