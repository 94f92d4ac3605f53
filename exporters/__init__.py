"""inferslice.exporters"""
