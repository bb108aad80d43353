svc_two:
  service.running:
    - require:
      - sls: app.config
