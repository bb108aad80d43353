include:
  - dev: common
  - 'lib.*'
web:
  cmd.run:
    - require:
      - sls: common
