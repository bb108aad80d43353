{%- set tplroot = tpldir.split('/')[0] %}
{%- from tplroot ~ "/map.jinja" import nginx with context %}

include:
  - .config

nginx-service-running-service-running:
  service.running:
    - name: {{ nginx.service.name }}
    - enable: {{ nginx.service.enable }}
    - require:
      - pkg: nginx-package-install-pkg-installed
