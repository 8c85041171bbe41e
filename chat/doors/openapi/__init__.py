"""The OpenAPI document of GET /api/schema/: the paths from the URL patterns, what each route does, its objects."""
