from rest_framework import serializers

from portal.reports.services import EVENTS

HOSTNAME = r"^[A-Za-z0-9][A-Za-z0-9.-]{0,63}$"
# Slurm's pending reasons: "Resources", "ReqNodeNotAvail, UnavailableNodes:gpu[1-2]"...
REASON = r"^[A-Za-z0-9][A-Za-z0-9 .,:()\[\]_+=/-]{0,127}$"
# Which event carries which field: each is refused with the other events, and required with its own
# unless optional.
_FIELD_OF_EVENT = {"started": "node", "exited": "exit_code", "queued": "reason", "ready": "port"}
_OPTIONAL = {"reason", "port"}


class ReportSerializer(serializers.Serializer):
    event = serializers.ChoiceField(choices=EVENTS, help_text=(
        "started (node), ready (a web app: port), exited (exit_code); a session's spawner: queued (reason)"))
    node = serializers.RegexField(HOSTNAME, max_length=64, required=False,
                                  help_text="With started: the host name of the node it runs on",
                                  error_messages={"invalid": "A host name: letters, digits, . and -."})
    exit_code = serializers.IntegerField(min_value=-255, max_value=255, required=False,
                                         help_text="With exited: the script's exit status")
    port = serializers.IntegerField(min_value=1024, max_value=65535, required=False, help_text=(
        "With ready, from a web app's runner: the port on its node that the apps gateway connects to"))
    reason = serializers.RegexField(REASON, max_length=128, required=False,
                                    help_text="With queued, optional: Slurm's pending reason",
                                    error_messages={"invalid": "Slurm's pending reason, e.g. Resources."})

    def validate(self, attrs: dict) -> dict:
        errors = {key: ["Unknown field."] for key in sorted(set(self.initial_data) - set(self.fields))}
        wanted = _FIELD_OF_EVENT.get(attrs["event"])
        for field in _FIELD_OF_EVENT.values():
            if field == wanted and field not in attrs and field not in _OPTIONAL:
                errors[field] = [f"Required with event {attrs['event']}."]
            elif field != wanted and field in attrs:
                event = next(event for event, name in _FIELD_OF_EVENT.items() if name == field)
                errors[field] = [f"Only with event {event}."]
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class ReportResultSerializer(serializers.Serializer):
    applied = serializers.BooleanField(help_text="False: nothing to change (a repeat, a late report, "
                                                 "an object that ended or does not exist)")
