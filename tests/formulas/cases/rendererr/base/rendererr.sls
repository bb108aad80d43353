a:
  cmd.run:
    - name: {{ x.y.z }}
