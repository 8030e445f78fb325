from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("efficiency", "0002_efficiency_day")]

    operations = [
        migrations.AddField(
            model_name="efficiency", name="gpu_util_slurm_percent",
            field=models.FloatField(blank=True, null=True, help_text=(
                "Slurm's own gres/gpuutil (Slurm >= 23.02): the check on the samples"))),
    ]
