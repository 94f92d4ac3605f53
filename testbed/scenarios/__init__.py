"""Scenarios: the paper's experiments on the testbed, and the fidelity report."""
