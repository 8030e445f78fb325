from collections.abc import Callable

from rest_framework import serializers

from portal.core.errors import InvalidInput
from portal.files.paths import path_clean, root_clean
from portal.files.selectors import SORTS


def _checked(clean: Callable[..., object], value: object, field: str, **kwargs: object) -> object:
    try:
        return clean(value, field=field, **kwargs)
    except InvalidInput as error:
        raise serializers.ValidationError(error.fields[field]) from error


class LocationSerializer(serializers.Serializer):
    """A file or folder: a root and a path relative to it ("" or absent: the root itself)."""

    root = serializers.CharField(max_length=80, help_text="home, scratch, data, or project:<name> (a "
                                                          "project's shared folder)")
    path = serializers.CharField(required=False, default="", allow_blank=True, trim_whitespace=False,
                                 max_length=4100, help_text="Relative to the root, e.g. data/run1")

    def validate_root(self, value: str) -> str:
        return _checked(root_clean, value, "root")  # type: ignore[return-value]

    def validate_path(self, value: str) -> str:
        return _checked(path_clean, value, "path")  # type: ignore[return-value]


class ItemSerializer(LocationSerializer):
    """A file or folder inside the root (never the root itself)."""

    def validate_path(self, value: str) -> str:
        return _checked(path_clean, value, "path", allow_root=False)  # type: ignore[return-value]


class ListQuerySerializer(LocationSerializer):
    sort = serializers.ChoiceField(choices=SORTS, default="name")
    order = serializers.ChoiceField(choices=("asc", "desc"), default="asc")
    filter = serializers.CharField(required=False, default="", allow_blank=True, max_length=255,
                                   help_text="Only names containing this (any case)")


class MoveSerializer(ItemSerializer):
    to_root = serializers.CharField(required=False, max_length=80, help_text="Default: the same root")
    to_path = serializers.CharField(trim_whitespace=False, max_length=4100,
                                    help_text="The new path (the destination must not exist)")

    def validate_to_root(self, value: str) -> str:
        return _checked(root_clean, value, "to_root")  # type: ignore[return-value]

    def validate_to_path(self, value: str) -> str:
        return _checked(path_clean, value, "to_path", allow_root=False)  # type: ignore[return-value]

    def validate(self, attrs: dict) -> dict:
        attrs.setdefault("to_root", attrs["root"])
        return attrs


class EditSerializer(ItemSerializer):
    content = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=8 * 1024 * 1024)


class EntrySerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.ChoiceField(choices=("file", "dir", "link", "other"))
    size = serializers.IntegerField()
    mtime_ns = serializers.IntegerField()


class FolderSerializer(serializers.Serializer):
    root = serializers.CharField()
    path = serializers.CharField()
    entries = EntrySerializer(many=True)
    truncated = serializers.BooleanField()


class StatSerializer(serializers.Serializer):
    type = serializers.CharField()
    size = serializers.IntegerField()
    mtime_ns = serializers.IntegerField()
    etag = serializers.CharField()


class PreviewSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=("text", "csv", "notebook", "image", "binary"))
    size = serializers.IntegerField()
    etag = serializers.CharField()
    text = serializers.CharField()
    rows = serializers.ListField(child=serializers.ListField(child=serializers.CharField()), allow_null=True)
    truncated = serializers.BooleanField()


class FileUsageSerializer(serializers.Serializer):
    total = serializers.IntegerField()
    free = serializers.IntegerField()
    used = serializers.IntegerField()
