"""inferslice.deploy"""
