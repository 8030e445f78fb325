"""Typed input fields: a JSON value must already have the type the schema gives it. No "5" or true for
a number, no number or list for a string, no "true" for a boolean: DRF's own fields coerce all of these.

A form body or a query string carries only text, so there the text is parsed as DRF does."""

from typing import Any

from django.http import QueryDict
from rest_framework import serializers


class _Typed:
    json_types: tuple[type, ...] = ()

    def to_internal_value(self, data: Any) -> Any:
        text_input = isinstance(getattr(self.root, "initial_data", None), QueryDict)
        # bool is an int in Python, but true is no number in JSON.
        if not text_input and (not isinstance(data, self.json_types)
                               or isinstance(data, bool) != (bool in self.json_types)):
            self.fail("invalid")
        return super().to_internal_value(data)


class CharField(_Typed, serializers.CharField):
    json_types = (str,)


class RegexField(_Typed, serializers.RegexField):
    json_types = (str,)


class IntegerField(_Typed, serializers.IntegerField):
    json_types = (int,)


class FloatField(_Typed, serializers.FloatField):
    json_types = (int, float)


class BooleanField(_Typed, serializers.BooleanField):
    json_types = (bool,)


def number_from_text(text: str, kind: type[int] | type[float]) -> int | float | str:
    """A form field's text as the number it spells, or the text itself, which a typed check then
    refuses with its own message."""
    try:
        return kind(text)
    except ValueError:
        return text
