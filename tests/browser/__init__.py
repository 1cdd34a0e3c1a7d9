"""The real-browser tier (make test-browser): a package, so that its conftest does not shadow tests/conftest.py, which other tiers import as `conftest`."""
