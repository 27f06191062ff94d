"""Measurement tools that run inside network namespaces (senders, receivers, samplers, parsers)."""
