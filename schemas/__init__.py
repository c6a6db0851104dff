"""perfstack's JSON Schemas, shipped as package data (``report.schema.json``)."""
