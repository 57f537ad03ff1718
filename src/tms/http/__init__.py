"""What the API and commit ingest share over HTTP: error bodies and request fields."""
