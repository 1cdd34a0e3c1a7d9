"""Torch-free vocabulary and contracts every stage reads: trace event arg keys and categories, the
EventCost contract, kernel tags, kernel kinds and names, the marker format."""
