base_conf:
  file.managed:
    - name: /etc/base.conf
    - user: root
    - mode: '0600'
    - require:
      - pkg: pkg1

derived_conf:
  file.managed:
    - name: /etc/derived.conf
    - mode: '0644'
    - use:
      - file: base_conf

pkg1:
  pkg.installed:
    - require_in:
      - base_conf
      - file: /etc/derived.conf
    - watch_in:
      - service: svc1
    - onchanges_in:
      - sls: other
    - onfail_in: {cmd: alarm}

svc1:
  service.running:
    - use_in:
      - service: svc2

svc2:
  service.running:
    - name: svc-two

alarm:
  cmd.run:
    - name: echo failed
    - onfail:
      - file: base_conf

include:
  - other
