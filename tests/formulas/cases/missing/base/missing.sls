include:
  - nothere
  - .alsonot
x:
  cmd.run
extend:
  ghost:
    cmd:
      - name: boo
