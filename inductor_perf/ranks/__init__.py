"""Many ranks' traces: the map (digest: one trace -> what the view reads) run by an executor (executors:
local processes or a Dask cluster), the reduce to the cross-rank view (view); files and after_capture drive them."""
