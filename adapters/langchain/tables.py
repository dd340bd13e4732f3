"""langchain-postgres `PGVector` tables, described for the vector engine (`TableLayout`).

Every PGVector collection shares `langchain_pg_embedding`; a collection is the rows whose
`collection_id` is the `uuid` of its `langchain_pg_collection` row. Metadata is the JSONB
`cmetadata` column, filtered with the store's jsonpath dialect.
"""

from __future__ import annotations

from accel.engines.base import TableLayout, TableScope


def pgvector_collection(name: str) -> TableLayout:
    """The rows of PGVector collection `name` (its `collection_name`)."""
    return TableLayout(
        name=f"langchain:{name}",
        schema="public",
        table="langchain_pg_embedding",
        id_column="id",
        text_column="document",
        metadata_column="cmetadata",
        filter_dialect="jsonpath",
        scope=TableScope(table="langchain_pg_collection", key="uuid", foreign_key="collection_id", name_column="name", value=name),
    )
