only_dev:
  cmd.run
