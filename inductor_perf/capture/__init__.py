"""Run time: the profiler window around compiled calls and what a capture writes."""
