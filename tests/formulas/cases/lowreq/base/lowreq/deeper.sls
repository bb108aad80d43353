deeper_a:
  cmd.run
