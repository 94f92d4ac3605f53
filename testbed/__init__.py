"""inferslice.testbed"""
