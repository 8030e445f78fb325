from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from portal.accounts.login import login_check
from portal.accounts.selectors import api_token_list
from portal.accounts.serializers import (
    ApiTokenCreatedSerializer,
    ApiTokenSerializer,
    MeSerializer,
    TokenObtainInputSerializer,
)
from portal.accounts.services import api_token_create, api_token_revoke
from portal.core.schema import ErrorSerializer


class MeApi(APIView):
    @extend_schema(responses=MeSerializer, summary="The authenticated user")
    def get(self, request: Request) -> Response:
        return Response(MeSerializer(request.user).data)


class TokenListCreateApi(APIView):
    """List your tokens (authenticated), or obtain a new one with your LDAP credentials."""

    def _obtaining(self) -> bool:
        # Schema generation inspects the view without a request.
        return self.request is not None and self.request.method == "POST"

    def get_permissions(self) -> list:
        return [AllowAny()] if self._obtaining() else super().get_permissions()

    def get_authenticators(self) -> list:
        # Obtaining a token proves identity with the password alone (and needs no CSRF token).
        return [] if self._obtaining() else super().get_authenticators()

    @extend_schema(responses=ApiTokenSerializer(many=True), summary="Your API tokens")
    def get(self, request: Request) -> Response:
        return Response(ApiTokenSerializer(api_token_list(user=request.user), many=True).data)

    @extend_schema(request=TokenObtainInputSerializer, responses={
        201: ApiTokenCreatedSerializer,
        401: OpenApiResponse(ErrorSerializer, description="Wrong username or password (counted)"),
        403: OpenApiResponse(ErrorSerializer, description="Not in the portal's LDAP group"),
        429: OpenApiResponse(ErrorSerializer, description="Too many failures: locked out from this address, "
                             "or the username's short delay (Retry-After says how long)"),
        503: OpenApiResponse(ErrorSerializer, description="The directory is unavailable"),
    }, auth=[], summary="Obtain a token with LDAP username and password")
    def post(self, request: Request) -> Response:
        data = TokenObtainInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = login_check(request=request._request, username=data.validated_data["username"],
                           password=data.validated_data["password"])
        token, key = api_token_create(user=user, name=data.validated_data["name"])
        body = ApiTokenCreatedSerializer({**ApiTokenSerializer(token).data, "token": key}).data
        return Response(body, status=status.HTTP_201_CREATED)


class TokenDetailApi(APIView):
    @extend_schema(responses={204: None}, summary="Revoke one of your tokens")
    def delete(self, request: Request, token_id: int) -> Response:
        get_object_or_404(api_token_list(user=request.user), pk=token_id)
        api_token_revoke(user=request.user, token_id=token_id)
        return Response(status=status.HTTP_204_NO_CONTENT)
