"""LangChain integration page "PGVector integration" (langchain-postgres)
(https://docs.langchain.com/oss/python/integrations/vectorstores/pgvector, source
langchain-ai/docs src/oss/python/integrations/vectorstores/pgvector.mdx):

    connection = "postgresql+psycopg://langchain:langchain@localhost:6024/langchain"  # Uses psycopg3!
    collection_name = "my_docs"
    vector_store = PGVector(embeddings=embeddings, collection_name=collection_name, connection=connection, use_jsonb=True)
    docs = [Document(page_content="there are cats in the pond", metadata={"id": 1, ...}), ...]
    vector_store.add_documents(docs, ids=[doc.metadata["id"] for doc in docs])
    results = vector_store.similarity_search("kitty", k=10, filter={"id": {"$in": [1, 5, 2, 9]}})
    vector_store.similarity_search("ducks", k=10, filter={"id": {"$in": [1, 5, 2, 9]}, "location": {"$in": ["pond", "market"]}})
    vector_store.similarity_search("ducks", k=10, filter={"$and": [{"id": {"$in": [1, 5, 2, 9]}}, {"location": {"$in": ["pond", "market"]}}]})
    retriever = vector_store.as_retriever(search_type="mmr", search_kwargs={"k": 1})
    retriever.invoke("kitty")

The ten documents, their metadata and ids, the filters and the retriever are as written.
Changes:
- embeddings: `OpenAIEmbeddings(model="text-embedding-3-large")` -> `HuggingFaceEmbeddings` on
  the packaged MiniLM path;
- connection: the docker Postgres -> the test Postgres; `collection_name` made unique per run,
  and the document ids with it (`<collection>-<id>`): `langchain_pg_embedding`'s id is global,
  and `add_documents` upserts without moving a row to the new collection, so a second store
  built from the page's ids 1-10 in one database stayed empty (test_stream_events.py then
  test_langchain_docs.py in one process: every filtered search found nothing, stock's too);
  the filters read the metadata's `id`, unchanged;
- the page's direct `similarity_search(query, k=10, filter=...)` calls are not Runnables, so
  each filtered search is run as the retriever the page recommends ("Query by turning into
  retriever"): `vector_store.as_retriever(search_kwargs={"k": 10, "filter": ...})`.
"""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_huggingface import HuggingFaceEmbeddings
from langchain_postgres import PGVector

FILTERS = {
    "in": {"id": {"$in": [1, 5, 2, 9]}},
    "implicit_and": {"id": {"$in": [1, 5, 2, 9]}, "location": {"$in": ["pond", "market"]}},
    "and": {
        "$and": [
            {"id": {"$in": [1, 5, 2, 9]}},
            {"location": {"$in": ["pond", "market"]}},
        ]
    },
}


def vector_store(connection: str, collection_name: str, embed_model_path: str) -> PGVector:
    embeddings = HuggingFaceEmbeddings(model_name=embed_model_path)

    vector_store = PGVector(
        embeddings=embeddings,
        collection_name=collection_name,
        connection=connection,
        use_jsonb=True,
    )

    docs = [
        Document(
            page_content="there are cats in the pond",
            metadata={"id": 1, "location": "pond", "topic": "animals"},
        ),
        Document(
            page_content="ducks are also found in the pond",
            metadata={"id": 2, "location": "pond", "topic": "animals"},
        ),
        Document(
            page_content="fresh apples are available at the market",
            metadata={"id": 3, "location": "market", "topic": "food"},
        ),
        Document(
            page_content="the market also sells fresh oranges",
            metadata={"id": 4, "location": "market", "topic": "food"},
        ),
        Document(
            page_content="the new art exhibit is fascinating",
            metadata={"id": 5, "location": "museum", "topic": "art"},
        ),
        Document(
            page_content="a sculpture exhibit is also at the museum",
            metadata={"id": 6, "location": "museum", "topic": "art"},
        ),
        Document(
            page_content="a new coffee shop opened on Main Street",
            metadata={"id": 7, "location": "Main Street", "topic": "food"},
        ),
        Document(
            page_content="the book club meets at the library",
            metadata={"id": 8, "location": "library", "topic": "reading"},
        ),
        Document(
            page_content="the library hosts a weekly story time for kids",
            metadata={"id": 9, "location": "library", "topic": "reading"},
        ),
        Document(
            page_content="a cooking class for beginners is offered at the community center",
            metadata={"id": 10, "location": "community center", "topic": "classes"},
        ),
    ]

    vector_store.add_documents(docs, ids=[f"{collection_name}-{doc.metadata['id']}" for doc in docs])
    return vector_store


def filtered_retriever(vector_store: PGVector, name: str):
    return vector_store.as_retriever(search_kwargs={"k": 10, "filter": FILTERS[name]})


def mmr_retriever(vector_store: PGVector):
    return vector_store.as_retriever(search_type="mmr", search_kwargs={"k": 1})
