c:
  cmd.run
a:
  cmd.run:
    - order: 3
b:
  cmd.run:
    - order: last
first:
  cmd.run:
    - order: first
z:
  cmd.run
