"""`accel graph module:attr` explains an app it has not run and draws its p-graph beside its
e-graph (no engine is contacted: capture only binds engines)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

APP = '''
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_openai import ChatOpenAI

prompt = ChatPromptTemplate.from_messages([("system", "You are terse."), ("human", "{question}")])
chain = prompt | ChatOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", model="tiny") | StrOutputParser()
'''


def test_graph_explains_and_draws(tmp_path: Path) -> None:
    (tmp_path / "myapp.py").write_text(APP)
    picture = tmp_path / "graph.svg"
    done = subprocess.run([str(Path(sys.executable).parent / "accel"), "graph", "myapp:chain", "--out", str(picture)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[lowered] ChatOpenAI: Decode on" in done.stdout and "passes applied:" in done.stdout
    assert picture.read_text().lstrip().startswith(("<?xml", "<svg")) and "Decode" in picture.read_text()


def test_graph_names_a_bad_spec(tmp_path: Path) -> None:
    done = subprocess.run([str(Path(sys.executable).parent / "accel"), "graph", "no_colon_here"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "expected MODULE:ATTR" in done.stderr
