other_state:
  cmd.run
