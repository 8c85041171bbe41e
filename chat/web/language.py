"""The interface language of a signed-in user is the one saved on their account (the account
page, or the language menu while signed in), so that every browser they sign in to opens in it.
Signed out, or with none saved, Django's LocaleMiddleware has chosen it (cookie, then the
browser's Accept-Language)."""

from __future__ import annotations

from django.utils import translation

from chat.web.account import account_language_of


class AccountLanguageMiddleware:
    """After LocaleMiddleware and AuthenticationMiddleware (settings.MIDDLEWARE)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.user.is_authenticated:
            language = account_language_of(user_id=request.user.pk)
            if language and translation.check_for_language(language):
                translation.activate(language)
                request.LANGUAGE_CODE = translation.get_language()
        return self.get_response(request)
