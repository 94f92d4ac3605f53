"""inferslice.bottleneck"""
