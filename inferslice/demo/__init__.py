"""The main job on one machine: the testbed with the whole platform around it, and a scripted story."""
