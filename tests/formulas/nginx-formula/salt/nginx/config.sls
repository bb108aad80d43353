{%- set tplroot = tpldir.split('/')[0] %}
{%- set sls_package_install = tplroot ~ '.package' %}
{%- from tplroot ~ "/map.jinja" import nginx with context %}

include:
  - {{ sls_package_install }}

nginx-config-file-file-managed:
  file.managed:
    - name: {{ nginx.config.file }}
    - source: salt://{{ tplroot }}/files/nginx.conf.jinja
    - template: jinja
    - user: {{ nginx.config.user }}
    - group: {{ nginx.config.group }}
    - mode: '{{ nginx.config.mode }}'
    - makedirs: True
    - require:
      - sls: {{ sls_package_install }}
    - context:
        nginx: {{ nginx | json }}
    - watch_in:
      - service: nginx-service-running-service-running

nginx-config-dirs:
  file.directory:
    - user: root
    - names:
      - {{ nginx.sites.dir }}
      - {{ nginx.sites.enabled }}:
        - mode: '0755'
      - /var/log/nginx:
        - user: {{ nginx.config.user }}
    - require_in:
      - file: nginx-config-file-file-managed

nginx-unwanted-default-site:
  file.absent:
    - name: {{ nginx.sites.enabled }}/default
