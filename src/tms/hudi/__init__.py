"""The Hudi table format: properties, timeline, file-system view, plans, log files, writer.

A pure library: it never imports the service side.
"""
