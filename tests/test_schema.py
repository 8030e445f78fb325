from django.core.management import call_command


def test_openapi_schema_is_valid_without_warnings(tmp_path):
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))
