"""Keep a chunk's embedding inside its row (storage MAIN): PostgreSQL moves the largest values of a row
over about 2 kB out of line (TOAST), and a vector fetched from there costs a lookup per row compared.
With MAIN the text and its search vector go out of line first; a vector is moved only when the row
cannot fit a page otherwise (models over about 2,000 dimensions)."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("memory", "0003_chunk_hnsw_local_model")]

    operations = [
        migrations.RunSQL(
            sql="ALTER TABLE memory_memorychunk ALTER COLUMN embedding SET STORAGE MAIN",
            reverse_sql="ALTER TABLE memory_memorychunk ALTER COLUMN embedding SET STORAGE EXTERNAL",
        )
    ]
