"""The streaming summary engine: one pass over a large file's text, shared with a forked worker."""
