"""The fault-injection soak (bench/scenarios/soak.py): load, faults, probes and their analysis."""
