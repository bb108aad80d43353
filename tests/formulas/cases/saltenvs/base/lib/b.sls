lib_b:
  cmd.run:
    - require_in:
      - cmd: dev_common
