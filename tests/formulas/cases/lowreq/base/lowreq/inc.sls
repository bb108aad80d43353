include:
  - lowreq.deeper
inc_a:
  cmd.run
