"""Perigee benchmark harness: scenarios on satlab, records, tables and plots."""
