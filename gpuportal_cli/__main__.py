from gpuportal_cli.main import app

app(prog_name="gpuportal")
