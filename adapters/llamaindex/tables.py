"""llama-index `PGVectorStore` tables, described for the vector engine (`TableLayout`).

A store with `table_name="docs"` writes `data_docs` (names lower-cased, as llama-index does)
with `node_id`, `text` and a JSON `metadata_` column, which its filters compare through `->>`
(as numbers when the filter value is one, as text otherwise).
"""

from __future__ import annotations

from accel.engines.base import TableLayout


def pgvector_table(table_name: str, schema: str = "public") -> TableLayout:
    """The table of a PGVectorStore with these `table_name` and `schema_name`."""
    schema, table = schema.lower(), table_name.lower()
    return TableLayout(
        name=f"llamaindex:{schema}.{table}",
        schema=schema,
        table=f"data_{table}",
        id_column="node_id",
        text_column="text",
        metadata_column="metadata_",
        filter_dialect="text_compare",
    )
