"""The browser pages: the chat and account pages, shared links, the theme and language, the page security headers."""
