"""Framework classes named by their defining module, compared by identity.

Adapters check a few classes from packages that may not be installed (a LlamaIndex
integration, LangChain's legacy chains). Comparing `type(obj).__name__` would also match an
unrelated class of the same name, and importing the package to get the class costs seconds.
An object of a class exists only once the class's module is imported, so the class is looked up
in `sys.modules`: not imported means nothing can be an instance of it."""

from __future__ import annotations

import sys
from typing import Any


def loaded_class(module: str, name: str) -> type | None:
    """`module.name` if `module` (the class's defining module) is imported, else None."""
    found = sys.modules.get(module)
    return getattr(found, name, None) if found is not None else None


def is_exactly(obj_or_cls: Any, *paths: tuple[str, str]) -> bool:
    """Whether `obj_or_cls` (an object, or a class) is of exactly one of the classes at `paths`,
    given as (defining module, name); subclasses may change behaviour, so they do not match."""
    cls = obj_or_cls if isinstance(obj_or_cls, type) else type(obj_or_cls)
    return any(cls is loaded_class(module, name) for module, name in paths)
