"""Trace files in and out, no analysis: load, save, the one writer; windows of text for the
streaming engines; the engine names and the large-trace threshold."""
