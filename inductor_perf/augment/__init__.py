"""Costs written onto trace events as args (FLOPs, bytes, achieved %, roofline bound): in memory,
or streamed through a large file (stream/)."""
