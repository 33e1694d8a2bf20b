from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("mcp_grants", "0005_grant_resources_prompts"),
    ]

    operations = [
        migrations.AddField(
            model_name="mcpserver",
            name="prefix_tools",
            field=models.BooleanField(default=True),
        ),
        migrations.AddField(
            model_name="mcpserver",
            name="tool_conflicts",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
