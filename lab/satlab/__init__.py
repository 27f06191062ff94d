"""satlab: network-namespace satellite lab for Perigee (topology, link emulator control, servers)."""

__version__ = "0.1.0"
