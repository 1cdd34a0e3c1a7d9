"""The device a trace ran on and its peaks: the row type, the table, rows recognised from a trace,
lookup and overrides, CPU peaks and caches, calibration."""
