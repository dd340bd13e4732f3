"""The parts of a query's output dict, each known as soon as the node that makes it finishes.

Stock frameworks stream a dict-valued chain part by part: LangChain's `RunnableParallel`
yields `{key: chunk}` as each branch produces, `RunnablePassthrough.assign` yields the
input's keys and then the new ones, so a caller printing chunks sees the question, then the
sources, then the answer token by token. A template whose Output is such a dict says how it
is built with ops that declare `dict_parts` (`accel.ir.ops`): `dict_layout` walks back from
the Output through them, and through ops whose value is one of their ports' (`value_port`, a
node without an op that forwards its one input), to the nodes whose values are the parts.
The runtime streams each part once its node finishes (a Decode's text under its key as it is
generated); adapters shape them as their framework's chunks. Pure: templates in, parts out.
"""

from __future__ import annotations

from dataclasses import dataclass

from accel.ir.template import Template


@dataclass(frozen=True)
class DictPart:
    """One part of the output dict: node `node`'s value (its `key` item, when the template
    reads one) under the keys `path`; with `merge`, a dict whose items are parts of their own
    under `path`, less the keys in `exclude`, which a later part provides (stock leaves them
    out of what it streams)."""

    path: tuple[str, ...]
    node: int
    key: str | int | None = None
    merge: bool = False
    exclude: frozenset[str] = frozenset()


def dict_layout(template: Template) -> tuple[DictPart, ...]:
    """The Output's parts, in the order its dicts merge them; () when the Output is not a dict
    built from known parts (its value then comes once, whole)."""
    parts: list[DictPart] = []
    i, key = through_identities(template, template.index[template.output], None)
    if key is not None or not _layout(template, i, (), parts):
        return ()
    return tuple(parts)


def _layout(template: Template, i: int, path: tuple[str, ...], parts: list[DictPart]) -> bool:
    """Append the parts of dict-building node i under `path`; False when they cannot be known."""
    layout = _dict_parts(template, i)
    refs = {port: (src, key) for port, src, key in template.port_refs[i]}
    if layout is None or any(port not in refs for port, _ in layout):
        return False
    provided = [frozenset({key}) if key is not None else _keys_of(template, refs[port]) for port, key in layout]
    for n, (port, key) in enumerate(layout):
        if any(keys is None for keys in provided[n + 1:]):
            return False  # a dict of unknown keys merged later may override anything before it
        later = frozenset().union(*provided[n + 1:])
        src, pick = through_identities(template, *refs[port])
        inner: list[DictPart] = []
        nested = pick is None and _dict_parts(template, src) is not None
        if key is not None:
            if key in later:
                continue
            if nested and _layout(template, src, (*path, key), inner):
                parts += inner
            else:
                parts.append(DictPart((*path, key), src, pick))
        elif nested and _layout(template, src, path, inner):
            for part in inner:
                if part.merge and part.path == path:
                    parts.append(DictPart(path, part.node, part.key, merge=True, exclude=part.exclude | later))
                elif part.path[len(path)] not in later:
                    parts.append(part)
        else:
            parts.append(DictPart(path, src, pick, merge=True, exclude=later))
    return True


def _dict_parts(template: Template, i: int) -> tuple[tuple[str, str | None], ...] | None:
    op = template.nodes[i].op
    declare = getattr(op, "dict_parts", None)
    return None if declare is None else declare(tuple(template.nodes[i].inputs))


def _keys_of(template: Template, ref: tuple[int, str | int | None]) -> frozenset[str] | None:
    """The top keys of the dict a port holds, when the template says them; None: unknown."""
    src, pick = through_identities(template, *ref)
    layout = None if pick is not None else _dict_parts(template, src)
    if layout is None:
        return None
    refs = {port: (s, k) for port, s, k in template.port_refs[src]}
    keys: set[str] = set()
    for port, key in layout:
        inner = frozenset({key}) if key is not None else _keys_of(template, refs[port]) if port in refs else None
        if inner is None:
            return None
        keys |= inner
    return frozenset(keys)


def through_identities(template: Template, i: int, key: str | int | None) -> tuple[int, str | int | None]:
    """Follow nodes whose value is one of their inputs' unchanged back to the node that makes it."""
    while key is None:
        node = template.nodes[i]
        if node.is_engine or _dict_parts(template, i) is not None:
            break
        port = getattr(node.op, "value_port", None) if node.op is not None else node.passthrough_port
        sources = [(src, k) for p, src, k in template.port_refs[i] if p == port]
        if port is None or len(sources) != 1:
            break
        i, key = sources[0]
    return i, key
