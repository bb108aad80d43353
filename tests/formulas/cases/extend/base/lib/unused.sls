unused_thing:
  cmd.run
