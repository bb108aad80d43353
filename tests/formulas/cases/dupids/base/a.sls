same:
  cmd.run:
    - name: echo a
