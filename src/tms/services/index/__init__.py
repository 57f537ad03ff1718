"""Building metadata table partitions (the `indexing` action, RFC-45): `indexing`."""
