{%- set tplroot = tpldir.split('/')[0] %}
{%- from tplroot ~ "/map.jinja" import nginx with context %}

include:
  - .service
  - nginx.users

{%- for site, conf in salt['pillar.get']('nginx:vhosts', {}) | dictsort %}
nginx-site-{{ site }}:
  file.managed:
    - name: {{ nginx.sites.dir }}/{{ site }}.conf
    - contents: |
        server_name {{ conf.server_name }};
        listen {{ conf.get('port', 80) }};
    - use:
      - file: nginx-config-file-file-managed
    - require_in:
      - service: nginx-service-running-service-running
    - onchanges_in:
      - cmd: nginx-test-config
{%- endfor %}

nginx-test-config:
  cmd.run:
    - name: nginx -t
    - order: last

extend:
  nginx-service-running-service-running:
    service:
      - reload: True
      - watch:
        - file: nginx-config-dirs
