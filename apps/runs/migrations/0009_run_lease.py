from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_run_waiting_for_approval"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="lease_token",
            field=models.UUIDField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="lease_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="takeovers",
            field=models.PositiveSmallIntegerField(default=0),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["status", "lease_until"], name="run_lease"),
        ),
    ]
