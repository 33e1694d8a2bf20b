from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0006_policy_from_settings"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="origin",
            field=models.CharField(
                choices=[
                    ("user", "User"),
                    ("comm", "Channel integration"),
                    ("app", "Application"),
                    ("skill", "Skill"),
                ],
                default="user",
                max_length=20,
            ),
        ),
    ]
