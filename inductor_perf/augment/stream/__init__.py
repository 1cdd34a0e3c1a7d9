"""The large-trace engine behind ``augment_file(engine="stream")``: events parsed one at a time from
the file's bytes, only the augmented ones re-encoded, the work shared with a forked worker."""
