a:
  cmd.run:
    - require:
      - pkg: nothere
b:
  cmd.run:
    - name: echo b
    - watch:
      - file: /nope
