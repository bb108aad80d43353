devtop:
  cmd.run
