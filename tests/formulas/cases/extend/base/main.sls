include:
  - lib
  - gone

exclude:
  - sls: 'gon*'
  - id: lib_unwanted
  - lib.unused

extend:
  /etc/lib.conf:
    file:
      - source: salt://new.conf
      - require:
        - pkg: lib_pkg
  lib_svc:
    service:
      - dead
      - enable: False
  lib_pkg:
    pkg.installed:
      - names:
        - libfoo
