other_a:
  cmd.run
other_b:
  cmd.run:
    - require:
      - other_a
