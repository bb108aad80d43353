pkgs:
  pkg.installed:
    - names:
      - a
      - b
conf:
  file.managed:
    - name: /etc/conf
    - user: root
    - mode: '0600'
    - require:
      - pkg: a
cfg2:
  file.managed:
    - name: /etc/conf2
    - use:
      - file: /etc/conf
    - use_in:
      - file: cfg3
cfg3:
  file.managed:
    - name: /etc/conf3
    - user: nobody
extend:
  /etc/conf:
    file:
      - mode: '0644'
  pkgs:
    pkg:
      - name: c
exclude:
  - other
