"""inferslice.dashboards"""
