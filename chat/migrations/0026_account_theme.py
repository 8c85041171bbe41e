from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("chat", "0025_token_lockout"),
    ]

    operations = [
        migrations.AddField(
            model_name="accountsettings",
            name="theme",
            field=models.CharField(
                choices=[("light", "Light"), ("dark", "Dark"), ("system", "System")], default="system", max_length=8
            ),
        ),
    ]
