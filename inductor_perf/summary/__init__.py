"""A trace summarized into tables (kernels, modules, lines, idle, steps, collectives, coverage), by
loading it whole or in one streaming pass (stream/)."""
