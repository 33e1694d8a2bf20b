"""An HNSW index over the vectors of the model shipped with Toolgate (all-MiniLM-L6-v2, 384 dimensions).

The column holds vectors of any size (each chunk names its model), so the index is on the expression
``embedding::vector(384)`` and partial to that model's chunks; ``apps.memory.search.nearest`` orders by
the same expression for that model. Vectors of other models are compared by an exact scan. ``ef_construction`` is twice the default: a
better graph for memories that repeat themselves (near-identical chunks), for a slower build.
"""

from django.db import migrations

INDEX = "memory_chunk_minilm_hnsw"


class Migration(migrations.Migration):
    dependencies = [("memory", "0002_index_status_skipped")]

    operations = [
        migrations.RunSQL(
            sql=(
                f"CREATE INDEX IF NOT EXISTS {INDEX} ON memory_memorychunk "
                "USING hnsw ((embedding::vector(384)) vector_cosine_ops) WITH (m = 16, ef_construction = 128) "
                "WHERE embedder = 'all-MiniLM-L6-v2'"
            ),
            reverse_sql=f"DROP INDEX IF EXISTS {INDEX}",
        )
    ]
