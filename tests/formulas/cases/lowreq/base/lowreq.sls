include:
  - lowreq.inc

z_first:
  cmd.run:
    - require:
      - cmd: 'a*'

apple:
  cmd.run

avocado:
  cmd.run:
    - name: echo avocado

by_name:
  cmd.run:
    - require:
      - echo avocado
      - id: apple

any_of:
  cmd.run:
    - require_any:
      - cmd: apple
    - onchanges_any:
      - cmd: apple
    - watch:
      - cmd: avocado

whole_sls:
  cmd.run:
    - require:
      - sls: lowreq.inc
      - sls: 'lowreq.i*'
