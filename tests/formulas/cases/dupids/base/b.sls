same:
  cmd.run:
    - name: echo b
