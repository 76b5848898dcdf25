"""The API layer: credentials, typed errors, requests and watches. The only package that speaks HTTP."""
