"""inferslice.control.actuators"""
