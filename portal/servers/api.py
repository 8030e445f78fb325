from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.servers.selectors import server_cards, server_get
from portal.servers.serializers import SessionCreateSerializer, SessionSerializer
from portal.servers.services import ServerRefused, server_start, server_stop, servers_refresh


class HubUnavailableError(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "hub_unavailable"


def _refused(error: ServerRefused) -> exceptions.APIException:
    if error.unavailable:
        return HubUnavailableError(error.message)
    return exceptions.ValidationError({"non_field_errors": [error.message]})


def _cards(request: Request) -> list:
    return server_cards(user=request.user, hub_servers=servers_refresh(user=request.user))


class SessionListApi(APIView):
    @extend_schema(responses=SessionSerializer(many=True), summary="Your notebook servers")
    def get(self, request: Request) -> Response:
        return Response(SessionSerializer(_cards(request), many=True).data)

    @extend_schema(request=SessionCreateSerializer, responses={201: SessionSerializer},
                   summary="Start a notebook server (same options and checks as the server page)")
    def post(self, request: Request) -> Response:
        serializer = SessionCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        try:
            server = server_start(user=request.user, **serializer.validated_data)
        except DjangoValidationError as error:
            raise exceptions.ValidationError(error.message_dict) from error
        except ServerRefused as error:
            raise _refused(error) from error
        card = next(card for card in _cards(request) if card.name == server.name and card.active)
        return Response(SessionSerializer(card).data, status=status.HTTP_201_CREATED)


class SessionDetailApi(APIView):
    @extend_schema(responses=SessionSerializer, summary="One of your notebook servers")
    def get(self, request: Request, name: str) -> Response:
        card = next((card for card in _cards(request) if card.name == name), None)
        if card is None:
            raise exceptions.NotFound("No such server.")
        return Response(SessionSerializer(card).data)

    @extend_schema(responses={204: None}, summary="Stop a notebook server (cancels its Slurm job)")
    def delete(self, request: Request, name: str) -> Response:
        server = server_get(user=request.user, name=name)
        if server is None:
            raise exceptions.NotFound("No such server.")
        try:
            server_stop(server=server)
        except ServerRefused as error:
            raise _refused(error) from error
        return Response(status=status.HTTP_204_NO_CONTENT)
