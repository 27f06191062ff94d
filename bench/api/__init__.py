"""The control plane's own benchmarks (the api-flows scenario runs them)."""
