include:
  - .unused

lib_pkg:
  pkg.installed:
    - name: libfoo-1

lib_conf:
  file.managed:
    - name: /etc/lib.conf
    - source: salt://old.conf
    - require:
      - pkg: lib_pkg

lib_svc:
  service.running:
    - enable: True

lib_unwanted:
  cmd.run
