"""Many ranks' traces: each summarized (files, after_capture), then the cross-rank view (view)."""
