"""inferslice.dashboards: Grafana dashboards, Prometheus rules (plain and PrometheusRule), their
promtool unit tests and an Alertmanager config, all generated from the tiers file.

Modules: ``queries`` (shared PromQL), ``panels`` (grafanalib blocks, layout), ``boards`` (the
dashboards), ``rules`` (recording and alerting rules), ``ruletests`` (promtool tests),
``expected_alerts`` (their oracle: labels, annotations and holds written independently of ``rules``),
``alertmanager`` (routes and webhook), ``build`` (write everything), ``checks`` (offline checks),
``live`` (run every panel query against a real Prometheus).
"""
