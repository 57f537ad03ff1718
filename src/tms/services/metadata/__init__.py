"""The metadata table's own table services: its compaction (`compaction`) and the clean that
follows it (`clean`)."""
