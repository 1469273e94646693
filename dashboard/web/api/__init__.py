"""The REST API (``/api/v1/``): ``views`` answers, ``openapi`` describes, ``urls`` routes."""
