"""Roofline arithmetic: one kernel placed against the compute and memory roofs, and the
cache-level roofs of a device."""
