"""Framework classes are compared by identity, looked up only once their module is imported."""

from __future__ import annotations

import ast
import sys
import types
from pathlib import Path

from accel.adapters.common.classes import is_exactly, loaded_class


def test_a_class_of_the_same_name_elsewhere_does_not_match(monkeypatch) -> None:
    real = types.ModuleType("fake_framework.chains.llm")
    impostor = types.ModuleType("user_code")
    real.LLMChain = type("LLMChain", (), {})
    impostor.LLMChain = type("LLMChain", (), {})
    path = ("fake_framework.chains.llm", "LLMChain")
    assert loaded_class(*path) is None and not is_exactly(real.LLMChain(), path)  # not imported: nothing matches
    monkeypatch.setitem(sys.modules, "fake_framework.chains.llm", real)
    assert is_exactly(real.LLMChain(), path) and is_exactly(real.LLMChain, path)
    assert not is_exactly(impostor.LLMChain(), path)  # same name, another class
    subclass = type("MyChain", (real.LLMChain,), {})
    assert not is_exactly(subclass(), path)  # a subclass may behave otherwise


# ---- no adapter dispatches on a class's name ----------------------------------------------------

_ADAPTERS = Path(__file__).resolve().parents[2] / "adapters"
_NAME_ATTRS = frozenset({"__name__", "__qualname__"})
_EQUALITY = (ast.Eq, ast.NotEq, ast.In, ast.NotIn)


def _is_class_name_literal(node: ast.AST, constants: dict[str, ast.AST]) -> bool:
    """A capitalised string literal ("Refine"), a literal collection of them, or a module
    constant bound to one."""
    if isinstance(node, ast.Name) and node.id in constants:
        return _is_class_name_literal(constants[node.id], {})
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("frozenset", "set", "tuple"):
        return bool(node.args) and _is_class_name_literal(node.args[0], constants)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return bool(node.elts) and all(_is_class_name_literal(e, constants) for e in node.elts)
    if isinstance(node, ast.Dict):
        return bool(node.keys) and all(k is not None and _is_class_name_literal(k, constants) for k in node.keys)
    return isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value[:1].isupper()


class _ClassNameScan(ast.NodeVisitor):
    """Finds comparisons of a class's `__name__` (directly, through a local variable, or a
    helper / property returning it), lookups keyed by one, and `kind` / `.kind` / `_name(...)`
    compared with a capitalised string literal."""

    def __init__(self, tree: ast.Module) -> None:
        self.found: list[int] = []
        self.constants = {t.id: stmt.value for stmt in tree.body if isinstance(stmt, ast.Assign)
                          for t in stmt.targets if isinstance(t, ast.Name)}
        self.functions: set[str] = set()  # helpers and properties that return a class name
        self.tainted: set[str] = set()  # local names bound to a class name
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and any(
                    isinstance(r, ast.Return) and r.value is not None and self._class_name(r.value) for r in ast.walk(fn)):
                self.functions.add(fn.name)

    def _class_name(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Attribute):
            return node.attr in _NAME_ATTRS or node.attr in self.functions
        if isinstance(node, ast.Name):
            return node.id == "__name__" or node.id in self.tainted
        if isinstance(node, ast.Call):
            func = node.func
            return (isinstance(func, ast.Name) and func.id in self.functions) or (
                isinstance(func, ast.Attribute) and func.attr in self.functions)
        return False

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.tainted = self.tainted, set(self.tainted)
        self.generic_visit(node)
        self.tainted = outer

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node: ast.Assign) -> None:
        self.generic_visit(node)
        if isinstance(node.value, ast.Tuple):
            pairs = [(t, v) for target in node.targets if isinstance(target, ast.Tuple)
                     for t, v in zip(target.elts, node.value.elts)]
        else:
            pairs = [(t, node.value) for t in node.targets]
        for target, value in pairs:
            if isinstance(target, ast.Name) and self._class_name(value):
                self.tainted.add(target.id)

    def visit_Compare(self, node: ast.Compare) -> None:
        self.generic_visit(node)
        operands = [node.left, *node.comparators]
        for op, left, right in zip(node.ops, operands, operands[1:]):
            if not isinstance(op, _EQUALITY):
                continue
            for a, b in ((left, right), (right, left)):
                main = isinstance(b, ast.Constant) and b.value == "__main__"
                named_kind = (isinstance(a, ast.Name) and a.id == "kind") or (isinstance(a, ast.Attribute) and a.attr == "kind") or (
                    isinstance(a, ast.Call) and isinstance(a.func, ast.Name) and a.func.id == "_name")
                if (self._class_name(a) and not main) or (named_kind and _is_class_name_literal(b, self.constants)):
                    self.found.append(node.lineno)

    def visit_Subscript(self, node: ast.Subscript) -> None:
        self.generic_visit(node)
        if self._class_name(node.slice):
            self.found.append(node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and node.args and self._class_name(node.args[0]):
            self.found.append(node.lineno)


def _class_name_comparisons(source: str) -> list[int]:
    tree = ast.parse(source)
    scan = _ClassNameScan(tree)
    scan.visit(tree)
    return sorted(set(scan.found))


def test_the_scan_finds_each_form_of_name_dispatch() -> None:
    """The scan below must be able to fail: each way the adapters once dispatched on names."""
    forms = {
        "def f(x):\n    return type(x).__name__ == 'Refine'\n": [2],
        "def f(x):\n    kind = type(x).__name__\n    return kind in ('Refine', 'TreeSummarize')\n": [3],
        "def _n(o):\n    return type(o).__name__\n\ndef f(x):\n    name = _n(x)\n    return name != 'PGVectorStore'\n": [6],
        "P = {'OpenAI': 1}\n\ndef f(x):\n    return P.get(type(x).__name__)\n": [4],
        "P = {'OpenAI': 1}\n\ndef f(x):\n    return P[type(x).__name__]\n": [4],
        "class S:\n    @property\n    def kind(self):\n        return type(self.s).__name__\n\n"
        "    def f(self):\n        return self.kind == 'TreeSummarize'\n": [7],
        "K = ('Refine', 'Accumulate')\n\ndef f(plan):\n    return plan.kind not in K\n": [4],
    }
    for source, lines in forms.items():
        assert _class_name_comparisons(source) == lines, source
    allowed = ("if __name__ == '__main__':\n    pass\n"
               "def f(spec, x):\n    label = type(x).__name__\n    return spec.kind == 'llm', f'{label}'\n")
    assert _class_name_comparisons(allowed) == []


def test_no_class_name_comparisons() -> None:
    """No adapter tells a framework's class by its name (a user class may share it): classes
    are compared by identity (`is_exactly`, `isinstance`, `type(x) is C`)."""
    files = sorted(p for p in _ADAPTERS.rglob("*.py") if "__pycache__" not in p.parts)
    assert files
    found = {str(p.relative_to(_ADAPTERS.parent)): lines for p in files if (lines := _class_name_comparisons(p.read_text()))}
    assert found == {}


def test_an_http_client_named_like_the_sdks_own_keeps_the_client_on_the_floor() -> None:
    """The `openai` SDK's own httpx client lets a lowered Embed send the client's requests; a
    user's httpx client (its own transport, hooks ...) does not, whatever its class is named."""
    import httpx
    import openai

    from accel.adapters.common.server_encoders import openai_embed_engine

    class SyncHttpxClientWrapper(httpx.Client):
        pass

    url = "http://127.0.0.1:9/v1"
    assert not isinstance(openai_embed_engine(openai.OpenAI(base_url=url, api_key="k")), str)
    own = openai.OpenAI(base_url=url, api_key="k", http_client=SyncHttpxClientWrapper())
    assert openai_embed_engine(own) == "its client has an httpx client of its own"
