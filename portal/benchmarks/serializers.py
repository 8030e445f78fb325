import re

from rest_framework import serializers

from portal.benchmarks.figures import TOOLS
from portal.benchmarks.models import CONTEXT_FIELDS
from portal.core import fields

_NAME = r"^[A-Za-z0-9._ ,:()+/@-]*$"  # models, partitions, GPU types: printable words, no markup
MAX_GPUS = 100000


def _text(max_length: int, **kwargs: object) -> serializers.CharField:
    return fields.RegexField(_NAME, max_length=max_length, required=False, allow_blank=True, **kwargs)


class ResultFilterSerializer(serializers.Serializer):
    tool = serializers.ChoiceField(choices=TOOLS, required=False)
    model = _text(128)
    precision = _text(16)
    gpus = serializers.IntegerField(min_value=0, max_value=MAX_GPUS, required=False)
    gpu_type = _text(64)
    partition = _text(64)
    flagged = serializers.BooleanField(required=False, allow_null=True, default=None)
    parsed = serializers.BooleanField(required=False, allow_null=True, default=None)
    run_after = serializers.DateTimeField(required=False, help_text="Runs at or after (ISO 8601)")
    run_before = serializers.DateTimeField(required=False, help_text="Runs before (ISO 8601)")
    user = serializers.RegexField(r"^[a-z_][a-z0-9_.-]{0,31}$", required=False, help_text="One user's runs")


class ReferenceSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    tool = serializers.CharField()
    metric = serializers.CharField()
    model = serializers.CharField(help_text="Empty: any")
    precision = serializers.CharField(help_text="Empty: any")
    gpus = serializers.IntegerField(allow_null=True, help_text="null: any")
    case = serializers.CharField(help_text="Empty: any")
    partition = serializers.CharField(help_text="Empty: any partition")
    gpu_type = serializers.CharField(help_text="Empty: any GPU type")
    value = serializers.FloatField()
    lower = serializers.FloatField(allow_null=True, help_text="Fraction of value, e.g. -0.1; null: unbounded")
    upper = serializers.FloatField(allow_null=True, help_text="Fraction of value, e.g. 0.1; null: unbounded")
    lower_bound = serializers.SerializerMethodField(help_text="value * (1 + lower)")
    upper_bound = serializers.SerializerMethodField(help_text="value * (1 + upper)")
    unit = serializers.CharField()
    origin = serializers.CharField(help_text="admin, or derived (median of `derived_from`)")
    derived_from = serializers.ListField(child=serializers.IntegerField())
    created_at = serializers.DateTimeField()

    def get_lower_bound(self, reference: object) -> float | None:
        return reference.bounds[0]

    def get_upper_bound(self, reference: object) -> float | None:
        return reference.bounds[1]


class PublishedSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    source = serializers.CharField(help_text="The document the figure is published in")
    section = serializers.CharField()
    citation = serializers.CharField(help_text="Source and section, to show with the figure")
    benchmark = serializers.CharField()
    model = serializers.CharField()
    framework = serializers.CharField()
    precision = serializers.CharField()
    gpu = serializers.CharField()
    gpus = serializers.IntegerField(allow_null=True)
    nodes = serializers.IntegerField(allow_null=True)
    batch_size_per_gpu = serializers.IntegerField(allow_null=True)
    metric = serializers.CharField()
    value = serializers.FloatField()
    unit = serializers.CharField()
    notes = serializers.CharField()


class ResultSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    tool = serializers.CharField()
    case = serializers.CharField()
    source = serializers.CharField(help_text="job or import")
    model = serializers.CharField()
    framework = serializers.CharField()
    framework_version = serializers.CharField()
    precision = serializers.CharField()
    batch_size_per_gpu = serializers.IntegerField(allow_null=True)
    gpus = serializers.IntegerField(allow_null=True)
    nodes = serializers.IntegerField(allow_null=True)
    gpu_type = serializers.CharField()
    environment = serializers.CharField()
    partition = serializers.CharField()
    run_at = serializers.DateTimeField()
    user = serializers.CharField(source="user.username", allow_null=True, default=None)
    job = serializers.SerializerMethodField(help_text="The portal job it came from (its owner and admins)")
    metric = serializers.CharField()
    value = serializers.FloatField(allow_null=True)
    unit = serializers.CharField()
    parsed = serializers.BooleanField()
    reason = serializers.CharField(help_text="Why it was not parsed; empty when it was")
    flagged = serializers.BooleanField(help_text="Outside its reference when recorded")
    flag_reason = serializers.CharField()
    reference = serializers.IntegerField(source="reference_id", allow_null=True)

    def get_job(self, result: object) -> int | None:
        viewer = self.context["request"].user
        mine = viewer.is_staff or result.user_id == viewer.pk
        return result.job_id if mine else None

    def to_representation(self, result: object) -> dict:
        """The fields above, read directly: DRF's per-field machinery was most of a history page's
        time (the declared fields still document the shape in the schema)."""
        body = {name: getattr(result, name) for name in _PLAIN}
        body["run_at"] = _DATETIME.to_representation(result.run_at)
        body["user"] = result.user.username if result.user_id else None
        body["job"] = self.get_job(result)
        body["reference"] = result.reference_id
        return body


_DATETIME = serializers.DateTimeField()
_PLAIN = (
    "id",
    "tool",
    "case",
    "source",
    *CONTEXT_FIELDS,
    "metric",
    "value",
    "unit",
    "parsed",
    "reason",
    "flagged",
    "flag_reason",
)


class ResultDetailSerializer(ResultSerializer):
    data = serializers.JSONField(help_text="Everything the parser returned")
    reference_detail = ReferenceSerializer(source="reference", allow_null=True)

    def to_representation(self, result: object) -> dict:
        body = super().to_representation(result)
        body["data"] = result.data
        body["reference_detail"] = ReferenceSerializer(result.reference).data if result.reference_id else None
        return body


class CompareSerializer(serializers.Serializer):
    results = ResultDetailSerializer(many=True)
    missing = serializers.ListField(child=serializers.IntegerField(), help_text="Ids not found")


class CompareInputSerializer(serializers.Serializer):
    ids = serializers.CharField(max_length=400, help_text="Comma-separated result ids, 1 to 20")

    def validate_ids(self, value: str) -> list[int]:
        if not re.fullmatch(r"\d{1,18}(,\d{1,18}){0,19}", value.strip()):
            raise serializers.ValidationError("1 to 20 comma-separated result ids.")
        return list(dict.fromkeys(int(v) for v in value.strip().split(",")))


class ContextSerializer(serializers.Serializer):
    model = _text(128)
    framework = _text(64)
    framework_version = _text(64)
    precision = _text(16)
    batch_size_per_gpu = fields.IntegerField(
        min_value=1, max_value=10**6, required=False, allow_null=True
    )
    gpus = fields.IntegerField(min_value=0, max_value=MAX_GPUS, required=False, allow_null=True)
    nodes = fields.IntegerField(min_value=1, max_value=MAX_GPUS, required=False, allow_null=True)
    gpu_type = _text(64)
    environment = _text(128)
    partition = _text(64)
    run_at = serializers.DateTimeField(required=False, help_text="When it ran; default: now")


class ImportInputSerializer(ContextSerializer):
    tool = serializers.ChoiceField(choices=TOOLS)
    text = fields.CharField(
        max_length=1024 * 1024, trim_whitespace=False, help_text="The tool's output, as it printed it"
    )


class ImportSerializer(serializers.Serializer):
    results = ResultSerializer(many=True)


class ReferenceFilterSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=["site", "published"],
        default="site",
        help_text="site: references set or derived here; published: the "
        "built-in series from papers, each with its source",
    )
    tool = serializers.ChoiceField(choices=TOOLS, required=False)
    metric = serializers.RegexField(r"^[A-Za-z0-9_.-]{1,100}$", required=False)


class ReferenceInputSerializer(serializers.Serializer):
    derive_from = serializers.ListField(
        child=fields.IntegerField(min_value=1, max_value=2**62),
        required=False,
        min_length=1,
        max_length=100,  # a form body stays under DATA_UPLOAD_MAX_NUMBER_FIELDS
        help_text="Result ids: the reference is their median (no value needed)",
    )
    tool = serializers.ChoiceField(choices=TOOLS, required=False)
    metric = fields.RegexField(r"^[A-Za-z0-9_.-]{1,64}$", required=False)
    value = fields.FloatField(required=False, min_value=1e-12, max_value=1e15)
    lower = fields.FloatField(
        required=False,
        allow_null=True,
        min_value=-1,
        max_value=0,
        help_text="Signed fraction of the value, e.g. -0.1 (10 % below); null: none",
    )
    upper = fields.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=10,
        help_text="Fraction of the value, e.g. 0.1; null: none",
    )
    unit = _text(32)
    name = _text(128)
    model = _text(128)
    precision = _text(16)
    gpus = fields.IntegerField(required=False, allow_null=True, min_value=1, max_value=MAX_GPUS)
    case = _text(128)
    partition = fields.RegexField(
        _NAME, max_length=64, required=False, allow_blank=True, allow_null=True
    )
    gpu_type = fields.RegexField(_NAME, max_length=64, required=False, allow_blank=True, allow_null=True)

    def validate(self, data: dict) -> dict:
        if "derive_from" not in data:
            missing = {
                f: ["Required unless `derive_from` is given."]
                for f in ("tool", "metric", "value")
                if f not in data
            }
            if missing:
                raise serializers.ValidationError(missing)
        return data
