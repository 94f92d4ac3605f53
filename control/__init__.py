"""inferslice.control"""
