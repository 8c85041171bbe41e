"""The interface language of a signed-in user is the one saved on their account (the account
page, or the language menu while signed in), so that every browser they sign in to opens in it.
Signed out, or with none saved, Django's LocaleMiddleware has chosen it (cookie, then the
browser's Accept-Language)."""

from __future__ import annotations

from django.core.exceptions import ObjectDoesNotExist
from django.utils import translation

from chat.accounts.account import account_language_of
from serving.loop_middleware import DualMiddleware, request_db


class AccountLanguageMiddleware(DualMiddleware):
    """After LocaleMiddleware and AuthenticationMiddleware (settings.MIDDLEWARE). On the loop the
    user (unless a bearer token signed the request in) and the saved language are read in one
    trip to the request's thread."""

    def call_sync(self, request):
        _activate(request, _saved_language(request))
        return self.get_response(request)

    async def call_async(self, request):
        if getattr(request, "api_token", None) is not None:
            language = _saved_language(request)  # read with the token: nothing to wait for
        else:
            language = await request_db(_saved_language)(request)
        _activate(request, language)
        return await self.get_response(request)


def _saved_language(request) -> str:
    """The signed-in user's saved language ("" for none, or signed out). A bearer token's user
    comes with the account's settings (chat.accounts.tokens.token_user)."""
    user = request.user
    if not user.is_authenticated:
        return ""
    if getattr(request, "api_token", None) is None:
        return account_language_of(user_id=user.pk)
    try:
        return user.account_settings.language
    except ObjectDoesNotExist:  # none saved
        return ""


def _activate(request, language: str) -> None:
    if language and translation.check_for_language(language):
        translation.activate(language)
        request.LANGUAGE_CODE = translation.get_language()
