a:
  cmd.run:
    - require:
      - cmd: b
b:
  cmd.run:
    - require:
      - cmd: c
c:
  cmd.run:
    - require:
      - cmd: a
d:
  cmd.run
