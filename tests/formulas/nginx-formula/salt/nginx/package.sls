{%- set tplroot = tpldir.split('/')[0] %}
{%- from tplroot ~ "/map.jinja" import nginx with context %}

nginx-package-install-pkg-installed:
  pkg.installed:
    - name: {{ nginx.pkg.name }}
{%- if nginx.pkg.version %}
    - version: {{ nginx.pkg.version }}
{%- endif %}

{%- for module in nginx.modules %}
nginx-package-module-{{ module }}:
  pkg:
    - installed
    - name: libnginx-mod-{{ module }}
    - require:
      - pkg: nginx-package-install-pkg-installed
{%- endfor %}
