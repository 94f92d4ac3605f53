"""inferslice.collectors"""
