"""The metadata table (`.hoodie/metadata`): its records, reading it, applying commits to it."""
