lib_a:
  cmd.run
